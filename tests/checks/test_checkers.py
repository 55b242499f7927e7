"""Checkers on small hand-written histories with known verdicts (TRUE, FALSE, UNKNOWN)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.checks import History, Value, judge
from bench.checks.delivery import reply_routing, silent_loss, targeted_delivery
from bench.checks.directory import deployment, directory_liveness
from bench.checks.execution import duplicate_execution, task_lifecycle


def hist(*events: tuple[str, str, dict[str, Any]], t0: float = 0.0) -> History:
    base = [("orch-1", "node_started", {"namespace": "fin", "clientId": "orch-1"}),
            ("exec-1", "node_started", {"namespace": "llm", "clientId": "exec-1"})]
    return History({"seq": i + 1, "tMs": t0 + i, "node": n, "kind": k, **f}
                   for i, (n, k, f) in enumerate(base + list(events)))


def executed(task: str, node: str = "exec-1") -> tuple[str, str, dict[str, Any]]:
    return (node, "task_executed", {"taskId": task})


def test_duplicate_execution() -> None:
    assert duplicate_execution(hist(executed("r1"), executed("r2"))).value is Value.TRUE
    v = duplicate_execution(hist(executed("r1"), executed("r1", "exec-1")))
    assert v.value is Value.FALSE and v.counterexamples[0]["seq"] == [3, 4]


def state(task: str, s: str, prev: str | None, error: str | None = None) -> tuple[str, str, dict[str, Any]]:
    return ("exec-1", "task_state", {"taskId": task, "state": s, "previous": prev, "error": error})


def test_task_lifecycle_true_false_unknown() -> None:
    ok = hist(state("r", "SUBMITTED", None), state("r", "RUNNING", "SUBMITTED"),
              state("r", "COMPLETED", "RUNNING"))
    assert task_lifecycle(ok).value is Value.TRUE
    after = hist(state("r", "SUBMITTED", None), state("r", "RUNNING", "SUBMITTED"),
                 state("r", "COMPLETED", "RUNNING"), state("r", "FAILED", "COMPLETED"))
    assert task_lifecycle(after).value is Value.FALSE
    illegal = hist(state("r", "SUBMITTED", None), state("r", "COMPLETED", "SUBMITTED"))
    assert task_lifecycle(illegal).value is Value.FALSE
    running = hist(state("r", "SUBMITTED", None), state("r", "RUNNING", "SUBMITTED"))
    v = task_lifecycle(running)
    assert v.value is Value.UNKNOWN and v.counts["unfinished_at_end"] == 1


def sent(rid: str, deadline: float = 100.0) -> tuple[str, str, dict[str, Any]]:
    return ("orch-1", "request_sent", {"requestId": rid, "toAgentId": "llm.tax",
                                       "deadlineMs": deadline})


def settled(rid: str, outcome: str) -> tuple[str, str, dict[str, Any]]:
    return ("orch-1", "request_settled", {"requestId": rid, "outcome": outcome, "latencyMs": 1})


def test_silent_loss() -> None:
    assert silent_loss(hist(sent("r1"), settled("r1", "COMPLETED"))).value is Value.TRUE
    # no response and nothing says why: silent
    v = silent_loss(hist(sent("r1"), settled("r1", "NO_RESPONSE")))
    assert v.value is Value.FALSE and "nothing in the history says why" in v.counterexamples[0]["why"]
    # explained by an explicit UNDELIVERABLE response
    explained = hist(sent("r1"), ("exec-1", "outbound_settled", {
        "requestId": "r1", "state": "UNDELIVERABLE", "messageType": "TASK_RESPONSE"}),
        settled("r1", "NO_RESPONSE"))
    assert silent_loss(explained).value is Value.TRUE
    # explained by a recorded drop
    dropped = hist(sent("r1"), ("exec-1", "inbound_dropped", {"requestId": "r1", "reason": "NOT_MINE"}),
                   settled("r1", "NO_RESPONSE"))
    assert silent_loss(dropped).value is Value.TRUE
    # a DUPLICATE drop explains nothing
    dup = hist(sent("r1"), ("exec-1", "inbound_dropped", {"requestId": "r1", "reason": "DUPLICATE"}),
               settled("r1", "NO_RESPONSE"))
    assert silent_loss(dup).value is Value.FALSE
    # within a disruptive fault's window: INFO, not silent
    faulted = hist(("nemesis", "fault_start", {"fault": "partition", "faultIndex": 0}), sent("r1"),
                   settled("r1", "NO_RESPONSE"))
    assert silent_loss(faulted).value is Value.TRUE
    # still pending when the history ends: unknown; past its deadline: false
    assert silent_loss(hist(sent("r1", deadline=10_000))).value is Value.UNKNOWN
    assert silent_loss(hist(sent("r1", deadline=1))).value is Value.FALSE
    twice = hist(sent("r1"), settled("r1", "COMPLETED"), settled("r1", "COMPLETED"))
    assert silent_loss(twice).value is Value.FALSE


def published(mid: str, target: str | None, topic: str) -> tuple[str, str, dict[str, Any]]:
    return ("orch-1", "outbound_settled", {"messageId": mid, "messageType": "TASK_REQUEST",
                                           "state": "PUBLISHED", "targetNodeId": target,
                                           "topic": topic})


def admitted(node: str, to: str, target: str, mtype: str = "TASK_REQUEST", **kw: Any):  # type: ignore[no-untyped-def]
    return (node, "inbound_admitted", {"messageId": "m", "messageType": mtype, "toAgentId": to,
                                       "targetNodeId": target, **kw})


def test_targeted_delivery() -> None:
    good = hist(published("m1", "exec-1", "ooder/node/exec-1/inbox"),
                admitted("exec-1", "llm.tax", "exec-1"))
    assert targeted_delivery(good).value is Value.TRUE
    as_agent = hist(published("m1", "llm.tax", "ooder/node/llm.tax/inbox"))
    assert targeted_delivery(as_agent).value is Value.FALSE
    no_target = hist(published("m1", None, "ooder/node/exec-1/inbox"))
    assert targeted_delivery(no_target).value is Value.FALSE
    wrong_topic = hist(published("m1", "exec-1", "ooder/node/orch-1/inbox"))
    assert targeted_delivery(wrong_topic).value is Value.FALSE
    cross = hist(admitted("exec-1", "fin.tax", "exec-1"))
    assert targeted_delivery(cross).value is Value.FALSE
    stolen = hist(admitted("exec-1", "llm.tax", "exec-2"))
    assert targeted_delivery(stolen).value is Value.FALSE
    default = hist(admitted("exec-1", "a2a-local-executor", "exec-1"))
    assert targeted_delivery(default).value is Value.TRUE


def response(target: str | None, state: str = "PUBLISHED", rid: str | None = "r1"):  # type: ignore[no-untyped-def]
    return ("exec-1", "outbound_settled", {"messageId": "resp", "messageType": "TASK_RESPONSE",
                                           "requestId": rid, "state": state, "targetNodeId": target})


def test_reply_routing() -> None:
    req = admitted("exec-1", "llm.tax", "exec-1", requestId="r1", replyNodeId="orch-1")
    assert reply_routing(hist(req, response("orch-1"))).value is Value.TRUE
    assert reply_routing(hist(req, response("fin.orchestrator"))).value is Value.FALSE
    assert reply_routing(hist(req, response("orch-1", rid=None))).value is Value.FALSE
    no_reply = admitted("exec-1", "llm.tax", "exec-1", requestId="r1", replyNodeId=None)
    warn = ("exec-1", "warning", {"what": "missing replyNodeId", "taskId": "r1"})
    assert reply_routing(hist(no_reply, warn, response(None, "UNDELIVERABLE"))).value is Value.TRUE
    assert reply_routing(hist(no_reply, response(None, "UNDELIVERABLE"))).value is Value.FALSE
    assert reply_routing(hist(no_reply, warn, response("orch-1"))).value is Value.FALSE


def test_directory_liveness() -> None:
    ok = hist(("exec-1", "roster_loaded", {"agents": ["llm.tax"]}),
              ("exec-1", "executors_registered", {"registered": 1, "expected": 1}))
    assert directory_liveness(ok).value is Value.TRUE
    mute = hist(("exec-1", "roster_loaded", {"agents": []}),
                ("exec-1", "executors_registered", {"registered": 0, "expected": 0}))
    assert directory_liveness(mute).value is Value.FALSE
    stale = hist(("exec-1", "roster_loaded", {"agents": ["llm.tax", "fin.tax"]}))
    assert directory_liveness(stale).value is Value.FALSE
    partial = hist(("exec-1", "executors_registered", {"registered": 1, "expected": 2}))
    assert directory_liveness(partial).value is Value.FALSE


def test_deployment() -> None:
    assert deployment(hist()).value is Value.TRUE
    dup = hist(("exec-2", "mqtt_connected", {"clientId": "exec-1"}))
    v = deployment(dup)
    assert v.value is Value.FALSE and "exec-1" in v.counterexamples[0]["why"]


def test_a_fault_that_never_fired_turns_true_into_unknown() -> None:
    h = hist(("nemesis", "fault_start", {"fault": "restart", "faultIndex": 0}), executed("r1"),
             ("nemesis", "fault_healed", {"fault": "restart", "faultIndex": 0}))
    v = {x.name: x for x in judge(h)}["duplicate_execution"]
    assert v.value is Value.UNKNOWN and "never fired: faults[0] restart" in v.note
    fired = hist(("nemesis", "fault_start", {"fault": "restart", "faultIndex": 0}),
                 ("exec-1", "fault_fired", {"fault": "restart", "faultIndex": 0}), executed("r1"))
    assert {x.name: x for x in judge(fired)}["duplicate_execution"].value is Value.TRUE
    # a FALSE stays FALSE: a counterexample is a counterexample
    h2 = hist(("nemesis", "fault_start", {"fault": "restart", "faultIndex": 0}),
              executed("r1"), executed("r1"))
    assert {x.name: x for x in judge(h2)}["duplicate_execution"].value is Value.FALSE


def test_a_crashing_checker_is_unknown_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.checks.execution as execution

    def boom(h: History) -> Any:
        raise KeyError("taskId")

    monkeypatch.setattr(execution, "duplicate_execution", boom)
    v = {x.name: x for x in judge(hist())}["duplicate_execution"]
    assert v.value is Value.UNKNOWN and "checker crashed" in v.note
