"""The EMQX A2A-over-MQTT SDK's responder (`a2a-over-mqtt` on PyPI), as the bench's node:
the thinnest adapter the agent contract (docs/profiles/own-agent.md) needs, and nothing of
the bench imported. The SDK's own protocol code — its connection and session, presence,
deduplication, acknowledgement, errors — is what is judged, and is not touched:

    a2a-bench run a2a_restart --node-command "responder=python examples/emqx-sdk/responder.py"

What the adapter adds, and only that:
- `on_request` (the SDK's one extension point) is the bench's scripted agent: it says
  `task_executed` and `agent_called` and waits for the bench's `task_finished` line (its
  `flow` lines become the SDK's `stream(...)` updates); a failed task raises, as an agent
  that fails would;
- `executors_registered` once the SDK's SUBSCRIBE is acknowledged: the SDK has no hook
  there, so the adapter wraps `aiomqtt.Client.subscribe` to print the line after it
  returns (the call itself is unchanged);
- the bench's `stop` line (the end of a run) cancels `Responder.run()`, as Ctrl-C in the
  README's `asyncio.run(main())` would: the SDK's own shutdown (its offline card) runs.
- a client-side fault's op it cannot carry out (a clock skew, new keys) said as a
  `harness_error` line, as the node contract asks (PROTOCOL.md §2.3).
Nothing else: no signal handler (SIGTERM — a graceful restart fault, `docker stop` — does to
it what it does to the README's agent), no reconnect, no exception handling, no setting of
its client; tests/live/test_adapters_change_nothing.py holds it to the README run alone.
`messageId` in `task_executed` is the request's JSON-RPC id: `on_request` is not given the
Correlation Data. An agent that asks for input (`inputRequired`) cannot say so through the
SDK 0.1.0 (`on_request` returns text or raises): its question is returned as the answer.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

try:
    import aiomqtt
    from a2a_over_mqtt import MqttConfig, Responder, TopicSpace
    from a2a_over_mqtt.protocol import A2ARequest
except ImportError as exc:     # the SDK is an extra of the bench: say so in one line
    sys.exit(f"examples/emqx-sdk/responder.py: {exc}; install the SDK: pip install -e '.[sdk]'")

spec = json.loads(sys.stdin.readline())
node, a2a = spec["node"], spec["node"]["a2a"]
ME, AGENT, UNIT, ORG = node["node_id"], node["agents"][0], node["namespace"], a2a["org"]
REQUEST = f"$a2a/v1/request/{ORG}/{UNIT}/{AGENT}"
waiting: dict[str, list[asyncio.Queue[dict[str, Any]]]] = {}   # Task.id -> its calls' lines


def say(kind: str, **fields: object) -> None:
    print(json.dumps({"node": ME, "kind": kind, "fields": fields,
                      "tMs": int((time.time() - spec["t0"]) * 1000)}), flush=True)


#: The ops of the bench's client-side faults (PROTOCOL.md §2.3), none of which this program
#: carries out: each is said as a harness_error, as the contract asks, so that the run
#: does not count a fault that never acted
FAULT_OPS = ("keys", "clock_skew", "second_connection", "client_id", "strip_reply_node",
             "publish_failure")


_subscribe = aiomqtt.Client.subscribe


async def _observed_subscribe(self: aiomqtt.Client, *args: Any, **kwargs: Any) -> Any:
    """The SDK's SUBSCRIBE, unchanged; the contract's line once its SUBACK came."""
    got = await _subscribe(self, *args, **kwargs)
    say("executors_registered", registered=1, expected=1, agents=[AGENT], subscribed=[REQUEST])
    return got

aiomqtt.Client.subscribe = _observed_subscribe     # type: ignore[method-assign]


class BenchAgent(Responder):
    """The SDK's Responder; its agent is the bench's script."""

    async def on_request(self, request: A2ARequest, stream: Any) -> str | None:
        task = request.task_id or ""
        say("task_executed", taskId=task, agentId=AGENT, conversationId=request.context_id or None,
            messageId=str(request.request_id))
        say("agent_called", taskId=task, agentId=AGENT, conversationId=request.context_id or None)
        lines: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        waiting.setdefault(task, []).append(lines)
        try:
            while True:
                op = await lines.get()
                if op["op"] == "flow":
                    await stream(op.get("text") or "")
                    continue
                if not op["ok"]:
                    raise RuntimeError(op.get("error") or "the agent failed")
                result = op.get("result")
                return result if isinstance(result, str) else json.dumps(result, sort_keys=True)
        finally:
            waiting[task].remove(lines)


async def bench_lines(agent_run: asyncio.Task[None]) -> None:
    """The bench's lines: its agent's stream and ends, and stop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        op = json.loads(line)
        if op.get("op") == "stop":
            break
        if op.get("op") in FAULT_OPS:
            say("harness_error", error=f"cannot carry out {op['op']}", op=op["op"])
        if op.get("op") in ("task_finished", "flow"):
            for calls in waiting.get(op["task_id"], [])[:1]:
                calls.put_nowait(op)
    agent_run.cancel()


async def main() -> None:
    agent = BenchAgent(agent_id=AGENT, mqtt=MqttConfig(host=spec["broker"][0],
                                                       port=spec["broker"][1]),
                       topics=TopicSpace(org=ORG, unit=UNIT), card={"name": AGENT})
    agent_run = asyncio.create_task(agent.run())
    lines = asyncio.create_task(bench_lines(agent_run))
    try:
        await agent_run
    except asyncio.CancelledError:
        pass
    lines.cancel()


asyncio.run(main())
