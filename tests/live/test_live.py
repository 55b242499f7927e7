"""The same scenarios and seeded defects, live: real brokers, real sockets, real QoS1,
real SIGKILLs. Wall-clock tests (each a few seconds, mostly waiting)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.checks import SEED, Value
from bench.run import EXIT_OK, run_scenario
from bench.spec.brokers import BEHAVIOURS
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import Hosting, Options
from bench.variants import REFERENCE, VARIANTS
from tests.helpers import node_clock_origins, not_true
from tests.live.conftest import brokers, compressed, partitioned, unexplained_by_amqtt_resume

BROKERS = brokers()


@pytest.mark.parametrize("broker", BROKERS)
@pytest.mark.parametrize("nodes", ["inproc", "process"])
def test_quickstart_live(tmp_path: Path, broker: str, nodes: str) -> None:
    started_ms = time.time() * 1000
    result = run_scenario(compressed("quickstart", 4), REFERENCE, tmp_path, mode="live",
                          options=Options(broker=broker, hosting=Hosting(nodes)))
    ended_ms = time.time() * 1000
    assert result.exit_code == EXIT_OK, not_true(result)
    assert result.metrics["outcomes"].get("COMPLETED", 0) >= 10
    kinds = [l for l in (tmp_path / "history.jsonl").read_text().splitlines() if '"self_check"' in l]
    assert len(kinds) == 4  # one "message store ready" line per node
    # node clocks read wall time: the run's zero is when the deployment was made, some time
    # during this test (how long after its start depends on the machine's load). An origin
    # is the node's clock when it sent less the tMs of that record, two readings taken one
    # after the other while handling one input: on a loaded machine the second comes some
    # milliseconds later (seen: 3.6 ms; and 2.85 s, an inproc node's input read its clock
    # before a stall of the shared loop on a loaded machine and was handled after it, CI
    # 2026-12-06), so the origin may fall that much early. A minute of slack still tells a
    # wall clock from one started at 0 or at a seeded epoch (years off).
    origins = node_clock_origins(tmp_path / "history.jsonl")
    assert origins and all(started_ms - 60_000 <= o <= ended_ms for o in origins), \
        (started_ms, origins[:3], ended_ms)
    if BEHAVIOURS[broker].subscribe_races_connect:
        # each node starts once the one before is up (amqtt leaves a client deaf whose
        # connect raced another's SUBSCRIBE): a boot, its node's registration, the next boot
        ups = [(e["kind"], e["node"]) for e in map(json.loads, (tmp_path / "history.jsonl")
                                                     .read_text().splitlines())
               if e["kind"] in ("node_started", "executors_registered")]
        assert ups == [(kind, node) for node in dict.fromkeys(n for _k, n in ups)
                       for kind in ("node_started", "executors_registered")], ups


FAULTS = ["restart", "broker_restart", "double_subscription", "overlapping_filters",
          "duplicate_client_id",
          "empty_directory", "stale_roster", "missing_reply_node", "redelivery_restart",
          "partition", "latency", "loss", "broker_redelivery", "duplicate_publish",
          "streaming", "streaming_unwatched", "streaming_local", "streaming_restart",
          "gates", "gate_executor_restart", "gate_orchestrator_restart", "context",
          "attacks", "attacks_audit", "tampering", "tampering_v2", "clock_skew", "mixed_fleet",
          "key_rotation", "key_rotation_clean"]
#: replay_stale waits six minutes for its replays: simulation only (tests/test_scenarios.py)


#: scenarios whose faults alter each message with a probability in windows of a few seconds:
#: squeezed to 8 s at their own rate, tamper_routing's window on exec-2 (3.3 s, p = 0.5) saw
#: some four requests, none altered one run in sixteen (a clean clone under load, 2026-12-07);
#: at three times the rate it sees as many as in the whole scenario and more
RATE_UP = {"tampering": 3, "tampering_v2": 3}


@pytest.mark.parametrize("broker", BROKERS)
@pytest.mark.parametrize("name", FAULTS)
def test_fault_scenarios_live(tmp_path: Path, broker: str, name: str) -> None:
    scenario = partitioned(20) if name == "partition" else compressed(name, 8)
    if name in RATE_UP:
        scenario = replace(scenario, workload=replace(
            scenario.workload, rate_per_s=scenario.workload.rate_per_s * RATE_UP[name]))
    nodes = "process" if name in ("restart", "streaming_restart", "gate_executor_restart",
                                  "gate_orchestrator_restart", "key_rotation") else "inproc"
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker=broker, hosting=Hosting(nodes)))
    expect = {k: {"true", "false"} if v == "either" else {v}
              for k, v in result.summary["expect"].items()}
    wrong = {v.name: (v.value.value, v.counterexamples[:2], v.note) for v in result.verdicts
             if v.value.value not in expect.get(v.name, {"true"})}
    if broker == "amqtt" and wrong:
        wrong = unexplained_by_amqtt_resume(tmp_path, wrong)
    assert not wrong
    fired = [l for l in (tmp_path / "history.jsonl").read_text().splitlines() if '"fault_fired"' in l]
    assert fired or not scenario.faults, "the fault never fired"


#: the seed protocol's defects, squeezed; the A2A-over-MQTT profile's need their scenario's
#: whole length (a 15 s first-reply wait before a retry): tests/live/test_a2a_live.py
LIVE_DEFECTS = [v for v in VARIANTS.values() if v.name != "reference"
                and load_scenario(SCENARIOS / f"{v.scenario}.toml").protocol == SEED]


#: defects whose scenario cannot be squeezed to 8 s: forgets_unacked_decisions needs people
#: deciding at gates between the orchestrator's cut and its crash — 0.75 s squeezed, where
#: a clean clone's run saw no decision twice (2026-12-07); the scenario's own 1.5 s
SQUEEZE_S = {"forgets_unacked_decisions": 16.0}
#: defects only a broker that resends on a resumed session can show: amqtt 0.12 sends
#: nothing again (docs/findings/amqtt.md), so no DUP copy comes for trusts_dup to let past
#: its ledger (tried: partition_one_way squeezed to 20 s on amqtt, TRUE; 8 s on Mosquitto,
#: 3 violations)
ON_MOSQUITTO = {"trusts_dup"}


@pytest.mark.parametrize("defect", LIVE_DEFECTS, ids=lambda v: v.name)
def test_defects_fail_live_as_in_simulation(tmp_path: Path, defect) -> None:  # type: ignore[no-untyped-def]
    """On amqtt, unless the scenario says amqtt itself may turn the verdict (it loses what
    was in flight when a session resumes) or the defect needs what amqtt never sends (a
    resumed session's DUP copies): then on Mosquitto, which keeps and resends it."""
    scenario = compressed(defect.scenario, SQUEEZE_S.get(defect.name, 8))
    broker = "amqtt" if scenario.expect_for("amqtt").get(defect.caught_by, "true") == "true" \
        and defect.name not in ON_MOSQUITTO else "mosquitto"
    if broker not in BROKERS:
        pytest.skip("mosquitto not installed (apt-get install mosquitto; .ci/run does)")
    options = Options(broker=broker)
    ref = {v.name: v for v in run_scenario(scenario, REFERENCE, tmp_path / "ref", mode="live",
                                           options=options).verdicts}
    bad = {v.name: v for v in run_scenario(scenario, defect, tmp_path / "bad", mode="live",
                                           options=options).verdicts}
    judged = ref[defect.caught_by]
    if broker == "amqtt" and judged.value is Value.FALSE:
        # amqtt's own loss of what was in flight at the crash (a loaded clean clone's restart:
        # orch-1-m33 handed over 470 ms before exec-1 died, PUBACKed 1 ms after), not the node's
        wrong = unexplained_by_amqtt_resume(tmp_path / "ref", {judged.name: judged.value})
        assert not wrong, (wrong, judged.counterexamples[:2])
    else:
        assert judged.value is Value.TRUE, judged
    assert bad[defect.caught_by].value is Value.FALSE, bad[defect.caught_by]


def test_an_external_broker_without_restart_command_makes_broker_restart_unknown(tmp_path: Path) -> None:
    from bench.substrates.live.brokers import make_broker
    broker = make_broker("amqtt", tmp_path / "ext")
    broker.start()
    try:
        result = run_scenario(compressed("broker_restart", 4), REFERENCE, tmp_path / "run",
                              mode="live", options=Options(broker=broker.url))
    finally:
        broker.stop()
    assert all(v.value is not Value.TRUE for v in result.verdicts)
    assert any(v.value is Value.UNKNOWN and "never fired" in v.note for v in result.verdicts)
    assert '"fault_refused"' in (tmp_path / "run" / "history.jsonl").read_text()


@pytest.mark.parametrize("broker", BROKERS)
def test_withheld_pubacks_broker_difference_shows_in_the_counts(tmp_path: Path, broker: str) -> None:
    """Mosquitto resends unacknowledged QoS1 on the resumed persistent session, under the
    same packet ids and with DUP=1, as the history's delivery flags show; amqtt 0.12
    resumes the session (sessionPresent) but resends nothing."""
    result = run_scenario(compressed("broker_redelivery", 8), REFERENCE, tmp_path, mode="live",
                          options=Options(broker=broker))
    redelivered = result.metrics["duplicates_dropped_by_ledger"]
    qos1 = {v.name: v for v in result.verdicts}["qos1_delivery"]
    assert qos1.value is Value.TRUE, qos1.counterexamples[:2]
    marked = qos1.counts.get("redelivered_with_dup", 0)
    if broker == "mosquitto":
        assert redelivered > 0
        assert marked == qos1.counts["redelivered_on_a_resumed_session"] > 0, qos1.counts
    else:
        assert redelivered == 0
        assert marked == 0, qos1.counts


def test_the_redelivery_fault_resends_each_delivery_once_live(tmp_path: Path) -> None:
    """qos1_redelivery's capture client sees its own copies come back: with probability 1
    it re-sent each of them again, a storm until the run ended (found in simulation by
    explore, seed 4 run 746, where the broker model did the same). Now every copy it
    sends is of a message a node published, once."""
    scenario = tmp_path / "storm.toml"
    scenario.write_text('topology = "star"\nseed = 1\nduration_s = 5\n\n[workload]\n'
                        'rate_per_s = 4\n\n[[faults]]\nkind = "qos1_redelivery"\nat_s = 0.5\n'
                        'probability = 1.0\ndelay_ms = { dist = "uniform", low = 50, '
                        'high = 100 }\n')
    result = run_scenario(load_scenario(scenario), REFERENCE, tmp_path / "run", mode="live",
                          options=Options(broker="amqtt"))
    lines = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").open()]
    replays = [e for e in lines if e["kind"] == "fault_fired" and e.get("action") == "replayed"]
    published = [e for e in lines if e["kind"] == "outbound_settled"
                 and e["state"] == "PUBLISHED" and "/inbox" in (e.get("topic") or "")]
    assert replays, "the fault never fired"
    assert all(e["topic"].endswith("/inbox") for e in replays), replays[:3]
    assert len(replays) <= len(published), (len(replays), len(published))
    assert result.metrics["duplicates_dropped_by_ledger"] <= len(published)


@pytest.mark.parametrize("nodes", ["inproc", "process"])
def test_a_node_that_raises_is_a_crash_with_its_exception_like_in_simulation(
        tmp_path: Path, nodes: str) -> None:
    """The node under test raising is recorded alike on both substrates, it is restarted
    from its data, and the run goes on to its verdicts (robustness FALSE)."""
    def crashes(run: Path) -> list[tuple[Any, ...]]:
        return [(e["how"], e["error"].split("(")[0], e["faultIndex"])
                for e in map(json.loads, (run / "history.jsonl").open())
                if e["kind"] == "node_crashed"]
    defect = VARIANTS["duplicate_raises"]
    sim = run_scenario(compressed("qos1_redelivery", 8), defect, tmp_path / "sim", mode="sim")
    live = run_scenario(compressed("qos1_redelivery", 8), defect, tmp_path / "live", mode="live",
                        options=Options(hosting=Hosting(nodes)))
    for result, run in ((sim, tmp_path / "sim"), (live, tmp_path / "live")):
        assert {v.name: v.value for v in result.verdicts}["robustness"] is Value.FALSE
        assert crashes(run) and set(crashes(run)) == set(crashes(tmp_path / "sim"))
        assert (run / "verdicts.json").exists()


@pytest.mark.parametrize("broker", BROKERS)
def test_a_session_takeover_is_journaled_live_as_in_simulation(tmp_path: Path, broker: str) -> None:
    """The impostor connecting with exec-1's client id takes exec-1's session over: the
    history says so (the deployment checker counts takeovers), on every broker, and says
    which will the broker published: amqtt 0.12 the new connection's (the impostor is
    announced offline while it runs: a defect the deployment checker names), Mosquitto
    none (as `a2a-bench brokers` measures with its own clients)."""
    result = run_scenario(compressed("duplicate_client_id", 8), REFERENCE, tmp_path, mode="live",
                          options=Options(broker=broker))
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    takeovers = [e for e in events if e["kind"] == "session_takeover"]
    assert takeovers and {(t["oldLabel"], t["newLabel"]) for t in takeovers} >= {("exec-1", "exec-2")}
    wills = [e["will"] for e in events if e["kind"] == "takeover_will"]
    assert len(wills) == len(takeovers)
    rule = {v.name: v for v in result.verdicts}["deployment"].rules["takeover_publishes_no_live_will"]
    if broker == "amqtt":
        assert "new" in wills and rule["violations"] > 0, wills
    else:
        assert set(wills) == {"none"} and rule["violations"] == 0, wills


@pytest.mark.parametrize("broker", BROKERS)
def test_overlapping_filters_of_one_client_give_the_copies_each_broker_gives(
        tmp_path: Path, broker: str) -> None:
    """One client, its inbox and an overlapping filter: amqtt delivers one copy per filter
    (every message twice, the ledger drops the second), Mosquitto one per client (as the
    simulator models each, and as `a2a-bench brokers` measures)."""
    run_scenario(compressed("overlapping_filters", 6), REFERENCE, tmp_path, mode="live",
                 options=Options(broker=broker))
    dup = json.loads((tmp_path / "metrics.json").read_text())["duplicates_delivered"]
    assert (dup > 0) if broker == "amqtt" else (dup == 0), dup


@pytest.mark.parametrize("broker", BROKERS)
def test_a_one_way_partition_lets_the_other_way_through_live(tmp_path: Path,
                                                             broker: str) -> None:
    """partition_one_way's two cuts side by side, each kept past the give-up bound: exec-2,
    whose packets to the broker vanish, still takes requests in, and hears the broker close
    it where the broker gives it up (Mosquitto; amqtt 0.12 never does); orch-1, whose
    packets from the broker vanish, is still heard — the executors take its requests in
    during the cut — and closes itself at its own keepalive, which the broker hears: its
    will comes before the heal on every broker. What either had in flight comes again
    after the heal, and runs once."""
    from tests.live.conftest import PARTITION_MS
    scenario = compressed("partition_one_way", 22)
    scenario = replace(scenario, faults=tuple(replace(f, at_ms=2_000.0, duration_ms=PARTITION_MS)
                                              for f in scenario.faults))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker=broker))
    expect = result.summary["expect"]
    wrong = {v.name: (v.value.value, v.counterexamples[:2]) for v in result.verdicts
             if v.value.value not in ({"true", "false"} if expect.get(v.name) == "either"
                                      else {expect.get(v.name, "true")})}
    if broker == "amqtt" and wrong:
        wrong = unexplained_by_amqtt_resume(tmp_path, wrong)
    assert not wrong
    es = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    start = min(e["tMs"] for e in es if e["kind"] == "fault_start") + 500
    healed = min(e["tMs"] for e in es if e["kind"] == "fault_healed")
    during = [e for e in es if start < e["tMs"] < healed and e["kind"] == "inbound_admitted"]
    assert any(e["node"] == "exec-2" for e in during), "exec-2 heard nothing during its cut"
    assert any(e["node"] != "orch-1" and e.get("originNodeId") == "orch-1" for e in during), \
        "nothing orch-1 sent during its cut reached an executor"
    closed = [e["reason"] for e in es if e["kind"] == "mqtt_disconnected"
              and e["node"] == "orch-1" and start < e["tMs"] < healed]
    assert closed[:1] == ["Keep alive timeout"], closed
    wills = [w for w in result.metrics["wills_after_silence"] or [] if w["node"] == "orch-1"]
    assert wills and wills[0]["willAfterMs"] is not None, wills
    fired = {e["node"]: e for e in es if e["kind"] == "fault_fired"}
    assert fired["orch-1"]["packetsPassed"] > 0 and fired["exec-2"]["packetsPassed"] > 0
