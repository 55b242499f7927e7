"""`a2a-bench grid`'s bad input: one line, exit 3, before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import EXIT_INVALID, main
from bench.grid import mqtt5_brokers, suite


@pytest.mark.parametrize(("argv", "says"), [
    (["--responder", "nocommand"], "expected NAME=CMD"),
    (["--responder", "a/b=true"], "no '/' or space"),
    (["--requester", "reference=true"], "not 'reference'"),
    (["--responder", "x=true", "--responder", "x=true"], "given twice"),
    (["--responder", "x="], "expected a command line"),
    (["--broker", "amqtt"], "MQTT 5"),
    (["--only", "quickstart"], "not a run of the suites"),
    (["--responder", "x=true", "--declare", "x=everything"], "expected core or no-tokens"),
    (["--responder", "x=true", "--declare", "y=core"], "NAME one of the implementations"),
    (["--responder", "x=true", "--impl-version", "x"], "expected NAME="),
])
def test_bad_grid_arguments_are_one_line_and_exit_3(
        argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grid", *argv]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_the_grid_runs_both_roles_suites_once_on_every_broker_that_speaks_mqtt_5() -> None:
    names = [name for name, _s, _w in suite()]
    assert len(names) == len(set(names)) and {"a2a_quickstart", "a2a_reply_in_backoff"} <= set(names)
    assert mqtt5_brokers() == ("mosquitto",)


def test_a_counterexample_counts_against_the_side_it_is_about(tmp_path: Path) -> None:
    """By a node one of its history lines is of, or its words name; a case about neither
    side (the bench's own lines) counts against both."""
    from bench.grid import _owner
    run = tmp_path / "a2a_quickstart"
    run.mkdir()
    (run / "history.jsonl").write_text("\n".join(json.dumps(x) for x in (
        {"seq": 1, "node": "nemesis"}, {"seq": 2, "node": "tax-1"},
        {"seq": 3, "node": "client-1"})) + "\n")
    responder, requester = _owner(tmp_path, "responder"), _owner(tmp_path, "requester")
    by_line = {"why": "answered it", "seq": [1, 2]}
    by_words = {"why": "client-1 connected with clean start 1", "seq": [1]}
    neither = {"why": "a fault left nothing", "seq": [1]}
    assert responder("a2a_quickstart", by_line) and not requester("a2a_quickstart", by_line)
    assert requester("a2a_quickstart", by_words) and not responder("a2a_quickstart", by_words)
    assert responder("a2a_quickstart", neither) and requester("a2a_quickstart", neither)


def test_what_an_implementation_declares_holds_in_every_cell_it_is_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--declare NAME=no-tokens,core: the bearer-token and Extended clauses are not
    applicable to NAME (as conform's flags make them), to NAME alone — the reference on the
    other side is still held to them; the cell's command to run it again says so, and
    grid.json carries it."""
    import bench.grid as g
    from bench.checks import NOT_APPLICABLE
    monkeypatch.setattr(g, "run_suite", lambda *a, **k: {})
    sdk = g.Impl("sdk", ("python", "x.py"), frozenset({"no-tokens", "core"}), "sdk 0.1")
    cell = g.run_cell(g.Cell("mosquitto", sdk, g.Impl(g.REFERENCE), tmp_path / "c"), (),
                      lambda _line: None)
    rsp = {r.rule.ids.split(",")[0]: r for r in cell.rows["responder"]}
    req = {r.rule.ids.split(",")[0]: r for r in cell.rows["requester"]}
    assert NOT_APPLICABLE in rsp["A2M-RSP-7"].evidence and "no-tokens" in rsp["A2M-RSP-7"].evidence
    assert NOT_APPLICABLE in rsp["A2M-RSP-5"].evidence and "--core" in rsp["A2M-RSP-5"].evidence
    assert NOT_APPLICABLE not in req["A2M-REQ-5"].evidence        # the reference's
    assert g.again(cell)[-4:] == ("--declare", "sdk=core,no-tokens",
                                  "--impl-version", "sdk=sdk 0.1")
    [c] = g.to_json([cell])["cells"]
    assert c["responder"]["declares"] == ["core", "no-tokens"]
    assert c["responder"]["version"] == "sdk 0.1" and c["requester"]["declares"] == []


def test_a_side_s_case_past_the_few_a_verdict_keeps_is_read_again_from_the_history(
        tmp_path: Path) -> None:
    """A cell reads which side a violation is about from its counterexample; a verdict keeps
    the first five of each rule. Where it kept fewer than it counted, the run's history is
    judged again keeping every one (a responder's case behind five of its requester's
    would otherwise leave the responder's row UNKNOWN, naming the requester)."""
    from dataclasses import replace

    from bench.grid import _every_case
    from bench.run import run_scenario
    from bench.spec.scenario import SCENARIOS, load_scenario
    from bench.variants import VARIANTS
    result = run_scenario(load_scenario(SCENARIOS / "a2a_bad_properties.toml"),
                          VARIANTS["a2m_drops_unknown_properties"], tmp_path)
    [v] = [v for v in result.verdicts if v.name == "a2a_replies"]
    assert v.rules["unknown_properties_ignored"]["violations"] == 3
    assert _every_case(tmp_path, result.verdicts) is result.verdicts     # every case kept
    cut = replace(v, counterexamples=v.counterexamples[:1])
    [again] = _every_case(tmp_path, [cut])
    assert again.name == "a2a_replies" and again.counterexamples == v.counterexamples
