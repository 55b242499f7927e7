"""Parley's `ParleyCommandHandler` (`parley-mqtt` 1.0.1 on PyPI), unmodified, as the bench's
handler node: the library's own admission, deduplication, heartbeats, result retries and
cancellation are what is judged, from the wire tap:

    a2a-bench run parley_restart

What this program adds, and only that:
- the connection Parley asks its user for (paho_adapter.py, over paho-mqtt), started as
  paho's documentation starts a client: `connect`, then `loop_start`;
- `handle_command` (the library's one extension point) is the bench's scripted work: it
  says `task_executed` and `agent_called` with the command id (`execution.command_id`) and
  waits for the bench's `task_finished` line; `ok: false` returns the custom error
  `failed` (a `ParleyOutcome.error`, as its docs tell a handler to return an expected
  failure); a cancel the library delivers ends it as the library makes it end;
- `executors_registered` once the library's SUBSCRIBE is acknowledged (paho's
  `on_subscribe`);
- the bench's `stop` line (the end of a run) closes the handler (`close()`, its documented
  shutdown) and disconnects, as the end of a program does.
- a client-side fault's op it cannot carry out (a clock skew, new keys) said as a
  `harness_error` line, as the node contract asks (PROTOCOL.md §2.3).
Nothing else: no signal handler, no reconnect of its own (paho's is its default), no
exception handling, no setting of the library (`ParleyConfig` is the topology's timing,
its defaults unless the topology says).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

try:
    from paho_adapter import PahoAdapter, client_for, topics_and_config
    from parley import ParleyCommandHandler, ParleyExecution, ParleyOutcome
except ImportError as exc:   # the library is an extra of the bench: say so in one line
    sys.exit(f"examples/parley/handler.py: {exc}; install it: pip install -e '.[parley]'")

spec = json.loads(sys.stdin.readline())
node, settings = spec["node"], spec["node"]["settings"]
ME, AGENT = node["node_id"], node["agents"][0]
TOPICS, CONFIG = topics_and_config(settings)
waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}


def say(kind: str, **fields: object) -> None:
    print(json.dumps({"node": ME, "kind": kind, "fields": fields,
                      "tMs": int((time.time() - spec["t0"]) * 1000)}), flush=True)


#: The ops of the bench's client-side faults (PROTOCOL.md §2.3), none of which this program
#: carries out: each is said as a harness_error, as the contract asks, so that the run
#: does not count a fault that never acted
FAULT_OPS = ("keys", "clock_skew", "second_connection", "client_id", "strip_reply_node",
             "publish_failure")


class BenchHandler(ParleyCommandHandler[Any, Any, Any, str]):
    """The library's handler; its work is the bench's script."""

    async def handle_command(self, request: Any,
                             execution: ParleyExecution[Any]) -> ParleyOutcome[Any, str]:
        command = execution.command_id
        say("task_executed", taskId=command, agentId=AGENT, conversationId=None,
            messageId=command)
        say("agent_called", taskId=command, agentId=AGENT, conversationId=None)
        done = waiting[command] = asyncio.get_running_loop().create_future()
        try:
            op = await done
        finally:
            waiting.pop(command, None)
        if not op["ok"]:
            return ParleyOutcome.error("failed", op.get("error"))
        return ParleyOutcome.success({"result": op.get("result")})


async def main() -> None:
    loop = asyncio.get_running_loop()
    client = client_for(spec)
    adapter = PahoAdapter(client, loop, settings["qos"])
    subscribed = False

    def suback() -> None:
        nonlocal subscribed
        if not subscribed:
            subscribed = True
            say("executors_registered", registered=1, expected=1, agents=[AGENT],
                subscribed=[TOPICS.request])
    adapter.on_suback = suback
    handler = BenchHandler(adapter, TOPICS, CONFIG)
    client.connect(spec["broker"][0], spec["broker"][1])
    client.loop_start()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        op = json.loads(line)
        if op.get("op") == "stop":
            break
        if op.get("op") in FAULT_OPS:
            say("harness_error", error=f"cannot carry out {op['op']}", op=op["op"])
        if op.get("op") == "task_finished" and op["task_id"] in waiting:
            if not waiting[op["task_id"]].done():
                waiting[op["task_id"]].set_result(op)
    await handler.close()
    client.disconnect()
    client.loop_stop()


asyncio.run(main())
