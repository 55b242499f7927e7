"""`a2a-bench conform`: anyone's node judged rule by rule (issue 17). The whole suite on the
reference and on the Rust node is measured in the closing note (about 2 minutes each);
here one short run of it, and the verdict-to-rule mapping on its own."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.checks import Value, Verdict, checkers
from bench.cli import EXIT_INVALID, main
from bench.conform import PROFILES, clause_rows, conform, judge_rules
from bench.protocols import DEFAULT, ConformRule
from bench.spec.scenario import SCENARIOS

REFERENCE_COMMAND = (sys.executable, "-m", "bench.substrates.live.node_process")


def test_every_rule_is_judged_by_checker_rules_that_exist_and_every_run_is_a_scenario() -> None:
    known = {f"{name}.{r.id}" for name, c in checkers().items() for r in c.rules}
    seed = PROFILES[DEFAULT]
    assert {ref for rule in seed.rules for ref in rule.judged_by} <= known
    assert all((SCENARIOS / f"{name}.toml").exists() for name, _s, _w in seed.suite)


def _verdict(name: str, rules: dict[str, tuple[int, int]], note: str = "",
             cases: list[dict[str, object]] | None = None) -> Verdict:
    return Verdict(name, Value.TRUE, note=note, counterexamples=cases or [],
                   rules={r: {"violations": v, "unknown": u} for r, (v, u) in rules.items()})


def test_a_rule_fails_on_any_violation_passes_where_judged_and_else_is_unknown() -> None:
    rows = {r.rule.ids: r for r in judge_rules({
        "restart": [_verdict("duplicate_execution", {"executed_once": (0, 0)}),
                    _verdict("task_lifecycle", {"reaches_terminal": (0, 0)})],
        "quickstart": [
            _verdict("wire_evidence", {"reports_match_the_wire": (1, 0),
                                       "subscribes_to_its_own_inbox": (0, 0)},
                     cases=[{"rule": "reports_match_the_wire", "why": "exec-1 lied"}]),
            _verdict("gate_integrity", {"decided_once": (0, 0)},
                     note="not applicable: exec-1 declares no gates (node_started.features)")],
    })}
    assert rows["W-TASK-6"].status == "PASS" and rows["W-TASK-6"].evidence == "judged in restart"
    # judged in the restart, but its other situation (a redelivery) never ran
    assert rows["W-TASK-1"].status == "UNKNOWN"
    assert rows["W-TASK-1"].evidence == "qos1_redelivery: not run"
    assert rows["P-OUT-1..4"].status == "FAIL"
    assert rows["P-OUT-1..4"].evidence == "quickstart: wire_evidence.reports_match_the_wire: exec-1 lied"
    assert rows["§1.14 gates"].status == "UNKNOWN" and "declares no gates" in rows["§1.14 gates"].evidence
    assert rows["W-TOP-4"].status == "PASS"


def test_a_rule_judged_in_one_of_its_alternative_runs_passes_naming_the_one_that_could_not(
        ) -> None:
    """`one_of`: runs that each reach the rule's situation their own way. One judging it is
    enough, the one that could not decide is named; none judging it leaves it UNKNOWN; a
    violation in any FAILs."""
    rule = ConformRule("A2M-REQ-4", "follow-ups",
                       ("a2a_requests.follow_ups_go_to_the_named_agent",), ("a2a_handover",),
                       one_of=("a2a_pool", "a2a_pool_unnamed"))

    def run(v: int, u: int, note: str = "") -> list[Verdict]:
        return [_verdict("a2a_requests", {"follow_ups_go_to_the_named_agent": (v, u)}, note,
                         [{"rule": "follow_ups_go_to_the_named_agent", "why": "to the pool"}]
                         if v else None)]
    judged, undecided = run(0, 0), run(0, 2)
    [row] = judge_rules({"a2a_handover": judged, "a2a_pool": undecided,
                         "a2a_pool_unnamed": judged}, (rule,))
    assert row.status == "PASS", row
    assert row.evidence == ("judged in a2a_handover, a2a_pool_unnamed; not in a2a_pool: "
                            "a2a_requests.follow_ups_go_to_the_named_agent could not decide "
                            "2 case(s)")
    [row] = judge_rules({"a2a_handover": judged, "a2a_pool": undecided}, (rule,))
    assert row.status == "UNKNOWN" and row.scenario == "a2a_pool", row
    [row] = judge_rules({"a2a_handover": judged, "a2a_pool": run(1, 0),
                         "a2a_pool_unnamed": judged}, (rule,))
    assert row.status == "FAIL" and row.scenario == "a2a_pool", row
    # the runs of `where` are each still needed
    [row] = judge_rules({"a2a_pool_unnamed": judged}, (rule,))
    assert row.status == "UNKNOWN" and row.evidence == "a2a_handover: not run", row


def test_one_short_run_gives_the_table_with_its_evidence(tmp_path: Path) -> None:
    rows = conform(REFERENCE_COMMAND, tmp_path, say=lambda line: None,
                   suite=(("quickstart", 4, "streamed tasks"),))
    by = {r.rule.ids: r.status for r in rows}
    assert by["W-TOP-4"] == "PASS" and by["§1.14 gates"] == "PASS", by
    assert by["W-TASK-6"] == "UNKNOWN"    # nothing restarted in the quickstart
    assert "FAIL" not in by.values(), [(r.rule.ids, r.evidence) for r in rows if r.status == "FAIL"]
    saved = json.loads((tmp_path / "conform.json").read_text())
    assert [r["status"] for r in saved["rules"]] == [r.status for r in rows]


@pytest.mark.parametrize("cmd", ["/no/such/node", ""])
def test_a_command_conform_cannot_start_is_one_line_and_exit_3(
        cmd: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform", cmd]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err.startswith("a2a-bench: conform") and len(err.strip().splitlines()) == 1, err


# -- the A2A-over-MQTT profile --------------------------------------------------------------------
@pytest.mark.parametrize("role", ["a2a-mqtt", "a2a-mqtt/requester"])
def test_the_profiles_rules_cite_its_clauses_and_rules_that_exist(role: str) -> None:
    from bench.protocols.a2a_mqtt.clauses import BY_ID
    p = PROFILES[role]
    binds = {c.id for c in p.table}
    known = {f"{name}.{r.id}" for name, c in checkers().items() for r in c.rules}
    assert {ref for rule in p.rules for ref in rule.judged_by} <= known
    assert all(i.strip() in BY_ID for rule in p.rules for i in rule.ids.split(","))
    # each row is about a clause that binds the role
    assert all(i.strip() in binds for rule in p.rules for i in rule.ids.split(","))
    assert all((SCENARIOS / f"{name}.toml").exists() for name, _s, _w in p.suite)
    assert {s for rule in p.rules for s in rule.runs} <= {s for s, _t, _w in p.suite}


def test_the_profiles_table_has_every_responder_clause_grouped_by_level() -> None:
    """Judged rows, and a row per responder clause nothing judges yet ('not judged'); with
    --core an Extended clause is 'not applicable', not 'never exercised'."""
    from bench.protocols.a2a_mqtt.clauses import BY_ID, Conformance
    p = PROFILES["a2a-mqtt"]
    bare = replace(p, unjudged=())     # no word of why no rule judges a clause
    rows = clause_rows(judge_rules({"a2a_quickstart": [_verdict(
        "duplicate_execution", {"executed_once": (0, 0)})]}, p.rules), bare, {"core"})
    ids = {i.strip() for r in rows for i in r.rule.ids.split(",")}
    assert {c.id for c in p.table} <= ids
    levels = [r.level for r in rows]
    assert levels == sorted(levels, key=["MUST", "MUST NOT", "SHOULD", "MAY"].index)
    by = {r.rule.ids: r for r in rows}
    assert by["A2M-RETRY-3, A2M-DUP-1"].evidence == "a2a_restart: not run"
    assert by["A2M-RSP-5"].evidence.startswith("not applicable: declared core")
    assert by["A2M-RSP-6"].evidence == "a2a_oauth: not run"
    assert by["A2M-SESS-6"].evidence == "a2a_oauth: not run"
    assert by["A2M-DUP-2"].evidence == "not judged: no rule of the bench observes it yet"
    # the profile names why no rule judges it: no scenario reaches it
    named = clause_rows(judge_rules({}, p.rules), p)
    assert {r.rule.ids: r for r in named}["A2M-DUP-2"].evidence.startswith("never exercised: ")
    assert not [r for r in named if r.evidence.startswith("not judged")]
    extended = [r for r in rows
                if BY_ID[r.rule.ids.split(",")[0].strip()].conformance is Conformance.EXTENDED]
    assert extended and all(r.status == "UNKNOWN" and r.declared_out for r in extended)
    # an agent that declares it handles no bearer tokens: those clauses are not applicable
    rows = clause_rows(judge_rules({}, p.rules), bare, {"no-tokens"})
    by = {r.rule.ids: r for r in rows}
    for clause in ("A2M-RSP-6", "A2M-RSP-7", "A2M-SESS-6"):
        assert by[clause].declared_out and "--no-tokens" in by[clause].evidence


def test_a_get_task_a_responder_does_not_serve_fails_the_core_operations_not_the_retry_clause(
        ) -> None:
    """A GetTask answered -32601 for a task the responder said it had (the example
    responder serves SendMessage only) breaks A2A's core operations (A2M-BASE-2), not the
    dedup of retried requests (A2M-RETRY-3, Retry profile item 4); a responder never
    asked a GetTask of a task it had is UNKNOWN there, not PASS."""
    rules = PROFILES["a2a-mqtt"].rules
    denied = [{"rule": "known_tasks_stay_known",
               "why": "tax-1 answered GetTask for task t1 with error -32601"}]
    runs = {name: [_verdict("a2a_replies", {"ended_tasks_stay_ended": (0, 0),
                                           "known_tasks_stay_known": (0, 0)})]
            for name in ("a2a_restart", "a2a_lost_reply_restart")}
    runs["a2a_multiturn"] = [replace(_verdict(
        "a2a_replies", {"ended_tasks_stay_ended": (0, 0), "known_tasks_stay_known": (1, 0)},
        cases=denied), counts={"follow_ups_of_a_task_it_had": 3})]
    by = {r.rule.ids: r for r in judge_rules(runs, rules)}
    assert by["A2M-BASE-2"].status == "FAIL" and "-32601" in by["A2M-BASE-2"].evidence
    assert by["A2M-RETRY-3"].status == "PASS", by["A2M-RETRY-3"]
    runs["a2a_multiturn"] = runs["a2a_restart"]      # no GetTask of a task it had, anywhere
    by = {r.rule.ids: r for r in judge_rules(runs, rules)}
    assert by["A2M-BASE-2"].status == "UNKNOWN", by["A2M-BASE-2"]
    assert by["A2M-BASE-2"].evidence.startswith("never exercised: ")


@pytest.mark.parametrize("bug", [(), ("--bug", "clean-start")], ids=["as-written", "clean-start"])
def test_one_short_profile_run_of_a_responder_written_elsewhere(
        tmp_path: Path, bug: tuple[str, ...]) -> None:
    example = (sys.executable, str(Path(__file__).resolve().parents[2] / "examples"
                                   / "a2a-responder" / "responder.py"), *bug)
    rows = conform(example, tmp_path, say=lambda line: None, profile="a2a-mqtt",
                   suite=(("a2a_quickstart", 4, "requests and replies"),))
    by = {r.rule.ids: r for r in rows}
    session = by["A2M-SESS-5"]
    if bug:
        assert session.status == "FAIL" and "clean start 1" in session.evidence
    else:
        assert session.status == "UNKNOWN" and session.evidence == "a2a_restart: not run"
        assert by["A2M-SESS-3, A2M-ID-1"].status == "PASS" and by["A2M-RSP-1"].status == "PASS"
        assert "FAIL" not in {r.status for r in rows}
    saved = json.loads((tmp_path / "conform.json").read_text())
    assert saved["profile"] == "a2a-mqtt" and saved["broker"] == "mosquitto"
    assert {r["level"] for r in saved["rules"]} <= {"MUST", "MUST NOT", "SHOULD", "MAY"}


def test_one_short_profile_run_of_a_requester_written_elsewhere(tmp_path: Path) -> None:
    example = (sys.executable, str(Path(__file__).resolve().parents[2] / "examples"
                                   / "a2a-requester" / "requester.py"), "--bug", "fixed-task-id")
    rows = conform(example, tmp_path, say=lambda line: None, profile="a2a-mqtt/requester",
                   suite=(("a2a_quickstart", 4, "requests and replies"),))
    by = {r.rule.ids: r for r in rows}
    assert by["A2M-RR-2, A2M-RR-5, A2M-SESS-2"].status == "FAIL"
    assert "not a UUIDv4" in by["A2M-RR-2, A2M-RR-5, A2M-SESS-2"].evidence
    assert by["A2M-SESS-3, A2M-ID-1"].status == "PASS"
    assert by["A2M-SESS-4"].status == "PASS"     # a fresh UUID's hex for its suffix
    # a requester publishes no Agent Card: the discovery clauses are not its to keep
    assert by["A2M-DISC-1"].declared_out and "Discovery Publisher" in by["A2M-DISC-1"].evidence
    assert by["A2M-RR-1, A2M-TOPIC-2, A2M-TOPIC-3"].evidence == "a2a_pool: not run"


def test_the_profile_on_amqtt_or_seed_only_flags_are_one_line_and_exit_3(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform", "--profile", "a2a-mqtt", "--broker", "amqtt", sys.executable]) \
        == EXIT_INVALID
    assert main(["conform", "--level", "must", sys.executable]) == EXIT_INVALID
    assert main(["conform", "--no-tokens", sys.executable]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "MQTT 5" in err[0] and "--protocol a2a-mqtt" in err[1], err
    assert "--no-tokens" in err[2]


def test_conform_takes_a_command_or_an_image_and_an_image_it_has(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform", "--profile", "a2a-mqtt"]) == EXIT_INVALID
    assert main(["conform", "--profile", "a2a-mqtt", "--image", "x:1", sys.executable]) \
        == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("CMD) or --image IMAGE" in line for line in err), err

