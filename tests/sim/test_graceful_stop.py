"""A graceful stop in the simulator (the restart fault's `graceful`), as the live host's:
the node is told it is stopping, what it says then reaches the broker before its
DISCONNECT, and the broker publishes no will; a crash of the same node lets the will speak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.faults.primitives import Crash, FaultRef
from bench.history import Recorder
from bench.spec.scenario import SCENARIOS, Mode, load_scenario
from bench.substrates import Options, open_deployment
from bench.variants import REFERENCE

CARD = "$a2a/v1/discovery/acme/billing/billing.tax1"


@pytest.mark.parametrize(("graceful", "source"), [(True, "agent"), (False, "lwt")])
def test_a_graceful_stop_says_offline_itself_and_a_crash_leaves_it_to_the_will(
        tmp_path: Path, graceful: bool, source: str) -> None:
    scenario = load_scenario(SCENARIOS / "a2a_quickstart.toml")
    dep = open_deployment(Mode.SIM, scenario, REFERENCE, Recorder(), tmp_path, Options())
    dep.start()
    try:   # closed as a run closes it: the simulation turned the garbage collector off
        dep.run_until(2_000)
        up = dep.broker.retained[CARD]            # type: ignore[attr-defined]
        assert dict(up.props.user_properties)["a2a-status"] == "online"
        outcomes = []
        dep.act(Crash(FaultRef(0, "restart"), "tax-1", graceful), outcomes.append)
        assert outcomes and outcomes[0].crashed is not None
        dep.run_until(4_000)                       # the goodbye and the DISCONNECT crossed the link
        card = dep.broker.retained[CARD]           # type: ignore[attr-defined]
        said = dict(card.props.user_properties)
        assert (said["a2a-status"], said["a2a-status-source"]) == ("offline", source)
        assert json.loads(card.payload)            # a card, not a clearing
        assert dep.broker.stats["wills"] == (0 if graceful else 1)   # type: ignore[attr-defined]
    finally:
        dep.close()
