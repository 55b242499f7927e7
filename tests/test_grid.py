"""`a2a-bench grid`'s bad input: one line, exit 3, before anything runs."""

from __future__ import annotations

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
