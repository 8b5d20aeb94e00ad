"""Drives agentgate's A2A emulator with the official A2A Python SDK (a2a-sdk 1.3.0).

Usage: client.py BASE_URL [TOKEN]

Resolves the Agent Card, then, through the SDK's JSON-RPC client: a blocking send
(quick-answer), GetTask with historyLength, a non-blocking send and CancelTask
(long-running), CancelTask refused (refuses-cancel), the INPUT_REQUIRED round trip
(ask-input), a streamed send (long-running) and ListTasks. Prints one JSON line per
check and exits non-zero at the first disagreement, so a test sees exactly which
step of the official client disagrees with the emulator.
"""

import asyncio
import base64
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError
from google.protobuf import json_format, struct_pb2


def report(step, ok, **detail):
    print(json.dumps({"step": step, "ok": ok, **detail}), flush=True)
    if not ok:
        sys.exit(1)


def user_message(text, skill=None, task_id="", context_id="", steps=None):
    metadata = struct_pb2.Struct()
    if skill:
        metadata.update({"skill": skill})
    if steps:
        metadata.update({"steps": steps})
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    if skill or steps:
        message.metadata.CopyFrom(metadata)
    return message


async def last_event(client, request):
    events = [event async for event in client.send_message(request)]
    return events


async def main(base, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=30)
    blocking = await create_client(base, ClientConfig(streaming=False, httpx_client=http))
    card = blocking._card  # noqa: SLF001 - the resolved card, to report what the SDK read
    report("card", card.capabilities.streaming and len(card.skills) >= 6, name=card.name,
           binding=card.supported_interfaces[0].protocol_binding)

    # Blocking send: one Task event, completed, with the three part kinds.
    events = await last_event(blocking, SendMessageRequest(message=user_message("what is 6*7?")))
    task = events[-1].task
    parts = task.artifacts[0].parts if task.artifacts else []
    kinds = [p.WhichOneof("content") for p in parts]
    raw = base64.b64encode(parts[2].raw).decode() if len(parts) > 2 else ""
    report("send-blocking", task.status.state == TaskState.TASK_STATE_COMPLETED
           and kinds == ["text", "data", "raw"], state=TaskState.Name(task.status.state), kinds=kinds, raw=raw)

    got = await blocking.get_task(GetTaskRequest(id=task.id, history_length=1))
    report("get-task", got.id == task.id and len(got.history) == 1
           and got.status.state == TaskState.TASK_STATE_COMPLETED, history=len(got.history))

    # Non-blocking send, then cancel.
    request = SendMessageRequest(message=user_message("long-running", steps=100))
    request.configuration.return_immediately = True
    events = await last_event(blocking, request)
    running = events[-1].task
    canceled = await blocking.cancel_task(CancelTaskRequest(id=running.id))
    report("cancel", canceled.status.state == TaskState.TASK_STATE_CANCELED,
           state=TaskState.Name(canceled.status.state))

    request = SendMessageRequest(message=user_message("x", skill="refuses-cancel", steps=100))
    request.configuration.return_immediately = True
    stubborn = (await last_event(blocking, request))[-1].task
    try:
        await blocking.cancel_task(CancelTaskRequest(id=stubborn.id))
        report("cancel-refused", False, why="CancelTask succeeded")
    except TaskNotCancelableError as error:
        report("cancel-refused", True, error=type(error).__name__)

    # Input round trip.
    asked = (await last_event(blocking, SendMessageRequest(message=user_message("hi", skill="ask-input"))))[-1].task
    report("input-required", asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED,
           question=asked.status.message.parts[0].text)
    answer = user_message("Grace", task_id=asked.id, context_id=asked.context_id)
    done = (await last_event(blocking, SendMessageRequest(message=answer)))[-1].task
    report("input-answered", done.status.state == TaskState.TASK_STATE_COMPLETED
           and done.artifacts[0].parts[0].text == "Hello, Grace!", text=done.artifacts[0].parts[0].text)

    # Streaming send.
    streaming = await create_client(base, ClientConfig(streaming=True, httpx_client=http))
    events = await last_event(streaming, SendMessageRequest(message=user_message("long-running", steps=2)))
    kinds = [e.WhichOneof("payload") for e in events]
    final = events[-1]
    report("stream", kinds[0] == "task" and final.HasField("status_update")
           and final.status_update.status.state == TaskState.TASK_STATE_COMPLETED
           and "artifact_update" in kinds, kinds=kinds)

    listed = await blocking.list_tasks(ListTasksRequest(page_size=100))
    report("list-tasks", listed.total_size >= 5 and len(listed.tasks) == listed.total_size,
           total=listed.total_size, sample=json_format.MessageToDict(listed.tasks[0])["status"]["state"])
    await http.aclose()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: client.py BASE_URL [TOKEN]")
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))
