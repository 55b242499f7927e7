"""Process instances, copy-on-write context and cross-node human gates, through two cores
back to back (the Wire): the orchestrator holds the gate store, the executor the instance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.commands import RunStep
from bench.core.envelope import Envelope, Json, MessageType, decode, encode
from bench.core.inputs import HumanDecided, MessageReceived, TaskRequested
from bench.core.topics import Topics
from bench.protocols.seed.context import ContextError, Merge, apply_ops, deep_copy, merge
from bench.protocols.seed.process import parse_steps
from bench.substrates.wire import Wire

Pair = Callable[..., Wire]

GATED = [{"id": "prepare", "kind": "work"},
         {"id": "approve", "kind": "human", "prompt": "ok?", "timeoutMs": 10_000},
         {"id": "finish", "kind": "work", "merge": "replace"}]


def request(w: Wire, steps: Any, rid: str = "r1", timeout_ms: int = 60_000) -> None:
    w.feed("orch-1", TaskRequested(w.now_ms, rid, f"m-{rid}", "fin.orchestrator", "llm.tax",
                                   {"ask": rid, "process": steps, "timeoutMs": timeout_ms},
                                   conversation_id="c1", timeout_ms=timeout_ms))


def kinds(w: Wire, kind: str) -> list[dict[str, Any]]:
    return [dict(e.fields, node=e.node) for e in w.history.of_kind(kind)]


def click(w: Wire, decision: str = "approve", n: int = 1, gate: str = "pi-r1:approve") -> None:
    w.feed("orch-1", HumanDecided(w.now_ms, gate, decision, f"{gate}/click{n}"))


def settled(w: Wire, rid: str = "r1") -> str:
    return w.settled[rid][0].value


# -- the context, as pure functions ------------------------------------------------------------

def test_ops_set_and_append_at_paths_and_reject_bad_ones() -> None:
    ctx: Json = {"facts": {}, "log": []}
    apply_ops(ctx, [{"op": "set", "path": ["facts", "a"], "value": 1},
                    {"op": "append", "path": ["log"], "value": "x"},
                    {"op": "set", "path": ["new", "deep"], "value": [1]}])
    assert ctx == {"facts": {"a": 1}, "log": ["x"], "new": {"deep": [1]}}
    for bad in ({"op": "append", "path": ["facts"], "value": 1}, {"op": "zap", "path": ["a"]},
                {"op": "set", "path": []}, {"op": "set", "path": ["log", "x"], "value": 1}):
        with pytest.raises(ContextError):
            apply_ops(deep_copy(ctx), [bad])


@given(st.lists(st.tuples(st.sampled_from(["set", "append"]), st.sampled_from("abc"),
                          st.integers()), max_size=8),
       st.lists(st.tuples(st.sampled_from(["set", "append"]), st.sampled_from("xyz"),
                          st.integers()), max_size=8))
def test_deep_merge_of_two_branches_equals_applying_both_branches_writes(a: Any, b: Any) -> None:
    """Branches writing disjoint keys, each from the same snapshot: merging both copies
    back is the same as applying both branches' writes to the context."""
    def ops(spec: Any, where: str) -> list[dict[str, Json]]:
        return [{"op": op, "path": [where, k] if op == "set" else [f"{where}-{k}"], "value": v}
                for op, k, v in spec]
    base: Json = {"A": {}, "B": {}, "log": [1]}
    one, two = deep_copy(base), deep_copy(base)
    apply_ops(one, ops(a, "A"))
    apply_ops(two, ops(b, "B"))
    merged = merge(merge(deep_copy(base), base, one, Merge.DEEP), base, two, Merge.DEEP)
    expected = deep_copy(base)
    apply_ops(expected, ops(a, "A") + ops(b, "B"))
    assert merged == expected


def test_process_definitions_are_validated_with_the_key_named() -> None:
    for raw, needle in (([], "non-empty"), ([{"id": "a", "kind": "fly"}], "process[0].kind"),
                        ([{"id": "a/b", "kind": "work"}], "process[0].id"),
                        ([{"id": "a", "kind": "work", "retries": -1}], "process[0].retries"),
                        ([{"id": "p", "kind": "parallel", "branches": [{"id": "g", "kind": "human"}]}],
                         "process[0].branches[0].kind"),
                        ([{"id": "h", "kind": "human", "onTimeout": "shrug"}], "onTimeout"),
                        ([{"id": "a", "kind": "work"}, {"id": "a", "kind": "work"}], "unique")):
        with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("]", r"\]")):
            parse_steps(raw)


def test_a_bad_definition_fails_the_task_explicitly(pair: Pair) -> None:
    w = pair()
    request(w, [{"id": "x", "kind": "teleport"}])
    w.advance(100)
    assert settled(w) == "FAILED"
    assert "bad process definition" in w.settled["r1"][1]["error"]  # type: ignore[index]


# -- copy-on-write in an instance ------------------------------------------------------------------

def failing_first(cmd: RunStep) -> tuple[int, bool, list[Json]]:
    if cmd.attempt == 1:   # writes a draft into its copy, then fails
        return 10, False, [{"op": "set", "path": ["facts", "draft"], "value": "dirty"},
                           {"op": "append", "path": ["log"], "value": "dirty"}]
    return 10, True, [{"op": "set", "path": ["facts", cmd.path], "value": cmd.attempt},
                      {"op": "append", "path": ["log"], "value": cmd.path}]


def test_a_retry_starts_from_the_pre_attempt_snapshot_and_the_failed_copy_is_discarded(pair: Pair) -> None:
    w = pair()
    w.stepper = failing_first
    request(w, [{"id": "a", "kind": "work", "retries": 1}])
    w.advance(1_000)
    starts = kinds(w, "step_started")
    assert [s["attempt"] for s in starts] == [1, 2]
    assert starts[0]["baseDigest"] == starts[1]["baseDigest"]
    assert starts[0]["snapshotId"] == starts[1]["snapshotId"]
    merged = kinds(w, "context_merged")[-1]["context"]
    assert merged["facts"] == {"a": 2} and merged["log"] == ["a"]
    assert settled(w) == "COMPLETED"


def test_parallel_branches_each_start_from_the_same_parent_and_merge_in_branch_order(pair: Pair) -> None:
    w = pair()
    w.stepper = lambda cmd: ({"p/b1": 50, "p/b2": 10}[cmd.path], True,
                             [{"op": "append", "path": ["log"], "value": cmd.path}])
    request(w, [{"id": "p", "kind": "parallel",
                 "branches": [{"id": "b1", "kind": "work"}, {"id": "b2", "kind": "work"}]}])
    w.advance(1_000)
    starts = kinds(w, "step_started")
    assert {s["baseDigest"] for s in starts} == {starts[0]["baseDigest"]}
    assert kinds(w, "context_merged")[-1]["context"]["log"] == ["p/b1", "p/b2"]


def test_a_failed_sub_flow_fails_its_parent_and_is_never_merged(pair: Pair) -> None:
    w = pair()
    w.stepper = lambda cmd: (10, cmd.path != "sub/s2", [{"op": "append", "path": ["log"],
                                                        "value": cmd.path}])
    request(w, [{"id": "sub", "kind": "subflow",
                 "steps": [{"id": "s1", "kind": "work"}, {"id": "s2", "kind": "work"}]},
                {"id": "after", "kind": "work"}])
    w.advance(1_000)
    assert [m["path"] for m in kinds(w, "context_merged")] == ["sub/s1"]   # in the child only
    assert kinds(w, "subflow_finished")[0]["ok"] is False
    assert kinds(w, "instance_state")[-1]["status"] == "FAILED"
    assert not [s for s in kinds(w, "step_started") if s["path"] == "after"]
    assert settled(w) == "FAILED"


# -- gates ----------------------------------------------------------------------------------------

def open_gate(w: Wire) -> None:
    request(w, GATED)
    w.advance(50)
    assert [a.gate_id for _, a in w.asked] == ["pi-r1:approve"]


def test_a_decision_resumes_exactly_its_instance_once_and_is_acknowledged(pair: Pair) -> None:
    w = pair()
    open_gate(w)
    paused = [p for p in kinds(w, "instance_persisted") if p["reason"] == "pause"]
    assert paused[0]["status"] == "PAUSED"   # persisted PAUSED before GATE_OPEN left
    click(w)
    w.advance(500)
    assert [(r["gateId"], r["processInstId"]) for r in kinds(w, "gate_resumed")] == \
        [("pi-r1:approve", "pi-r1")]
    assert kinds(w, "gate_acked")[0]["status"] == "RESUMED"
    assert settled(w) == "COMPLETED"
    assert w.settled["r1"][1]["result"]["context"]["gates"] == {"approve": "approve"}  # type: ignore[index]


def test_a_second_click_is_an_explicit_already_decided(pair: Pair) -> None:
    w = pair()
    open_gate(w)
    click(w, "approve", 1)
    click(w, "reject", 2)
    w.advance(500)
    again = kinds(w, "gate_already_decided")
    assert [(a["click"], a["decided"]) for a in again] == [("pi-r1:approve/click2", "approve")]
    assert len(kinds(w, "gate_resumed")) == 1


def test_a_rejection_fails_the_instance_and_its_task(pair: Pair) -> None:
    w = pair()
    open_gate(w)
    click(w, "reject")
    w.advance(500)
    assert kinds(w, "gate_resumed")[0]["decision"] == "reject"
    assert settled(w) == "FAILED"


def test_an_unacknowledged_decision_is_resent_and_answered_already_decided(pair: Pair) -> None:
    w = pair()
    open_gate(w)
    lost: list[bytes] = []

    def drop_first_ack(node: str, topic: str, payload: bytes) -> list[bytes]:
        env = decode(payload)
        if isinstance(env, Envelope) and env.message_type is MessageType.GATE_ACK and not lost:
            lost.append(payload)
            return []
        return [payload]
    w.on_publish = drop_first_ack
    click(w)
    w.advance(10_000)
    assert lost
    assert [s["attempt"] for s in kinds(w, "gate_decision_sent")] == [1, 2]
    assert [r["status"] for r in kinds(w, "gate_decision_received")] == ["RESUMED", "ALREADY_DECIDED"]
    assert len(kinds(w, "gate_resumed")) == 1
    assert kinds(w, "gate_acked")[-1]["status"] == "ALREADY_DECIDED"


def test_a_decision_nobody_acknowledges_ends_explicitly_unacked(pair: Pair) -> None:
    w = pair()
    open_gate(w)
    w.on_publish = lambda node, topic, payload: [] if isinstance(
        e := decode(payload), Envelope) and e.message_type is MessageType.GATE_DECISION else [payload]
    click(w)
    w.advance(120_000)
    assert len(kinds(w, "gate_decision_sent")) == 6
    assert kinds(w, "gate_unacked")[0]["attempts"] == 6


def test_a_decision_for_an_unknown_instance_gets_a_negative_ack(pair: Pair) -> None:
    w = pair()
    env = Envelope("m-x", MessageType.GATE_DECISION, "fin.orchestrator", w.now_ms,
                   to_agent_id="llm.tax", target_node_id="exec-1",
                   headers={"originNodeId": "orch-1"},
                   payload={"gateId": "pi-nope:g", "processInstId": "pi-nope", "decision": "approve"})
    w.feed("exec-1", MessageReceived(w.now_ms, Topics().inbox("exec-1"), encode(env)))
    assert kinds(w, "gate_decision_received")[0]["status"] == "UNKNOWN_INSTANCE"
    assert kinds(w, "gate_acked")[0]["negative"] is True


def test_a_malformed_gate_message_is_a_recorded_drop(pair: Pair) -> None:
    w = pair()
    env = Envelope("m-y", MessageType.GATE_OPEN, "llm.tax", w.now_ms, to_agent_id="fin.orchestrator",
                   target_node_id="orch-1", payload={"gateId": 7})
    w.feed("orch-1", MessageReceived(w.now_ms, Topics().inbox("orch-1"), encode(env)))
    drop = kinds(w, "inbound_dropped")[-1]
    assert drop["reason"] == "MALFORMED" and "GATE_OPEN needs" in drop["detail"]
    assert not kinds(w, "gate_opened")


@pytest.mark.parametrize("policy, decision", [("reject", "reject"), ("fail", "expired")])
def test_expiry_applies_the_gates_timeout_policy(pair: Pair, policy: str, decision: str) -> None:
    w = pair()
    request(w, [{"id": "approve", "kind": "human", "timeoutMs": 5_000, "onTimeout": policy}])
    w.advance(6_000)
    assert kinds(w, "gate_expired")[0]["policy"] == policy
    assert kinds(w, "gate_resumed")[0]["decision"] == decision
    assert settled(w) == "FAILED"


def test_an_executor_restart_with_a_gate_open_rehydrates_the_instance(pair: Pair) -> None:
    w = pair()
    open_gate(w)
    w.crash("exec-1")
    w.start("exec-1")
    w.advance(100)
    assert not [t for t in kinds(w, "task_state") if t["state"] == "FAILED"]   # not interrupted
    click(w)
    w.advance(500)
    assert [r["processInstId"] for r in kinds(w, "instance_rehydrated")] == ["pi-r1"]
    assert len(kinds(w, "gate_resumed")) == 1
    assert settled(w) == "COMPLETED"


def test_an_orchestrator_restart_with_a_gate_open_asks_again(pair: Pair) -> None:
    w = pair()
    open_gate(w)
    w.crash("orch-1")
    w.start("orch-1")
    w.advance(100)
    assert [(a.gate_id, a.ask) for _, a in w.asked] == [("pi-r1:approve", 1), ("pi-r1:approve", 2)]
    click(w)
    w.advance(500)
    assert len(kinds(w, "gate_resumed")) == 1


def test_a_running_instance_found_at_restart_is_interrupted_explicitly(pair: Pair) -> None:
    w = pair()
    w.stepper = lambda cmd: (5_000, True, [])
    request(w, [{"id": "slow", "kind": "work"}])
    w.advance(100)
    w.crash("exec-1")
    w.start("exec-1")
    w.advance(200)
    ends = [s for s in kinds(w, "instance_state") if s["status"] == "FAILED"]
    assert ends and ends[0]["reason"].startswith("interrupted")
    assert settled(w) == "FAILED"
