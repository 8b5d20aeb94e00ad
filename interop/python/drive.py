"""Drives agentgate with third-party Python MCP clients (not ours, not rmcp).

    drive.py CLIENT --url http://127.0.0.1:PORT/mcp
    drive.py CLIENT --stdio PROGRAM [ARG ...]

CLIENT is one of:
  fastmcp-tasks  fastmcp with fastmcp-tasks: protocol 2026-07-28 and the tasks
                 extension (`tasks/get`, `tasks/update`, `tasks/cancel`; it sends
                 no `Mcp-Name` header on them)
  mcp-legacy     the official `mcp` SDK in legacy mode: protocol 2025-11-25, no
                 tasks; elicitation inline, then agentgate's `task_status` /
                 `task_cancel` tools for work that outlives the call

Runs four scenarios against the emulators `agentgate sim` serves and prints one
JSON line per scenario on stdout (the Rust test `tests/external/interop.rs` checks them):
  qbusiness  a question answered with citations
  approval   a plugin action that needs approval, accepted as proposed
  copilot    Copilot assigned to issue #1, followed to its finished pull request
  cancel     Copilot assigned to issue #5 (slow), then the task cancelled

With `--scenarios a2a` it runs three instead, against an A2A agent served as the
tool `sdk_send_message` (the official A2A SDK's server, `interop/a2a/server.py`):
  a2a-quick   a quick answer (text, data and file parts)
  a2a-input   the agent asks a name (INPUT_REQUIRED), answered "Grace"
  a2a-cancel  a slow job, cancelled while the agent works

Over stdio the server inherits this process's environment (the emulators'
settings): both SDKs pass only a few variables to a server by default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

TICKET_PLUGIN_ID = "7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f"
QUESTION = {"query": "Where is the Berlin office?"}
TICKET = {"query": "Open a ticket: my laptop does not boot", "plugin_id": TICKET_PLUGIN_ID}
FINISHES = {"owner": "acme", "repo": "widgets", "issue_number": 1}
SLOW = {"owner": "acme", "repo": "widgets", "issue_number": 5}
TERMINAL = {"completed", "failed", "cancelled"}
A2A_TOOL = "sdk_send_message"
A2A_QUICK = {"message": "quick-answer what is six times seven?"}
A2A_INPUT = {"message": "ask-input please greet me"}
A2A_SLOW = {"message": "slow job, please"}
# The name given when the agent asks for one.
A2A_NAME = "Grace"
# Generous: the emulated agent finishes in seconds; this only bounds a hang.
TIMEOUT = 120


def emit(scenario: str, **fields: Any) -> None:
    print(json.dumps({"scenario": scenario, **fields}), flush=True)


def defaults_of(schema: dict) -> dict:
    """Accept the form as proposed: every field's default; an A2A agent's question
    (a form with one `answer` field and no default) is answered with A2A_NAME."""
    properties = schema.get("properties", {})
    answer = {k: v["default"] for k, v in properties.items() if "default" in v}
    if "answer" in properties and "answer" not in answer:
        answer["answer"] = A2A_NAME
    return answer


# --- fastmcp + fastmcp-tasks ---------------------------------------------------------


async def fastmcp_tasks(args: argparse.Namespace) -> None:
    import fastmcp_tasks  # noqa: F401  (importing it declares the tasks extension)
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
    from fastmcp_tasks import call_tool_task

    forms: list[dict] = []

    async def on_input(message, response_type, params, context):
        schema = getattr(params, "requested_schema", None) or {}
        forms.append({"message": message, "schema": schema})
        return defaults_of(schema)

    if args.url:
        transport = StreamableHttpTransport(args.url)
    else:
        transport = StdioTransport(
            command=args.stdio[0], args=args.stdio[1:], env=dict(os.environ), keep_alive=False
        )
    # mode pinned: fastmcp's "auto" would fall back to 2025-11-25 (no tasks) silently.
    async with Client(
        transport, elicitation_handler=on_input, timeout=TIMEOUT, mode="2026-07-28"
    ) as client:
        protocol = client.session.protocol_version

        async def until_working(task) -> str:
            for _ in range(TIMEOUT * 5):
                status = await task.status()
                message = status.status_message or ""
                if "opened pull request" in message or message.startswith("step "):
                    return status.status_message
                await asyncio.sleep(0.2)
            raise TimeoutError(f"task {task.task_id} never reported its agent at work")

        async def run(scenario: str, tool: str, arguments: dict, cancel: bool = False) -> None:
            forms.clear()
            before = None
            task = await call_tool_task(client, tool, arguments)
            created = task.create_result.status
            if cancel:
                # Cancel while the agent works: once it has opened its pull request.
                before = await until_working(task)
                await task.cancel()
                final = await task.wait(timeout=TIMEOUT)
            else:
                parked = None
                if scenario == "approval":
                    parked = await task.wait(state="input_required", timeout=TIMEOUT)
                # Answers input requests through on_input (tasks/update), then polls.
                await task.result()
                final = await task.status()
                if parked is not None:
                    forms.insert(0, {"inputRequests": sorted(parked.input_requests or {})})
            emit(
                scenario,
                client="fastmcp-tasks",
                protocol=protocol,
                asTask=True,
                taskId=task.task_id,
                created=created,
                cancelledWhile=before,
                status=final.status,
                statusMessage=final.status_message,
                inputRequests=len([f for f in forms if "schema" in f]),
                result=final.result,
            )

        if args.scenarios == "a2a":
            await run("a2a-quick", A2A_TOOL, A2A_QUICK)
            await run("a2a-input", A2A_TOOL, A2A_INPUT)
            await run("a2a-cancel", A2A_TOOL, A2A_SLOW, cancel=True)
            return
        await run("qbusiness", "QBusinessQueryTool", QUESTION)
        await run("approval", "QBusinessQueryTool", TICKET)
        await run("copilot", "assign_copilot_to_issue", FINISHES)
        await run("cancel", "assign_copilot_to_issue", SLOW, cancel=True)


# --- the official mcp SDK, legacy (2025-11-25) ----------------------------------------


async def mcp_legacy(args: argparse.Namespace) -> None:
    import mcp_types as types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    forms: list[dict] = []

    async def on_elicit(ctx, params):
        if isinstance(params, types.ElicitRequestFormParams):
            forms.append({"message": params.message, "schema": params.requested_schema})
            return types.ElicitResult(action="accept", content=defaults_of(params.requested_schema))
        return types.ElicitResult(action="decline")

    server: Any
    if args.url:
        server = args.url
    else:
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:], env=dict(os.environ))

    def dump(result) -> dict:
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")

    async with Client(
        server, mode="legacy", elicitation_callback=on_elicit, read_timeout_seconds=TIMEOUT
    ) as client:
        protocol = client.protocol_version

        async def follow(task_id: str) -> dict:
            """`task_status` with a long poll until the task ends."""
            for _ in range(TIMEOUT):
                status = await client.call_tool("task_status", {"task_id": task_id, "wait_seconds": 5})
                task = status.structured_content or {}
                if status.is_error or task.get("status") in TERMINAL:
                    return task
            raise TimeoutError(f"task {task_id} did not end")

        async def run(scenario: str, tool: str, arguments: dict, cancel: bool = False) -> None:
            forms.clear()
            inline = await client.call_tool(tool, arguments)
            # A2A: the inline call may end before the agent is at work; the task is
            # cancelled once `task_status` shows the agent's progress.
            if cancel and scenario.startswith("a2a-"):
                task_id = (inline.meta or {}).get("io.agentgate/taskId")
                for _ in range(TIMEOUT * 5):
                    if not task_id:
                        break
                    status = await client.call_tool("task_status", {"task_id": task_id})
                    if ((status.structured_content or {}).get("statusMessage") or "").startswith("step "):
                        break
                    await asyncio.sleep(0.2)
            task_id = (inline.meta or {}).get("io.agentgate/taskId")
            fields: dict[str, Any] = {"inline": dump(inline)}
            if task_id and cancel:
                answer = await client.call_tool("task_cancel", {"task_id": task_id})
                fields["cancelAnswer"] = dump(answer)
            if task_id:
                task = await follow(task_id)
                fields.update(status=task.get("status"), statusMessage=task.get("statusMessage"),
                              result=task.get("result"))
            else:
                fields.update(status="completed", result=dump(inline))
            emit(scenario, client="mcp-legacy", protocol=protocol, asTask=False, taskId=task_id,
                 inputRequests=len(forms), **fields)

        if args.scenarios == "a2a":
            await run("a2a-quick", A2A_TOOL, A2A_QUICK)
            await run("a2a-input", A2A_TOOL, A2A_INPUT)
            await run("a2a-cancel", A2A_TOOL, A2A_SLOW, cancel=True)
            return
        await run("qbusiness", "QBusinessQueryTool", QUESTION)
        await run("approval", "QBusinessQueryTool", TICKET)
        await run("copilot", "assign_copilot_to_issue", FINISHES)
        await run("cancel", "assign_copilot_to_issue", SLOW, cancel=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("client", choices=["fastmcp-tasks", "mcp-legacy"])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="agentgate's Streamable HTTP endpoint")
    where.add_argument("--stdio", nargs=argparse.REMAINDER, help="the server command and its arguments")
    parser.add_argument(
        "--scenarios", choices=["default", "a2a"], default="default",
        help="the four default scenarios, or the three against an A2A agent",
    )
    args = parser.parse_args()
    drive = {"fastmcp-tasks": fastmcp_tasks, "mcp-legacy": mcp_legacy}[args.client]
    asyncio.run(drive(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
