"""The MUSTs a broker keeps, judged from the run (deployment checker): a simulated broker
seeded with each defect turns its rule FALSE, and the brokers that keep it pass.

The first two defects were seen on a third-party broker a user brought: it re-sent a
resumed session's unacknowledged QoS1 messages under new packet ids with DUP=0, and it never
gave a silent client up; every verdict said TRUE. The third is MQTTnet 4.2's
(dotnet/MQTTnet#1756): an MQTT 5 session resumed past its Session Expiry Interval."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.run import run_scenario
from bench.spec import brokers
from bench.spec.scenario import load_scenario
from bench.variants import REFERENCE

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _verdict(tmp_path: Path, scenario: str, name: str) -> dict[str, object]:
    """Checker `name`'s verdict, as verdicts.json holds it, of a simulated run."""
    loaded = load_scenario(SCENARIOS / f"{scenario}.toml")
    run_scenario(loaded, REFERENCE, tmp_path, mode="sim")
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())["verdicts"]
    got: dict[str, object] = next(v for v in verdicts if v["name"] == name)
    return got


def deployment(tmp_path: Path, scenario: str) -> dict[str, object]:
    return _verdict(tmp_path, scenario, "deployment")


def test_a_resumed_session_resent_under_new_packet_ids_is_false(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = deployment(tmp_path / "kept", "broker_redelivery")
    assert kept["value"] == "true"
    assert kept["counts"]["redelivered_as_the_same_packet"] >= 5   # type: ignore[index]
    monkeypatch.setitem(brokers.BEHAVIOURS, "generic", dataclasses.replace(
        brokers.BEHAVIOURS["generic"], resends_under_new_ids=True))
    broken = deployment(tmp_path / "broken", "broker_redelivery")
    assert broken["value"] == "false"
    assert broken["rules"]["redelivers_the_same_packet"]["violations"] >= 5  # type: ignore[index]


@pytest.mark.parametrize("model, value", [("generic", "true"), ("mosquitto", "true"),
                                          ("amqtt", "false")])
def test_a_broker_that_never_gives_a_silent_client_up_is_false(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, value: str) -> None:
    """amqtt 0.12's row (measured: it never closes a silent client) is the seeded defect."""
    monkeypatch.setitem(brokers.BEHAVIOURS, "generic", brokers.BEHAVIOURS[model])
    got = deployment(tmp_path, "partition")
    assert got["value"] == value
    rule = got["rules"]["gives_up_a_silent_client"]  # type: ignore[index]
    assert rule["violations"] == (value == "false")


def test_a_session_resumed_past_its_expiry_is_false(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """exec-1 is down 8 s with a 2 s Session Expiry Interval: a broker that keeps the
    session past it is FALSE, and nothing else notices (the node is happy to be resumed)."""
    kept = deployment(tmp_path / "kept", "session_expired")
    assert kept["value"] == "true"
    assert kept["counts"]["away_past_expiry"] == 1     # type: ignore[index]
    monkeypatch.setitem(brokers.BEHAVIOURS, "generic", dataclasses.replace(
        brokers.BEHAVIOURS["generic"], resumes_expired_sessions=True))
    broken = deployment(tmp_path / "broken", "session_expired")
    assert broken["value"] == "false"
    assert broken["rules"]["expired_session_not_resumed"]["violations"] == 1  # type: ignore[index]


def test_a_shared_group_message_copied_to_every_member_is_false(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MQTT 5 §4.8.2: one member of a shared group gets each message. A broker that copies it
    to every member makes each responder of an A2A pool take (and run) the same request."""
    kept = _verdict(tmp_path / "kept", "a2a_pool", "a2a_broker")
    assert kept["value"] == "true" and kept["counts"]["pooled_requests_taken"] > 0  # type: ignore[index]
    monkeypatch.setitem(brokers.BEHAVIOURS, "generic", brokers.BROKER_DEFECTS[
        "shared_to_every_member"].row(brokers.BEHAVIOURS["generic"]))
    broken = _verdict(tmp_path / "broken", "a2a_pool", "a2a_broker")
    assert broken["value"] == "false"
    assert broken["rules"]["pooled_requests_reach_one_member"]["violations"] > 0  # type: ignore[index]


def test_a_request_delivered_past_its_message_expiry_is_false(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """[MQTT-3.3.2-5]: a2a_expiry's requests carry a 17 s expiry and tax-1 is away 25 s; the
    broker must drop those that expire on its session. One that ignores the interval hands
    them to tax-1 when it is back; only a2a_broker sees it (tax-1 dedups on Task.id, so
    nothing runs twice)."""
    kept = _verdict(tmp_path / "kept", "a2a_expiry", "a2a_broker")
    assert kept["value"] == "true" and kept["counts"]["outlived_their_expiry"] > 0  # type: ignore[index]
    monkeypatch.setitem(brokers.BEHAVIOURS, "generic", brokers.BROKER_DEFECTS[
        "ignores_message_expiry"].row(brokers.BEHAVIOURS["generic"]))
    broken = _verdict(tmp_path / "broken", "a2a_expiry", "a2a_broker")
    assert broken["value"] == "false"
    assert broken["rules"]["expired_requests_not_delivered"]["violations"] > 0  # type: ignore[index]
    assert _verdict(tmp_path / "dup", "a2a_expiry", "duplicate_execution")["value"] == "true"


def test_a_broker_refusing_dollar_topics_is_false(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MQTT 5 §4.7.2 lets a server keep `$` topics to itself; one that does refuses every
    profile request (PUBACK 0x87) with no fault acting: a2a_broker is FALSE; where the
    broker refused no request, it is TRUE."""
    kept = _verdict(tmp_path / "kept", "a2a_quickstart", "a2a_broker")
    assert kept["value"] == "true"
    monkeypatch.setitem(brokers.BEHAVIOURS, "generic", brokers.BROKER_DEFECTS[
        "refuses_dollar_publishes"].row(brokers.BEHAVIOURS["generic"]))
    broken = _verdict(tmp_path / "broken", "a2a_quickstart", "a2a_broker")
    assert broken["value"] == "false"
    assert broken["rules"]["refusals_have_a_cause"]["violations"] > 0  # type: ignore[index]


def _broker_rules() -> set[tuple[str, str]]:
    """Every rule that judges the broker: deployment's about the broker (its other two
    judge the nodes' client ids) and every rule of a2a_broker."""
    from bench.protocols.a2a_mqtt.rules.broker import A2A_BROKER
    from bench.protocols.seed.rules.directory import DEPLOYMENT
    nodes_own = {"unique_client_ids", "connects_under_its_client_id"}
    return {(DEPLOYMENT.name, r.id) for r in DEPLOYMENT.rules
            if r.id not in nodes_own} | {(A2A_BROKER.name, r.id)
                                                for r in A2A_BROKER.rules}


def test_every_rule_that_judges_the_broker_has_a_seeded_defect() -> None:
    seeded = {(d.caught_by, d.rule) for d in brokers.BROKER_DEFECTS.values()}
    assert _broker_rules() == seeded


@pytest.mark.parametrize("name", list(brokers.BROKER_DEFECTS))
def test_each_seeded_broker_defect_turns_its_rule_false(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The simulated broker with one defect (spec/brokers.py BROKER_DEFECTS): its rule has
    violations on its scenario, and none on the same run with the broker as MQTT says."""
    defect = brokers.BROKER_DEFECTS[name]
    kept = _verdict(tmp_path / "kept", defect.scenario, defect.caught_by)
    assert kept["rules"][defect.rule]["violations"] == 0, kept   # type: ignore[index]
    monkeypatch.setitem(brokers.BEHAVIOURS, "generic", defect.row(brokers.BEHAVIOURS["generic"]))
    broken = _verdict(tmp_path / "broken", defect.scenario, defect.caught_by)
    assert broken["value"] == "false", broken
    assert broken["rules"][defect.rule]["violations"] > 0, broken   # type: ignore[index]
