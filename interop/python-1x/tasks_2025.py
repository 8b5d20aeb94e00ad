"""Drives agentgate's 2025-11-25 task wire with the official Python SDK 1.x
(mcp 1.30.0, `session.experimental`): the other 1.x client of that wire, beside
the TypeScript SDK's (interop/typescript/tasks-2025.mjs), whose scenarios and
output this mirrors line for line.

    python tasks_2025.py [--start-only | --attach TASK_ID] --url http://127.0.0.1:PORT/mcp
    python tasks_2025.py [--start-only | --attach TASK_ID] --stdio PROGRAM [ARG ...]

Decides as VS Code does: a tool is called as a task only when the server's
capabilities have `tasks.requests.tools.call` and the tool's
`execution.taskSupport` is "optional" or "required" (the 1.x Python client has
no rule of its own: `call_tool_as_task` is the caller's choice). Prints one JSON
line per scenario (qbusiness, approval, copilot, cancel, list, and a2a when
the server has the `helper` agent) for
crates/agentgate/tests/external/interop.rs.

Re-attaching after a restart takes two runs: `--start-only` starts Copilot on
acme/widgets#2 as a task, prints its id (scenario `started`) and ends its
session; after the server restarts, `--attach TASK_ID` opens a new session and
follows that task to its result (scenario `attached`).
"""

import json
import os
import sys
from contextlib import AsyncExitStack

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

TICKET_PLUGIN_ID = "7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f"
QUESTION = {"query": "Where is the Berlin office?"}
TICKET = {"query": "Open a ticket: my laptop does not boot", "plugin_id": TICKET_PLUGIN_ID}
FINISHES = {"owner": "acme", "repo": "widgets", "issue_number": 1}
OUTLIVES_A_RESTART = {"owner": "acme", "repo": "widgets", "issue_number": 2}
SLOW = {"owner": "acme", "repo": "widgets", "issue_number": 5}
TERMINAL = {"completed", "failed", "cancelled"}
RELATED_TASK = "io.modelcontextprotocol/related-task"


def emit(scenario, **fields):
    print(json.dumps({"scenario": scenario, "client": "python-sdk-1x", **fields}), flush=True)


def dump(model):
    return None if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


def defaults_of(schema):
    """Accept a form as proposed: every field's default."""
    return {
        key: prop["default"]
        for key, prop in (schema or {}).get("properties", {}).items()
        if "default" in prop
    }


def error_of(error):
    if isinstance(error, McpError):
        return {"code": error.error.code, "message": error.error.message}
    return {"code": None, "message": str(error)}


async def main(mode, how, rest):
    forms = []
    notified = []

    async def on_elicit(_context, params):
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="decline")
        meta = params.model_dump(by_alias=True, exclude_none=True).get("_meta", {})
        forms.append({"message": params.message, "relatedTask": meta.get(RELATED_TASK)})
        return types.ElicitResult(action="accept", content=defaults_of(params.requestedSchema))

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.TaskStatusNotification
        ):
            p = message.root.params
            notified.append({"taskId": p.taskId, "status": p.status, "statusMessage": p.statusMessage})

    async with AsyncExitStack() as stack:
        if how == "--url":
            read, write, _ = await stack.enter_async_context(streamable_http_client(rest[0]))
        else:
            # Over stdio the server gets this process's environment (the emulators' settings).
            server = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(server))
        session = await stack.enter_async_context(
            ClientSession(read, write, elicitation_callback=on_elicit, message_handler=on_message)
        )
        initialized = await session.initialize()
        protocol = initialized.protocolVersion
        capability = (session.get_server_capabilities() or types.ServerCapabilities()).tasks
        tools = (await session.list_tools()).tools
        task_support = {t.name: (t.execution.taskSupport if t.execution else None) for t in tools}

        def as_task(name):
            # VS Code's rule, literally.
            calls = capability and capability.requests and capability.requests.tools
            return bool(calls and calls.call is not None) and task_support.get(name) in ("optional", "required")

        tasks = session.experimental

        async def run(scenario, tool, args):
            forms.clear()
            if not as_task(tool):
                emit(scenario, protocol=protocol, capability=dump(capability),
                     taskSupport=task_support.get(tool), asTask=False, taskId=None,
                     error="the client's rule did not choose a task")
                return
            created = await tasks.call_tool_as_task(tool, args)
            task_id = created.task.taskId
            statuses = []
            result = error = None
            # tasks/get until the task needs the client or ends; then tasks/result,
            # which delivers its questions (elicitation/create) and its result.
            async for status in tasks.poll_task(task_id):
                statuses.append(status.status)
                if status.status == "input_required":
                    break
            try:
                result = dump(await tasks.get_task_result(task_id, types.CallToolResult))
            except McpError as e:
                error = e.error.message
            task = await tasks.get_task(task_id)
            emit(scenario, protocol=protocol, capability=dump(capability),
                 taskSupport=task_support.get(tool), asTask=True, taskId=task_id,
                 created=created.task.status, statuses=statuses, status=task.status,
                 statusMessage=task.statusMessage, result=result, error=error,
                 inputRequests=len(forms), forms=list(forms),
                 notified=[n for n in notified if n["taskId"] == task_id])

        async def cancel(scenario, tool, args):
            created = await tasks.call_tool_as_task(tool, args)
            task_id = created.task.taskId
            before = None
            for _ in range(600):
                task = await tasks.get_task(task_id)
                if "opened pull request" in (task.statusMessage or ""):
                    before = task.statusMessage
                    break
                await anyio.sleep(0.2)
            answer = await tasks.cancel_task(task_id)
            for _ in range(240):
                task = await tasks.get_task(task_id)
                if task.status in TERMINAL:
                    break
                await anyio.sleep((task.pollInterval or 500) / 1000)
            again = None
            try:
                await tasks.cancel_task(task_id)
            except Exception as e:  # noqa: BLE001 - the error is the observation
                again = error_of(e)
            emit(scenario, protocol=protocol, asTask=True, taskId=task_id,
                 created=created.task.status, cancelledWhile=before,
                 cancelAnswer="task" if answer.taskId == task_id else dump(answer),
                 status=task.status, cancelAgain=again)

        async def list_all(scenario):
            # Every page, following nextCursor; then a made-up cursor.
            task_ids, statuses, pages, cursor = [], [], 0, None
            while True:
                page = await tasks.list_tasks(cursor)
                pages += 1
                task_ids += [t.taskId for t in page.tasks]
                statuses += [t.status for t in page.tasks]
                cursor = page.nextCursor
                if not cursor or pages >= 100:
                    break
            bad_cursor = None
            try:
                await tasks.list_tasks("not-a-cursor")
            except Exception as e:  # noqa: BLE001 - the error is the observation
                bad_cursor = error_of(e)
            emit(scenario, protocol=protocol,
                 listCapability=dump(capability.list) if capability else None,
                 pages=pages, taskIds=task_ids, statuses=statuses, badCursor=bad_cursor)

        async def start_only(scenario, tool, args):
            created = await tasks.call_tool_as_task(tool, args)
            task = await tasks.get_task(created.task.taskId)
            emit(scenario, protocol=protocol, asTask=as_task(tool), taskId=task.taskId,
                 status=task.status, statusMessage=task.statusMessage)

        async def attach(scenario, task_id):
            before = await tasks.get_task(task_id)
            result = error = None
            try:
                result = dump(await tasks.get_task_result(task_id, types.CallToolResult))
            except McpError as e:
                error = e.error.message
            task = await tasks.get_task(task_id)
            emit(scenario, protocol=protocol, taskId=task_id, before=before.status,
                 status=task.status, result=result, error=error)

        with anyio.fail_after(120):
            if mode == "--start-only":
                await start_only("started", "assign_copilot_to_issue", OUTLIVES_A_RESTART)
                return
            if mode is not None:
                await attach("attached", mode)
                return
            await run("qbusiness", "QBusinessQueryTool", QUESTION)
            await run("approval", "QBusinessQueryTool", TICKET)
            await run("copilot", "assign_copilot_to_issue", FINISHES)
            await cancel("cancel", "assign_copilot_to_issue", SLOW)
            await list_all("list")
            # An A2A agent behind agentgate, when the server has one (after
            # the list, whose test expects exactly the tasks above).
            if "helper_send_message" in task_support:
                await run("a2a", "helper_send_message", {"message": "quick-answer"})


if __name__ == "__main__":
    argv = sys.argv[1:]
    mode = None
    if argv[:1] == ["--start-only"]:
        mode, argv = "--start-only", argv[1:]
    elif argv[:1] == ["--attach"] and len(argv) > 1:
        mode, argv = argv[1], argv[2:]
    how, rest = (argv[0], argv[1:]) if len(argv) > 1 else (None, [])
    if how not in ("--url", "--stdio"):
        print(
            "usage: python tasks_2025.py [--start-only | --attach TASK_ID] "
            "--url URL | --stdio PROGRAM [ARG ...]",
            file=sys.stderr,
        )
        sys.exit(2)
    anyio.run(main, mode, how, rest)
