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
