"""MQTT 5, live on Mosquitto: the quickstart and the fault scenarios speak v5 (clean start 0
plus a Session Expiry Interval, reason codes recorded) and give the verdicts they give on
3.1.1; a session that outlives its expiry is gone on the real broker as in simulation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bench.run import run_scenario
from bench.spec.topology import MqttVersion
from bench.substrates import Hosting, Options
from bench.variants import REFERENCE
from tests.live.conftest import MOSQUITTO, compressed, partitioned

pytestmark = pytest.mark.skipif(MOSQUITTO is None and not __import__("os").environ.get("CI"),
                                reason="mosquitto not installed (apt-get install mosquitto; "
                                       ".ci/run does)")

#: One of each kind of fault that touches a session: a node's restart, the broker's, a
#: silent link, the broker's re-delivery, a stolen client id, gates across restarts, and
#: a session that expires, a PUBACK failure reason code (the rest run on 3.1.1 in
#: test_live.py; nothing in them is v5's)
SCENARIOS = ["quickstart", "restart", "broker_restart", "partition", "broker_redelivery",
             "duplicate_client_id", "gates", "session_expired", "puback_refused"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenarios_on_mqtt_5_give_their_3_1_1_verdicts(tmp_path: Path, name: str) -> None:
    scenario = partitioned(20) if name == "partition" else compressed(name, 12)
    scenario = replace(scenario, mqtt=MqttVersion.V5)
    nodes = "process" if name == "restart" else "inproc"
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto", hosting=Hosting(nodes)))
    expect = {k: {"true", "false"} if v == "either" else {v}
              for k, v in result.summary["expect"].items()}
    wrong = {v.name: (v.value.value, v.counterexamples[:2], v.note) for v in result.verdicts
             if v.value.value not in expect.get(v.name, {"true"})}
    assert not wrong
    history = (tmp_path / "history.jsonl").read_text()
    assert '"sessionExpiryS":' in history     # every CONNECT asked for one
    if name == "puback_refused":     # the proxy answered for the broker, and the node heard
        assert '"state":"FAILED"' in history and '"reasonCode":128' in history
    if name == "session_expired":
        counts = {v.name: v.counts for v in result.verdicts}
        assert counts["deployment"]["away_past_expiry"] == 1
        assert counts["qos1_delivery"]["session_expired"] == 1
