"""gate_integrity and context_isolation, rule by rule: a real simulated history of the gates
scenario is TRUE; each mutation that breaks one rule (an event removed, duplicated or
altered, as a buggy node would have recorded it) turns the verdict FALSE."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.checks import Value
from bench.history import History
from bench.protocols.seed.rules.process import CONTEXT_ISOLATION, GATE_INTEGRITY
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE

Events = list[dict[str, Any]]


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Events:
    out = tmp_path_factory.mktemp("gates")
    run_scenario(load_scenario(SCENARIOS / "gates.toml"), REFERENCE, out, mode="sim")
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def first(evs: Events, kind: str, pred: Callable[[dict[str, Any]], bool] = lambda e: True) -> int:
    return next(i for i, e in enumerate(evs) if e["kind"] == kind and pred(e))


def drop(kind: str, pred: Callable[[dict[str, Any]], bool] = lambda e: True) -> Callable[[Events], None]:
    return lambda evs: evs.pop(first(evs, kind, pred))


def duplicate(kind: str) -> Callable[[Events], None]:
    def go(evs: Events) -> None:
        i = first(evs, kind)
        evs.insert(i + 1, {**evs[i], "seq": evs[i]["seq"]})
    return go


def alter(kind: str, pred: Callable[[dict[str, Any]], bool], **changes: Any) -> Callable[[Events], None]:
    def go(evs: Events) -> None:
        e = evs[first(evs, kind, pred)]
        for key, value in changes.items():
            e[key] = value(e) if callable(value) else value
    return go


def _forget_gate(evs: Events) -> None:
    """The gate store never had one gate: nothing of it on the orchestrator's side."""
    gate = evs[first(evs, "gate_opened")]["gateId"]
    evs[:] = [e for e in evs if not (e.get("gateId") == gate and e["node"] == "orch-1")
              and not (e["kind"] == "human_clicked" and e["gateId"] == gate)]


def test_the_reference_history_is_true_on_both(events: Events) -> None:
    assert GATE_INTEGRITY(History.from_lines(events)).value is Value.TRUE
    assert CONTEXT_ISOLATION(History.from_lines(events)).value is Value.TRUE


human = lambda e: e.get("decidedBy") == "human"  # noqa: E731


@pytest.mark.parametrize("mutate, needle", [
    (drop("gate_resumed"), "never resumed"),
    (duplicate("gate_resumed"), "resumed 2 times"),
    (alter("gate_resumed", lambda e: True, processInstId="pi-someone-else"), "resumed instance"),
    (alter("gate_resumed", lambda e: True, decision="reject"), "but resumed with"),
    (drop("gate_decided", human), "without a decision"),
    (drop("gate_already_decided"), "recorded outcomes"),
    (drop("gate_acked"), "neither acknowledged"),
    (lambda evs: evs[:] and _forget_gate(evs), "never reached the gate store"),
], ids=["no-resume", "twice", "wrong-instance", "wrong-decision", "no-decision",
        "silent-click", "no-ack", "open-lost"])
def test_gate_integrity_catches(events: Events, mutate: Callable[[Events], None], needle: str) -> None:
    evs = copy.deepcopy(events)
    mutate(evs)
    v = GATE_INTEGRITY(History.from_lines(evs))
    assert v.value is Value.FALSE and any(needle in c["why"] for c in v.counterexamples), v


@pytest.mark.parametrize("where, explained", [("orch-1", True), ("exec-1", False)])
def test_a_gate_open_refused_at_its_home_node_with_a_reason_is_accounted(
        events: Events, where: str, explained: bool) -> None:
    evs = copy.deepcopy(events)
    _forget_gate(evs)
    gate = next(e for e in evs if e["kind"] == "gate_open_sent" and not any(
        o["kind"] == "gate_opened" and o["gateId"] == e["gateId"] for o in evs))
    evs.append({"kind": "inbound_dropped", "node": where, "seq": evs[-1]["seq"] + 1,
                "tMs": gate["tMs"] + 1, "messageId": gate["messageId"], "messageType": "GATE_OPEN",
                "reason": "AUTH_REJECTED", "detail": "BAD_SIGNATURE", "bytes": 1,
                "topic": f"ooder/node/{where}/inbox", "fromAgentId": gate["agentId"],
                "requestId": None, "verdict": "BAD_SIGNATURE"})
    v = GATE_INTEGRITY(History.from_lines(evs))
    lost = any("never reached the gate store" in c["why"] for c in v.counterexamples)
    assert lost is not explained and v.counts.get("gate_open_refused_with_reason", 0) == explained


def _unresumed(evs: Events) -> str:
    """One resumed gate made a gate whose decision never reached its executor."""
    gate = evs[first(evs, "gate_resumed")]["gateId"]
    evs[:] = [e for e in evs if not (e.get("gateId") == gate and e["kind"] in (
        "gate_resumed", "gate_decision_received", "gate_acked"))]
    return gate


def test_a_decision_whose_every_send_failed_explains_the_missing_resume(events: Events) -> None:
    evs = copy.deepcopy(events)
    gate = _unresumed(evs)
    v = GATE_INTEGRITY(History.from_lines(evs))
    assert any("never resumed" in c["why"] and gate in c["why"] for c in v.counterexamples)
    for s in [e for e in evs if e["kind"] == "gate_decision_sent" and e["gateId"] == gate]:
        evs.append({"kind": "outbound_settled", "node": s["node"], "seq": evs[-1]["seq"] + 1,
                    "tMs": evs[-1]["tMs"], "messageId": s["messageId"],
                    "messageType": "GATE_DECISION", "state": "UNDELIVERABLE",
                    "reason": "agent in no directory entry", "toAgentId": s["agentId"],
                    "targetNodeId": None, "requestId": None, "topic": None})
    v = GATE_INTEGRITY(History.from_lines(evs))
    assert not any(gate in c["why"] and "never resumed" in c["why"] for c in v.counterexamples)
    assert v.counts["decision_undeliverable"] == 1


def test_a_decision_still_being_retried_at_the_end_is_unknown_not_lost(events: Events) -> None:
    evs = copy.deepcopy(events)
    gate = _unresumed(evs)
    sent = next(e for e in evs if e["kind"] == "gate_decision_sent" and e["gateId"] == gate)
    end = evs[-1]["tMs"]

    def judged(*retries: float) -> list[str]:
        more = [{**sent, "seq": evs[-1]["seq"] + 1 + i, "tMs": t, "attempt": 2 + i}
                for i, t in enumerate(retries)]
        v = GATE_INTEGRITY(History.from_lines([*evs, *more]))
        return [c["rule"] for c in v.counterexamples if gate in c["why"]]

    # retries backing off up to the end: still under way; retries that stopped long ago: lost
    assert "decision_acknowledged" not in judged(end - 3000, end - 1000)
    assert "decision_acknowledged" in judged(end - 30000, end - 29000)


def test_gate_integrity_catches_an_expired_gate_whose_policy_never_applied(events: Events) -> None:
    evs = copy.deepcopy(events)
    expired = evs[first(evs, "gate_expired")]["gateId"]
    evs = [e for e in evs if e.get("gateId") != expired or e["kind"] in ("gate_open_sent", "gate_opened")]
    v = GATE_INTEGRITY(History.from_lines(evs))
    assert v.value is Value.FALSE and any("timeout policy" in c["why"] for c in v.counterexamples)


@pytest.mark.parametrize("mutate, needle", [
    (alter("context_merged", lambda e: e["attempt"] > 1,
           context=lambda e: {**e["context"], "log": [*e["context"]["log"], "pi-orch-1-r1/x#1/draft"]}),
     "not its snapshot plus"),
    (alter("step_started", lambda e: e["attempt"] > 1, baseDigest="0" * 16), "pre-attempt snapshot"),
    (alter("instance_started", lambda e: True,
           context=lambda e: {**e["context"], "facts": {"x": "pi-other/x#1"}}), "already holds"),
    (alter("step_finished", lambda e: e["ok"] and e["scope"] == "main", ok=False),
     "was merged"),
    (alter("context_merged", lambda e: True,
           context=lambda e: {**e["context"], "log": [*e["context"]["log"], "pi-zz/a"]}),
     "another instance"),
    (alter("context_merged", lambda e: e["version"] > 1, parentSnapshotId="pi-x:main:v0"),
     "version chain"),
], ids=["draft-leaked", "retry-elsewhere", "shared-template", "failed-merged", "cross-task",
        "chain-broken"])
def test_context_isolation_catches(events: Events, mutate: Callable[[Events], None], needle: str) -> None:
    evs = copy.deepcopy(events)
    mutate(evs)
    v = CONTEXT_ISOLATION(History.from_lines(evs))
    assert v.value is Value.FALSE and any(needle in c["why"] for c in v.counterexamples), v


def test_context_isolation_catches_a_failed_subflow_counted_completed(events: Events) -> None:
    evs = copy.deepcopy(events)
    sub = evs[first(evs, "subflow_finished", lambda e: not e["ok"])]["processInstId"]
    evs = [e for e in evs if not (e.get("processInstId") == sub and e["kind"] == "instance_state"
                                  and e["status"] == "FAILED")]
    evs.append({"seq": 10**9, "tMs": evs[-1]["tMs"], "node": "exec-1", "kind": "instance_state",
                "processInstId": sub, "status": "COMPLETED", "previous": "RUNNING",
                "taskId": None, "reason": None, "version": None, "cause": "COMPLETED"})
    v = CONTEXT_ISOLATION(History.from_lines(evs))
    assert v.value is Value.FALSE and any("failed but the instance COMPLETED" in c["why"]
                                          for c in v.counterexamples)


def test_a_history_with_no_processes_is_unknown_and_says_why(tmp_path: Path) -> None:
    v = GATE_INTEGRITY(History.from_lines([{
        "seq": 1, "tMs": 0, "node": "n", "kind": "node_started", "namespace": "x",
        "clientId": "n", "bootId": "b", "authMode": "loose", "signatureVersion": "1"}]))
    assert v.value is Value.UNKNOWN and v.counts["gates_opened"] == 0
    assert v.note.startswith("nothing to judge")


def test_a_decision_resent_by_a_restart_near_the_end_is_unknown_and_one_dropped_is_lost(
        events: Events) -> None:
    """Explore (seed 5, run 54): the home node restarted 0.6 s after a retry and re-sent the
    decision at once (a restart re-sends a DECIDED gate); its next retry was due 8 s later,
    after the run's end. The rule read "last gap 0.6 s, quiet for 7.5 s since" as a lost
    decision; the protocol's schedule (W-GATE-4: 2 000 ms x attempt) says it was still
    being retried. A home that restarts and never sends the decision again is still FALSE."""
    evs = copy.deepcopy(events)
    gate = _unresumed(evs)
    sent = next(e for e in evs if e["kind"] == "gate_decision_sent" and e["gateId"] == gate)
    home, end = sent["node"], evs[-1]["tMs"]
    started = next(e for e in evs if e["kind"] == "node_started" and e["node"] == home)

    def judged(restart_at: float, resend: bool) -> list[str]:
        more: list[dict[str, Any]] = [
            {**sent, "tMs": restart_at - 600, "attempt": 3},
            {"kind": "node_crashed", "node": home, "tMs": restart_at - 500, "faultIndex": None,
             "how": "raised", "lostWrites": 0},
            {**started, "tMs": restart_at, "bootId": "again"}]
        if resend:
            more.append({**sent, "tMs": restart_at, "attempt": 4})
        more = [{**e, "seq": evs[-1]["seq"] + 1 + i} for i, e in enumerate(more)]
        v = GATE_INTEGRITY(History.from_lines([*evs, *more]))
        return [c["rule"] for c in v.counterexamples if gate in c["why"]]

    assert "decision_acknowledged" not in judged(end - 7500, resend=True)
    assert "decision_acknowledged" in judged(end - 30000, resend=False)
    never_gives_up = [*evs, {**sent, "seq": evs[-1]["seq"] + 1, "tMs": end - 100, "attempt": 7}]
    v = GATE_INTEGRITY(History.from_lines(never_gives_up))
    assert any("sent 7 times" in c["why"] for c in v.counterexamples), v.counterexamples
