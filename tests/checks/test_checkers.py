"""Checkers on small hand-written histories with known verdicts (TRUE, FALSE, UNKNOWN)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench.checks import Checker, Rule, Value, checkers, judge
from bench.core import events as ev
from bench.history import History
from bench.protocols.seed.rules.delivery import (
    QOS1_DELIVERY,
    REPLY_ROUTING,
    SILENT_LOSS,
    TARGETED_DELIVERY,
)
from bench.protocols.seed.rules.directory import DEPLOYMENT, DIRECTORY_LIVENESS
from bench.protocols.seed.rules.execution import DUPLICATE_EXECUTION, TASK_LIFECYCLE
from tests.helpers import (
    admitted,
    at,
    booted,
    crashed,
    dropped,
    executed,
    fault_fired,
    fault_healed,
    fault_start,
    history,
    outbound,
    request_sent,
    request_settled,
    task_state,
)

#: every hand-written history also with all its events in one millisecond (conftest.py)
pytestmark = pytest.mark.usefixtures("one_millisecond_too")


def rules_of(v: object) -> set[str]:
    return {c["rule"] for c in v.counterexamples}  # type: ignore[attr-defined]


def test_duplicate_execution() -> None:
    assert DUPLICATE_EXECUTION(history(executed("r1"), executed("r2"))).value is Value.TRUE
    v = DUPLICATE_EXECUTION(history(executed("r1"), executed("r1")))
    assert v.value is Value.FALSE and v.counterexamples[0]["seq"] == [3, 4]
    assert v.counterexamples[0]["rule"] == "executed_once"
    assert v.rules["executed_once"]["violations"] == 1


def test_admitted_once_orders_a_flush_and_an_admission_by_seq_not_milliseconds() -> None:
    """Live, a ledger flush and an admission often share a millisecond (the fidelity matrix's
    streaming_home_restart on Mosquitto): which came first is the history's order."""
    def judge_at(*events: ev.Event) -> int:
        return int(DUPLICATE_EXECUTION(history(*events, step_ms=0.0))
                   .rules["admitted_once"]["violations"])

    flush = at("exec-1", ev.LedgerFlushed(1, 0, 0, 0))
    again = admitted("exec-1", "llm.tax", "exec-1", message_id="m1")
    first = admitted("exec-1", "llm.tax", "exec-1", message_id="m1")
    # flushed, then admitted, then crashed: the ledger never held it, the copy is honest
    assert judge_at(flush, first, crashed(), booted(), again) == 0
    # admitted, then flushed, then crashed: the ledger had it on disk, the copy is a duplicate
    assert judge_at(first, flush, crashed(), booted(), again) == 1


def test_nothing_recorded_while_an_interrupted_run_stops_counts_against_a_node() -> None:
    """Ctrl-C on a docker run: the nodes stop one after another, and an executor still
    answering the orchestrator already stopped published answers that never reached it
    (issue 50: qos1_delivery FALSE on the reference). After the interruption nothing is a
    violation, and what was due then is still under way at the history's end."""
    stop = ev.RunInterrupted("Ctrl-C", 25_000.0, node="bench")
    answer = outbound("resp", "PUBLISHED", message_type="TASK_RESPONSE", target="orch-1",
                      node="exec-1")

    def judged(*events: ev.Event, step_ms: float = 1.0) -> Value:
        return QOS1_DELIVERY(history(*events, step_ms=step_ms)).value

    # uninterrupted, long before the end: lost, FALSE
    assert judged(answer, *[at("exec-1", ev.RunStopping())] * 3, step_ms=2_000.0) \
        is Value.FALSE
    # published after the interruption: not judged
    assert judged(stop, answer, *[at("exec-1", ev.RunStopping())] * 3, step_ms=2_000.0) \
        is Value.UNKNOWN
    # published just before it, its addressee stopped after: still under way at the cut
    assert judged(answer, stop, *[at("exec-1", ev.RunStopping())] * 3, step_ms=500.0) \
        is Value.UNKNOWN
    # published long before it and lost: a violation all the same
    assert judged(answer, *[at("exec-1", ev.RunStopping())] * 6, stop, step_ms=500.0) \
        is Value.FALSE


def test_task_lifecycle_true_false_unknown() -> None:
    ok = history(task_state("r", "SUBMITTED", None), task_state("r", "RUNNING", "SUBMITTED"),
                 task_state("r", "COMPLETED", "RUNNING"))
    assert TASK_LIFECYCLE(ok).value is Value.TRUE
    after = history(task_state("r", "SUBMITTED", None), task_state("r", "RUNNING", "SUBMITTED"),
                    task_state("r", "COMPLETED", "RUNNING"), task_state("r", "FAILED", "COMPLETED"))
    assert TASK_LIFECYCLE(after).value is Value.FALSE
    illegal = history(task_state("r", "SUBMITTED", None), task_state("r", "COMPLETED", "SUBMITTED"))
    assert rules_of(TASK_LIFECYCLE(illegal)) == {"legal_transitions"}
    running = history(task_state("r", "SUBMITTED", None), task_state("r", "RUNNING", "SUBMITTED"))
    v = TASK_LIFECYCLE(running)
    assert v.value is Value.UNKNOWN and v.counts["unfinished_at_end"] == 1
    assert v.rules["reaches_terminal"]["unknown"] == 1
    # an UNKNOWN says why: the cases its rules could not decide
    assert v.note == "undecided: reaches_terminal unfinished_at_end (1)"


def restored(node: str = "exec-1", ended: tuple[str, ...] = ()) -> ev.TasksRestored:
    return ev.TasksRestored(1, list(ended), node=node)


def test_a_kill_may_cut_the_records_of_states_it_wrote() -> None:
    """CI, docker restart under load: a node records a state once it is on disk, so a kill
    can cut SUBMITTED's or RUNNING's record after the write; the node, back, reads the task
    RUNNING and ends it FAILED from RUNNING. Across a crash it came back from (its task
    table read back), a record may say it left a state whose record never came — only
    along the machine, never out of an end."""
    interrupted = task_state("r", "FAILED", "RUNNING", "interrupted")
    back = (crashed(), booted(), restored())
    cut_running = history(task_state("r", "SUBMITTED", None), *back, interrupted)
    v = TASK_LIFECYCLE(cut_running)
    assert v.value is Value.TRUE and v.counts["records_cut_by_a_kill"] == 1
    cut_both = history(*back, interrupted)
    assert TASK_LIFECYCLE(cut_both).counts["records_cut_by_a_kill"] == 1
    # no crash between, or no task table read back after it: nothing could have cut them
    assert rules_of(TASK_LIFECYCLE(history(task_state("r", "SUBMITTED", None), interrupted))) \
        == {"legal_transitions"}
    assert rules_of(TASK_LIFECYCLE(history(task_state("r", "SUBMITTED", None), crashed(),
                                           booted(), interrupted))) == {"legal_transitions"}
    # a crash after the record explains nothing
    assert rules_of(TASK_LIFECYCLE(history(interrupted, *back))) == {"legal_transitions"}
    # never out of an end, never to a state the machine does not lead to
    ended = history(task_state("r", "SUBMITTED", None), task_state("r", "RUNNING", "SUBMITTED"),
                    task_state("r", "COMPLETED", "RUNNING"), *back, interrupted)
    assert TASK_LIFECYCLE(ended).value is Value.FALSE
    wrong = history(task_state("r", "SUBMITTED", None), *back,
                    task_state("r", "COMPLETED", "SUBMITTED"))
    assert rules_of(TASK_LIFECYCLE(wrong)) == {"legal_transitions"}
    skipped = history(task_state("r", "SUBMITTED", None), *back,
                      task_state("r", "SUBMITTED", "RUNNING"))
    assert rules_of(TASK_LIFECYCLE(skipped)) == {"legal_transitions"}


def test_a_real_restart_with_its_interrupted_tasks_records_cut() -> None:
    """The same on a recorded live restart (SIGKILL, process nodes, Mosquitto): an
    interrupted task's RUNNING record removed from before the kill, then its SUBMITTED
    too, is a cut the kill explains; a COMPLETED written in before the kill is not."""
    import gzip
    from pathlib import Path

    from bench.history import loads_line
    recorded = Path(__file__).parents[1] / "data" / "live" / \
        "restart.reference.own.s1.live.mosquitto.process.jsonl.gz"
    with gzip.open(recorded, "rt") as fh:
        lines = [loads_line(line) for line in fh if line.strip()]
    crash = next(x["seq"] for x in lines if x["kind"] == "node_crashed")
    task = next(x["taskId"] for x in lines if x["kind"] == "task_state"
                and x.get("error") == "interrupted")

    def judged(keep: Callable[[dict[str, Any]], bool]) -> Any:
        return TASK_LIFECYCLE(History.from_lines([x for x in lines if keep(x)]))

    def mine(x: dict[str, Any], *states: str) -> bool:
        return x["kind"] == "task_state" and x["taskId"] == task and x["state"] in states \
            and x["seq"] < crash

    assert judged(lambda x: True).value is Value.TRUE
    for states in (("RUNNING",), ("SUBMITTED", "RUNNING")):
        v = judged(lambda x, states=states: not mine(x, *states))
        assert v.value is Value.TRUE and v.counts["records_cut_by_a_kill"] == 1
    ended = [dict(x, state="COMPLETED", previous="RUNNING", seq=x["seq"] + 0.5)
             if mine(x, "RUNNING") else x for x in lines]
    lines = sorted([*lines, *(x for x in ended if x not in lines)], key=lambda x: x["seq"])
    assert rules_of(judged(lambda x: True)) == {"legal_transitions"}


def test_silent_loss() -> None:
    assert SILENT_LOSS(history(request_sent("r1"), request_settled("r1", "COMPLETED"))).value \
        is Value.TRUE
    # no response and nothing says why: silent
    v = SILENT_LOSS(history(request_sent("r1"), request_settled("r1", "NO_RESPONSE")))
    assert v.value is Value.FALSE and "nothing in the history says why" in v.counterexamples[0]["why"]
    assert rules_of(v) == {"no_response_explained"}
    # explained by an explicit UNDELIVERABLE response
    explained = history(request_sent("r1"), outbound("resp", "UNDELIVERABLE", request_id="r1",
                                                     message_type="TASK_RESPONSE", node="exec-1"),
                        request_settled("r1", "NO_RESPONSE"))
    assert SILENT_LOSS(explained).value is Value.TRUE
    # explained by a drop at the node the request was published to
    to_exec = outbound("m-r1", "PUBLISHED", target="exec-1", request_id="r1")

    def lost(*between: ev.Event) -> Value:
        return SILENT_LOSS(history(request_sent("r1"), to_exec, *between,
                                   request_settled("r1", "NO_RESPONSE"))).value

    assert lost(dropped("exec-1", "NOT_MINE", request_id="r1")) is Value.TRUE
    # ... not by a DUPLICATE drop, nor by a drop at some other node
    assert lost(dropped("exec-1", "DUPLICATE", request_id="r1")) is Value.FALSE
    assert lost(dropped("exec-2", "NOT_MINE", request_id="r1")) is Value.FALSE
    # an outage of the requester, the target or the broker during the request's life
    # explains it; one of another node, one healed before it was sent, or a fault that
    # loses nothing does not
    assert lost(fault_start("partition", disrupts=True, nodes=["exec-1"])) is Value.TRUE
    assert lost(fault_start("partition", disrupts=True, nodes=["exec-2"])) is Value.FALSE
    assert lost(crashed("exec-1")) is Value.TRUE
    assert lost(ev.FaultFired("broker_restart", 0, "broker crashed", node="nemesis")) \
        is Value.TRUE
    assert lost(fault_start("clock_skew", nodes=["exec-1"])) is Value.FALSE
    # a task still running when the requester gave up explains it; one that had ended does not
    assert lost(executed("r1")) is Value.TRUE
    assert lost(executed("r1"), task_state("r1", "COMPLETED", "RUNNING")) is Value.FALSE
    # ... and so does its response reaching the requester after it gave up; one that came
    # before and that the requester could not match is the requester's fault
    def answered(node: str) -> Value:
        return SILENT_LOSS(history(request_sent("r1"), to_exec,
                                   request_settled("r1", "NO_RESPONSE"),
                                   ev.ResponseUnmatched("r1", "resp", "already settled",
                                                        node=node))).value
    assert answered("orch-1") is Value.TRUE
    assert answered("orch-2") is Value.FALSE
    assert lost(ev.ResponseUnmatched("r1", "resp", "unknown requestId", node="orch-1")) \
        is Value.FALSE
    # a crash lasts until the node's client is connected again, not merely booted (exec-1
    # back, then orch-1 sends: two nodes' clocks, which a tie cannot order — it reads as
    # overlap, and excuses)
    back_up = ev.MqttConnected("exec-1", True, node="exec-1")
    healed_before = history(crashed("exec-1"), booted("exec-1"), back_up, request_sent("r1"),
                            to_exec, request_settled("r1", "NO_RESPONSE"), step_ms=1.0)
    assert SILENT_LOSS(healed_before).value is Value.FALSE
    booted_only = history(crashed("exec-1"), booted("exec-1"), request_sent("r1"), to_exec,
                          request_settled("r1", "NO_RESPONSE"))
    assert SILENT_LOSS(booted_only).value is Value.TRUE
    # after a broker restart a node is out until its own client has reconnected (exec-1's
    # reconnect and orch-1's request: two nodes' clocks, 1 ms apart)
    stop = ev.FaultFired("broker_restart", 0, "broker stopped", node="nemesis")
    start = ev.FaultFired("broker_restart", 0, "broker started", node="nemesis")

    def back(node: str) -> ev.Event:
        return ev.MqttConnected(node, False, node=node)

    def around_restart(*before: ev.Event) -> Value:
        return SILENT_LOSS(history(stop, start, *before, request_sent("r1"), to_exec,
                                   request_settled("r1", "NO_RESPONSE"), back("orch-1"),
                                   back("exec-1"), step_ms=1.0)).value

    assert around_restart() is Value.TRUE
    assert around_restart(back("orch-1"), back("exec-1")) is Value.FALSE
    # giving up before the timeout is a loss of its own (simulated: records are stamped at
    # the instant of the decision)
    simulated = ev.RunStarted("s", "reference", 1, "star", 2, "sim", timers_late_ms=0.0,
                              records_late_ms=0.0)
    early = history(simulated, request_sent("r1", timeout_ms=100), to_exec, crashed("exec-1"),
                    request_settled("r1", "NO_RESPONSE", latency_ms=40))
    assert rules_of(SILENT_LOSS(early)) == {"no_response_not_early"}
    # early on the node's clock only (it was set off meanwhile), on time on the bench's: not
    jumped = history(simulated, request_sent("r1", timeout_ms=100), to_exec, crashed("exec-1"),
                     request_settled("r1", "NO_RESPONSE", latency_ms=40), step_ms=60)
    assert SILENT_LOSS(jumped).value is Value.TRUE
    # live, each record is stamped after its batch's group commit: the node's clock jumped
    # back ten minutes meanwhile (latency -596 s) and the bench's records are 3 ms short of
    # the timeout (clock_ahead, live on Mosquitto): not early
    live = ev.RunStarted("s", "reference", 1, "star", 2, "live", timers_late_ms=2_000.0,
                         records_late_ms=100.0)
    stamped = history(live, request_sent("r1", timeout_ms=4_000), to_exec, crashed("exec-1"),
                      request_settled("r1", "NO_RESPONSE", latency_ms=-595_999), step_ms=1_332)
    assert SILENT_LOSS(stamped).value is Value.TRUE
    assert rules_of(SILENT_LOSS(history(live, request_sent("r1", timeout_ms=4_000), to_exec,
                                        crashed("exec-1"), request_settled(
                                            "r1", "NO_RESPONSE", latency_ms=-595_999),
                                        step_ms=1_200))) == {"no_response_not_early"}
    # still pending when the history ends: unknown; past its deadline: false
    assert SILENT_LOSS(history(request_sent("r1", timeout_ms=10_000), booted(), booted())).value \
        is Value.UNKNOWN
    assert SILENT_LOSS(history(request_sent("r1", timeout_ms=1), booted(), booted(),
                               step_ms=1.0)).value \
        is Value.FALSE
    twice = history(request_sent("r1"), request_settled("r1", "COMPLETED"),
                    request_settled("r1", "COMPLETED"))
    assert rules_of(SILENT_LOSS(twice)) == {"settles_once"}


def test_qos1_delivery_and_a_broker_that_forgot_its_sessions() -> None:
    wipe = fault_start("broker_restart", persistence=False)

    def subscribed(node: str) -> ev.Event:
        return ev.ExecutorsRegistered(2, 2, [], [f"ooder/node/{node}/inbox"], node=node)

    def verdict(*events: ev.Event) -> Value:
        # a long tail so nothing counts as still in flight at the end
        return QOS1_DELIVERY(history(*events, step_ms=1_000)).value

    sent = outbound("m1", "PUBLISHED", target="exec-1", topic="ooder/node/exec-1/inbox")
    assert verdict(sent, admitted("exec-1", "llm.tax", "exec-1", message_id="m1"), booted()) \
        is Value.TRUE
    assert verdict(sent, booted(), booted()) is Value.FALSE
    up = ev.MqttConnected("orch-1", False, node="orch-1")
    # accepted before the wipe, or after it but maybe before the target subscribed again:
    # lost with the broker's memory; accepted on a connection made once the target was
    # subscribed, or acknowledged a second after its SUBACK, not excused
    assert verdict(sent, wipe, booted(), booted()) is Value.TRUE
    assert verdict(wipe, up, sent, subscribed("exec-1"), booted(), booted()) is Value.TRUE
    assert verdict(wipe, up, subscribed("exec-1"), sent, booted(), booted()) is Value.FALSE
    assert verdict(wipe, subscribed("exec-1"), up, sent, booted(), booted()) is Value.FALSE
    # a target that never subscribes again is a mute receiver, not the broker's doing
    assert verdict(wipe, subscribed("exec-2"), up, sent, booted(), booted()) is Value.FALSE


def test_targeted_delivery() -> None:
    good = history(outbound("m1", "PUBLISHED", target="exec-1", topic="ooder/node/exec-1/inbox"),
                   admitted("exec-1", "llm.tax", "exec-1"))
    assert TARGETED_DELIVERY(good).value is Value.TRUE
    as_agent = history(outbound("m1", "PUBLISHED", target="llm.tax",
                                topic="ooder/node/llm.tax/inbox"))
    assert rules_of(TARGETED_DELIVERY(as_agent)) == {"published_to_a_node"}
    no_target = history(outbound("m1", "PUBLISHED", topic="ooder/node/exec-1/inbox"))
    assert TARGETED_DELIVERY(no_target).value is Value.FALSE
    wrong_topic = history(outbound("m1", "PUBLISHED", target="exec-1",
                                   topic="ooder/node/orch-1/inbox"))
    assert TARGETED_DELIVERY(wrong_topic).value is Value.FALSE
    cross = history(admitted("exec-1", "fin.tax", "exec-1"))
    assert rules_of(TARGETED_DELIVERY(cross)) == {"no_foreign_namespace"}
    stolen = history(admitted("exec-1", "llm.tax", "exec-2"))
    assert rules_of(TARGETED_DELIVERY(stolen)) == {"consumed_by_addressee"}
    default = history(admitted("exec-1", "a2a-local-executor", "exec-1"))
    assert TARGETED_DELIVERY(default).value is Value.TRUE


def response(target: str | None, state: str = "PUBLISHED", rid: str | None = "r1") -> ev.Event:
    return outbound("resp", state, message_type="TASK_RESPONSE", target=target,
                    request_id=rid, node="exec-1")


def test_reply_routing() -> None:
    req = admitted("exec-1", "llm.tax", "exec-1", request_id="r1", reply_node_id="orch-1")
    assert REPLY_ROUTING(history(req, response("orch-1"))).value is Value.TRUE
    assert rules_of(REPLY_ROUTING(history(req, response("fin.orchestrator")))) == \
        {"response_to_reply_node"}
    assert rules_of(REPLY_ROUTING(history(req, response("orch-1", rid=None)))) == \
        {"response_echoes_request"}
    no_reply = admitted("exec-1", "llm.tax", "exec-1", request_id="r1")
    warn = at("exec-1", ev.NodeWarning(ev.WarningKind.MISSING_REPLY_NODE, task_id="r1"))
    assert REPLY_ROUTING(history(no_reply, warn, response(None, "UNDELIVERABLE"))).value \
        is Value.TRUE
    assert rules_of(REPLY_ROUTING(history(no_reply, response(None, "UNDELIVERABLE")))) == \
        {"missing_reply_node_explicit"}
    assert REPLY_ROUTING(history(no_reply, warn, response("orch-1"))).value is Value.FALSE


def roster(agents: list[str]) -> ev.Event:
    return ev.RosterLoaded(agents, [], "llm", node="exec-1")


def registered(n: int, expected: int) -> ev.Event:
    return ev.ExecutorsRegistered(n, expected, [], [], node="exec-1")


def test_directory_liveness() -> None:
    ok = history(roster(["llm.tax"]), registered(1, 1))
    assert DIRECTORY_LIVENESS(ok).value is Value.TRUE
    mute = history(roster([]), registered(0, 0))
    assert rules_of(DIRECTORY_LIVENESS(mute)) == {"no_mute_receiver"}
    stale = history(roster(["llm.tax", "fin.tax"]))
    assert rules_of(DIRECTORY_LIVENESS(stale)) == {"roster_of_own_namespace"}
    partial = history(registered(1, 2))
    assert rules_of(DIRECTORY_LIVENESS(partial)) == {"registers_all_expected"}


def test_deployment() -> None:
    assert DEPLOYMENT(history()).value is Value.TRUE
    dup = history(ev.MqttConnected("exec-1", False, node="exec-2"))
    v = DEPLOYMENT(dup)
    assert v.value is Value.FALSE and "exec-1" in v.counterexamples[0]["why"]


def test_an_op_a_node_could_not_carry_out_turns_true_into_unknown() -> None:
    """A node that says it cannot carry out an op the bench sent it (PROTOCOL.md §2.3: a
    Parley library given a fault's clock_skew) ran another run than planned: TRUE is not
    vouched for. A harness_error of the bench's own, with no op, is not the node's."""
    h = history(fault_start("clock_skew"), fault_fired("clock_skew"), executed("r1"),
                ev.HarnessError("cannot carry out clock_skew", {"op": "clock_skew"},
                                node="exec-1"))
    v = {x.name: x for x in judge(h)}["duplicate_execution"]
    assert v.value is Value.UNKNOWN, v
    assert "not carried out (harness_error): exec-1 op 'clock_skew'" in v.note
    # the bench's own harness_error, and a node's about what no fault sent (the Rust node's
    # "tabs" it has not), are not a fault left without effect
    for other in (ev.HarnessError("could not stop x", node="bench"),
                  ev.HarnessError("no browser tabs", {"op": "tabs"}, node="exec-1")):
        assert {x.name: x for x in judge(history(executed("r1"), other))}[
            "duplicate_execution"].value is Value.TRUE


def test_a_fault_that_never_fired_turns_true_into_unknown() -> None:
    h = history(fault_start("restart"), executed("r1"), fault_healed("restart"))
    v = {x.name: x for x in judge(h)}["duplicate_execution"]
    assert v.value is Value.UNKNOWN and "never fired: faults[0] restart" in v.note
    fired = history(fault_start("restart"), fault_fired("restart"), executed("r1"))
    assert {x.name: x for x in judge(fired)}["duplicate_execution"].value is Value.TRUE
    # a FALSE stays FALSE: a counterexample is a counterexample
    h2 = history(fault_start("restart"), executed("r1"), executed("r1"))
    assert {x.name: x for x in judge(h2)}["duplicate_execution"].value is Value.FALSE


def test_a_crashing_checker_is_unknown_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.checks as checks
    real = checks.checkers()

    def boom(h: History, c: object) -> None:
        raise KeyError("taskId")
    broken = Checker("duplicate_execution", "boom", (Rule("executed_once", boom, "test"),))
    monkeypatch.setattr(checks, "checkers", lambda: {**real, "duplicate_execution": broken})
    v = {x.name: x for x in judge(history())}["duplicate_execution"]
    assert v.value is Value.UNKNOWN and "rule executed_once crashed" in v.note

    def no_judgement(h: History) -> str | None:
        raise KeyError("vacuous")
    whole = Checker("duplicate_execution", "boom", (), no_judgement)
    monkeypatch.setattr(checks, "checkers", lambda: {**real, "duplicate_execution": whole})
    v = {x.name: x for x in judge(history())}["duplicate_execution"]
    assert v.value is Value.UNKNOWN and "checker crashed" in v.note


def test_every_checker_rule_has_an_id_a_definition_and_a_citation() -> None:
    seen: set[str] = set()
    for checker in checkers().values():
        assert checker.rules, checker.name
        for r in checker.rules:
            assert r.definition and r.cites, (checker.name, r.id)
            assert r.id not in seen, f"rule id {r.id} used twice"
            seen.add(r.id)


def test_a_crashing_rule_leaves_the_other_rules_findings_standing() -> None:
    def boom(h: History, c: object) -> None:
        raise KeyError("x")
    checker = Checker("duplicate_execution", "test",
                      (Rule("boom", boom, "test"), *checkers()["duplicate_execution"].rules))
    v = checker(history(executed("r1"), executed("r1")))
    assert v.value is Value.FALSE and "rule boom crashed" in v.note
    v = checker(history(executed("r1")))
    assert v.value is Value.UNKNOWN and v.rules["boom"]["unknown"] == 1


def test_warnings_are_true_only_when_the_history_confirms_them() -> None:
    from bench.protocols.seed.rules.robustness import ROBUSTNESS

    def warned(*events: ev.Event) -> int:
        return ROBUSTNESS(history(*events)).rules["warnings_are_true"]["violations"]
    no_reply = ev.NodeWarning(ev.WarningKind.MISSING_REPLY_NODE, task_id="r1", node="exec-1")
    assert warned(admitted("exec-1", "llm.tax", "exec-1", request_id="r1"), no_reply) == 0
    assert warned(admitted("exec-1", "llm.tax", "exec-1", request_id="r1",
                           reply_node_id="orch-1"), no_reply) == 1
    offline = ev.NodeWarning(ev.WarningKind.PUBLISH_WITHOUT_CONNECTION, topic="t", node="exec-1")
    up = ev.MqttConnected("exec-1", False, node="exec-1")
    down = ev.MqttDisconnected("exec-1", "keepalive", node="exec-1")
    assert warned(up, down, offline) == 0
    assert warned(up, offline) == 1
    assert warned(ev.NodeWarning(ev.WarningKind.GATE_RECORD_UNREADABLE, node="orch-1")) == 1


def test_a_drop_explains_only_with_its_true_reason() -> None:
    def drops(*events: ev.Event) -> int:
        return SILENT_LOSS(history(request_sent("r1"), *events)).rules["drops_are_true"][
            "violations"]
    mine = outbound("m1", "PUBLISHED", message_type="EVENT", node="exec-1")
    assert drops(mine, dropped("exec-1", "SELF_LOOP", message_id="m1")) == 0
    assert drops(dropped("exec-1", "SELF_LOOP", message_id="m1")) == 1       # not its own
    seen = admitted("exec-1", "llm.tax", "exec-1", message_id="m2")
    assert drops(seen, dropped("exec-1", "DUPLICATE", message_id="m2")) == 0
    assert drops(dropped("exec-1", "DUPLICATE", message_id="m2")) == 1       # never had it
    assert drops(dropped("exec-1", "MALFORMED")) == 1
    sent = ev.OutboundSettled("m3", "TASK_REQUEST", "PUBLISHED", "directory", "llm.tax",
                              "exec-1", "r3", "ooder/node/exec-1/inbox", node="orch-1")
    roster = ev.RosterLoaded(["llm.tax"], [], "llm", node="exec-1")
    assert drops(sent, dropped("exec-1", "NOT_MINE", message_id="m3")) == 0
    assert drops(roster, sent, dropped("exec-1", "NOT_MINE", message_id="m3")) == 1
