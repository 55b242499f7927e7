"""Parley's `ParleyCommander` (`parley-mqtt` 1.0.1 on PyPI), unmodified, as the bench's
commander node: each request line of the bench is one `commander.execute(...)` call, as the
README's example makes one; its retries, liveness timers, result acknowledgement and
duplicate suppression are the library's own, judged from the wire tap:

    a2a-bench run parley_quickstart

What this program adds, and only that:
- the connection Parley asks its user for (paho_adapter.py, over paho-mqtt), started as
  paho's documentation starts a client: `connect`, then `loop_start`;
- the request's payload (`{"ask": ...}`, the bench's line) and, for a CancelTask line, the
  cancel signal of the command it names triggered (`ParleyCancelSignal.abort()`, the
  library's cancellation: C7);
- the contract's lines: `executors_registered` once the library's three SUBSCRIBEs are
  acknowledged, `request_sent` when a command is sent and `request_settled` with what
  `execute` returned, each with the command id (`taskId`: read off the request the
  adapter's `publish` carries — the library does not return it) and the error code
  (`code`: `$noAck`, `$executionStale`, ...);
- the bench's `stop` line (the end of a run) closes the commander (`close()`) and
  disconnects, as the end of a program does.
- a client-side fault's op it cannot carry out (a clock skew, new keys) said as a
  `harness_error` line, as the node contract asks (PROTOCOL.md §2.3).
Nothing else: no signal handler, no reconnect of its own, no exception handling, no setting
of the library (`ParleyConfig` is the topology's timing, its defaults unless it says).
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
import time
from typing import Any

try:
    from paho_adapter import PahoAdapter, client_for, topics_and_config
    from parley import ParleyCancelSignal, ParleyCommander
except ImportError as exc:   # the library is an extra of the bench: say so in one line
    sys.exit(f"examples/parley/commander.py: {exc}; install it: pip install -e '.[parley]'")

spec = json.loads(sys.stdin.readline())
node, settings = spec["node"], spec["node"]["settings"]
ME = node["node_id"]
AGENT = node["agents"][0] if node["agents"] else f"{node['namespace']}.orchestrator"
TOPICS, CONFIG = topics_and_config(settings)
NO_ANSWER = {"$noAck", "$executionStale", "$executionTimeout"}
signals: dict[str, ParleyCancelSignal] = {}     # request id -> its running command's signal
#: one future per execute started and not yet seen on the wire, in the order they were
#: started: each gets the id of the next new command the adapter publishes a req for
#: (the library runs its executes in the order they were started, each publishing its req
#: at its first step)
expecting: collections.deque[asyncio.Future[str]] = collections.deque()
seen: set[str] = set()


def now_ms() -> int:
    return int((time.time() - spec["t0"]) * 1000)


def say(kind: str, **fields: object) -> None:
    print(json.dumps({"node": ME, "kind": kind, "fields": fields, "tMs": now_ms()}), flush=True)


#: The ops of the bench's client-side faults (PROTOCOL.md §2.3), none of which this program
#: carries out: each is said as a harness_error, as the contract asks, so that the run
#: does not count a fault that never acted
FAULT_OPS = ("keys", "clock_skew", "second_connection", "client_id", "strip_reply_node",
             "publish_failure")


def noted(topic: str, payload: bytes) -> None:
    """The id of each new command, off the request the adapter publishes for it."""
    if topic == TOPICS.request:
        body = json.loads(payload)
        if body.get("t") == "req" and body["id"] not in seen:
            seen.add(body["id"])
            expecting.popleft().set_result(body["id"])


async def ask(commander: ParleyCommander[Any, Any, Any, str], req: dict[str, Any],
              its_id: asyncio.Future[str]) -> None:
    signal = signals[req["request_id"]] = ParleyCancelSignal()
    asked = now_ms()
    run = asyncio.ensure_future(commander.execute(req.get("payload") or {}, signal=signal))
    # its req is out once its id came (execute's first step publishes it); an execute
    # the stop's close() refused before its first step sent nothing, and says nothing
    await asyncio.wait({its_id, run}, return_when=asyncio.FIRST_COMPLETED)
    if not its_id.done():
        expecting.remove(its_id)
        run.exception()             # the close's RuntimeError, taken: nothing was sent
        return
    command = its_id.result()
    say("request_sent", requestId=req["request_id"], messageId=req["message_id"],
        fromAgentId=AGENT, toAgentId=req["to_agent_id"],
        conversationId=req.get("conversation_id"), deadlineMs=asked + req["timeout_ms"],
        timeoutMs=req["timeout_ms"], taskId=command)
    result = await run
    del signals[req["request_id"]]
    code = None if result.is_success or result.error is None else result.error.code
    outcome = ("COMPLETED" if result.is_success else "CANCELLED" if code == "$cancelled"
               else "NO_RESPONSE" if code in NO_ANSWER else "FAILED")
    say("request_settled", requestId=req["request_id"], outcome=outcome,
        latencyMs=now_ms() - asked, responseMessageId=None, taskId=command, code=code)


async def main() -> None:
    loop = asyncio.get_running_loop()
    client = client_for(spec)
    adapter = PahoAdapter(client, loop, settings["qos"])
    adapter.sent = noted
    acks = 0

    def suback() -> None:
        nonlocal acks
        acks += 1
        if acks == 3:       # heartbeat, progress, result
            say("executors_registered", registered=0, expected=0, agents=[],
                subscribed=[TOPICS.heartbeat, TOPICS.progress, TOPICS.result])
    adapter.on_suback = suback
    commander: ParleyCommander[Any, Any, Any, str] = ParleyCommander(adapter, TOPICS, CONFIG)
    client.connect(spec["broker"][0], spec["broker"][1])
    client.loop_start()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    asking: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        op = json.loads(line)
        if op.get("op") == "stop":
            break
        if op.get("op") in FAULT_OPS:
            say("harness_error", error=f"cannot carry out {op['op']}", op=op["op"])
        if op.get("op") != "request":
            continue
        payload = op.get("payload") or {}
        if payload.get("method") == "CancelTask":
            if (signal := signals.get(payload.get("ofRequest", ""))) is not None:
                signal.abort()
            continue
        its_id: asyncio.Future[str] = loop.create_future()
        expecting.append(its_id)       # in the order the executes start
        task = asyncio.create_task(ask(commander, op, its_id))
        asking.add(task)
        task.add_done_callback(asking.discard)
    await commander.close()          # every command still running ends $cancelled
    await asyncio.gather(*asking)
    client.disconnect()
    client.loop_stop()


asyncio.run(main())
