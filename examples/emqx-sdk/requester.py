"""The EMQX A2A-over-MQTT SDK's requester (`a2a-over-mqtt` on PyPI), as the bench's requester
node: the thinnest adapter of the requester contract (docs/profiles/own-agent.md), nothing of
the bench imported. Each request line of the bench is one `Requester.stream(...)` call of the
SDK — its connection, reply topic, Correlation Data, retries and timeouts are the SDK's own,
judged from the wire tap, and not touched:

    a2a-bench run a2a_restart --node-command "requester=python examples/emqx-sdk/requester.py"

What the adapter adds, and only that:
- the request's payload, as the SDK's own `A2ARequest(...).to_json()` builds it (a UUIDv4
  Task.id, the conversation's context as a UUID); SendStreamingMessage, GetTask and
  CancelTask, which the SDK has no helper for, as the same JSON-RPC object with that method
  (`params.id` the Task.id of the request they follow, for the last two);
- the contract's lines: `executors_registered` at once (the SDK keeps no connection between
  requests: it opens one per request), `request_sent` when a line is taken on, and
  `request_settled`, each with the Task.id it sent (`taskId`), the latter with what the
  SDK's stream ended in (terminal: COMPLETED; failed or an error: FAILED; input-required:
  COMPLETED, the turn ended; timeout: NO_RESPONSE; an exception the SDK raises to its
  caller: SEND_FAILED, with the exception on stderr — the request's end, as a caller sees
  it; the SDK's stream has ended either way);
- the bench's `stop` line (the end of a run) cancels the requests in flight, as Ctrl-C in
  the README's `asyncio.run(main())` would.
- a client-side fault's op it cannot carry out (a clock skew, new keys) said as a
  `harness_error` line, as the node contract asks (PROTOCOL.md §2.3).
Nothing else: no signal handler (SIGTERM does to it what it does to the README's client), no
reconnect, no setting of its client; tests/live/test_adapters_change_nothing.py holds it to
the README run alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import uuid
from typing import Any

try:
    from a2a_over_mqtt import MqttConfig, Requester, TopicSpace
    from a2a_over_mqtt.protocol import A2ARequest
except ImportError as exc:     # the SDK is an extra of the bench: say so in one line
    sys.exit(f"examples/emqx-sdk/requester.py: {exc}; install the SDK: pip install -e '.[sdk]'")

spec = json.loads(sys.stdin.readline())
node, a2a = spec["node"], spec["node"]["a2a"]
ME, AGENT, UNIT, ORG = node["node_id"], node["agents"][0], node["namespace"], a2a["org"]
OUTCOME = {"terminal": "COMPLETED", "input_required": "COMPLETED", "failed": "FAILED",
           "error": "FAILED", "timeout": "NO_RESPONSE"}
task_of: dict[str, str] = {}      # request id -> its Task.id (a follow-up names its request)
requester = Requester(MqttConfig(host=spec["broker"][0], port=spec["broker"][1]),
                      TopicSpace(org=ORG, unit=UNIT), requester_id=AGENT)


def now_ms() -> int:
    return int((time.time() - spec["t0"]) * 1000)


def say(kind: str, **fields: object) -> None:
    print(json.dumps({"node": ME, "kind": kind, "fields": fields, "tMs": now_ms()}), flush=True)


#: The ops of the bench's client-side faults (PROTOCOL.md §2.3), none of which this program
#: carries out: each is said as a harness_error, as the contract asks, so that the run
#: does not count a fault that never acted
FAULT_OPS = ("keys", "clock_skew", "second_connection", "client_id", "strip_reply_node",
             "publish_failure")


def payload_of(req: dict[str, Any]) -> tuple[str, str]:
    """The JSON-RPC request for a bench request line, and its target (agent or pool/…)."""
    asked = req.get("payload") or {}
    method = asked.get("method", "SendMessage")
    of = asked.get("ofRequest")
    task = task_of.get(of, "") if of else str(uuid.uuid4())
    task_of[req["request_id"]] = task
    to = req["to_agent_id"]
    target = f"pool/{to[5:]}" if to.startswith("pool:") else to
    if method in ("GetTask", "CancelTask"):
        return json.dumps({"jsonrpc": "2.0", "id": req["request_id"], "method": method,
                           "params": {"id": task}}), target
    context = str(uuid.uuid5(uuid.NAMESPACE_URL, req["conversation_id"])) \
        if req.get("conversation_id") else None
    body = json.loads(A2ARequest(text=str(asked.get("ask", "")), request_id=req["request_id"],
                                 task_id=task, context_id=context).to_json())
    body["method"] = method
    return json.dumps(body), target


async def ask(req: dict[str, Any]) -> None:
    payload, target = payload_of(req)
    asked = now_ms()
    say("request_sent", requestId=req["request_id"], messageId=req["message_id"],
        fromAgentId=AGENT, toAgentId=req["to_agent_id"],
        conversationId=req.get("conversation_id"), deadlineMs=asked + 95_000, timeoutMs=95_000,
        taskId=task_of[req["request_id"]])
    outcome = "NO_RESPONSE"
    try:
        async for kind, _content in requester.stream(target, payload, uuid.uuid4().hex):
            outcome = OUTCOME.get(kind, outcome)
    except Exception as exc:   # noqa: BLE001 - the SDK raised: the request ends, and says why
        print(f"{ME}: the SDK raised on {req['request_id']}: {exc!r}", file=sys.stderr)
        outcome = "SEND_FAILED"
    say("request_settled", requestId=req["request_id"], outcome=outcome,
        latencyMs=now_ms() - asked, responseMessageId=None, taskId=task_of[req["request_id"]])


async def bench_lines(reader: asyncio.StreamReader, asking: set[asyncio.Task[None]]) -> None:
    """The bench's lines: what to ask, and stop."""
    while line := await reader.readline():
        op = json.loads(line)
        if op.get("op") == "stop":
            break
        if op.get("op") in FAULT_OPS:
            say("harness_error", error=f"cannot carry out {op['op']}", op=op["op"])
        if op.get("op") == "request":
            t = asyncio.create_task(ask(op))
            asking.add(t)
            t.add_done_callback(asking.discard)


async def main() -> None:
    say("executors_registered", registered=0, expected=0, agents=[], subscribed=[])
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    asking: set[asyncio.Task[None]] = set()
    lines = asyncio.create_task(bench_lines(reader, asking))
    with contextlib.suppress(asyncio.CancelledError):
        await lines
    for t in asking:
        t.cancel()
    await asyncio.gather(*asking, return_exceptions=True)


asyncio.run(main())
