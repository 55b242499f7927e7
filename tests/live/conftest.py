"""Live tests run real brokers on 127.0.0.1: the embedded amqtt broker always, Mosquitto
when installed (.ci/run installs it; under CI a missing Mosquitto is a failure, not a skip)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.checks.network import PUBACK_WITHIN_MS
from bench.spec.scenario import SCENARIOS, Scenario, load_scenario

MOSQUITTO = shutil.which("mosquitto") or (Path("/usr/sbin/mosquitto") if Path("/usr/sbin/mosquitto").exists() else None)


def brokers() -> list[object]:
    if MOSQUITTO or os.environ.get("CI"):
        return ["amqtt", "mosquitto"]
    return ["amqtt", pytest.param("mosquitto", marks=pytest.mark.skip(
        reason="mosquitto not installed (apt-get install mosquitto; .ci/run does)"))]


def loop_until(loop: asyncio.AbstractEventLoop, what: str, done: Callable[[], object],
               within_s: float = 20.0) -> None:
    """Runs `loop` until `done()`: a real broker's round trips, bounded generously."""
    end = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < end, f"waited {within_s} s for {what}"
        loop.run_until_complete(asyncio.sleep(0.02))


def compressed(name: str, duration_s: float = 6.0, timeout_ms: int | None = None) -> Scenario:
    """A shipped scenario squeezed for wall-clock tests (Scenario.squeezed)."""
    return load_scenario(SCENARIOS / f"{name}.toml").squeezed(duration_s, timeout_ms)


#: How long a squeezed partition lasts: past the deployment checker's give-up bound
#: (3 x the bench's 5 s keepalive, GIVE_UP_BOUND_KEEPALIVES) with 2 s to spare, so a broker
#: that never gives the silent node up is FALSE and one that does is TRUE — squeezed like
#: the rest (11 s of a 20 s run) the rule could only say UNKNOWN where no will came in time.
PARTITION_MS = 17_000


def partitioned(duration_s: float) -> Scenario:
    """partition.toml squeezed to `duration_s`, its partition kept long enough to judge."""
    from dataclasses import replace
    scenario = compressed("partition", duration_s)
    return replace(scenario, faults=tuple(replace(f, duration_ms=PARTITION_MS)
                                          for f in scenario.faults))


def every_case(run: Path) -> list[Any]:
    """The run judged again, keeping every counterexample (not the first few per rule)."""
    import bench.checks as checks
    from bench.history import History
    kept, checks.MAX_EXAMPLES = checks.MAX_EXAMPLES, 10**9
    try:
        return checks.judge(History.read(run / "history.jsonl"))
    finally:
        checks.MAX_EXAMPLES = kept


def unexplained_by_amqtt_resume(run: Path, wrong: dict[str, Any]) -> dict[str, Any]:
    """What is FALSE for another reason than amqtt 0.12's known losses (docs/brokers.md, "What
    the bench found about the brokers"): it resumes a persistent session without resending
    the QoS1 messages that were in flight when the node's connection died, and it keeps
    nothing across its own restart — its sessions and their subscriptions included. Only
    then: with a node
    crashing while a delivery to it was under way (up to a second), or a message not yet
    delivered when the broker stopped, or published after the restart before its target
    had subscribed again; qos1_delivery is FALSE for exactly those messages, and a
    GATE_OPEN among them never reaches its gate store."""
    events = [json.loads(line) for line in (run / "history.jsonl").open()]
    verdicts = every_case(run)
    crashes = [(e["node"], e["tMs"]) for e in events if e["kind"] == "node_crashed"]
    broker_stops = [e["tMs"] for e in events if e["kind"] == "fault_fired"
                    and str(e.get("action", "")).startswith(("broker stopped", "broker killed"))]
    by = {v.name: v for v in verdicts}
    qos1 = by["qos1_delivery"]
    lost = {c["seq"][0] for c in qos1.counterexamples}
    at = {e["seq"]: e for e in events}

    def routable_again(node: str, after: float) -> float:
        return min((e["tMs"] for e in events if e["kind"] == "executors_registered"
                    and e["node"] == node and e["tMs"] >= after), default=float("inf"))

    handed = {e["requestId"]: e["tMs"] for e in events if e["kind"] == "request_sent"}

    def in_flight_at_a_cut(seq: int) -> bool:
        e = at[seq]
        # a request queued in its client while the broker was down is sent at the reconnect:
        # when it was handed over counts, not when its PUBACK came — the request's own
        # time, never its answer's (which carries the same requestId: a clean clone,
        # 2026-12-07, took a response accepted 15 ms before orch-1's crash for one sent a
        # second earlier, when its request was)
        own = handed.get(e.get("requestId")) if e.get("messageType") == "TASK_REQUEST" else None
        sent = min(e["tMs"], own if own is not None else e["tMs"])
        # the crash is journaled once the kill is done, the acceptance when its PUBACK is
        # back: a message the broker handed to the node just before the kill may be
        # journaled as accepted up to a PUBACK's time after the crash
        return any(node == e["targetNodeId"] and -PUBACK_WITHIN_MS <= t - sent <= 1_000
                   for node, t in crashes) or any(
            sent <= routable_again(e["targetNodeId"], t) for t in broker_stops)
    left = dict(wrong)
    if "qos1_delivery" in left and qos1.counts["violations"] == len(lost) \
            and all(in_flight_at_a_cut(s) for s in lost):
        del left["qos1_delivery"]
        lost_ids = {at[s]["messageId"] for s in lost}
        gates = by["gate_integrity"]
        if "gate_integrity" in left and set(gates.rules) and all(
                r == "open_reaches_gate_store" or not n["violations"]
                for r, n in gates.rules.items()) and all(
                at[c["seq"][0]]["messageId"] in lost_ids for c in gates.counterexamples):
            del left["gate_integrity"]
    elif "qos1_delivery" in left:   # say when each loss happened, for the next reader
        left["lost, ms before each crash of the target"] = {
            at[s]["messageId"]: [round(t - at[s]["tMs"]) for node, t in crashes
                                 if node == at[s]["targetNodeId"]] for s in sorted(lost)}
    return left
