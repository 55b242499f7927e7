"""The simulated MQTT client keeps time as paho does with the live nodes' settings (one
`ClientConfig` for both), and a partition plays out on each side's own clock: the
client's keepalive check, the broker's keepalive enforcement (its row), the heal that
resets every connection (as the live fault proxy does) and the reconnect backoff."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core import events as ev
from bench.history import History
from bench.run import run_scenario
from bench.spec.brokers import BEHAVIOURS, CLIENT, ClientConfig
from bench.spec.scenario import load_scenario
from bench.variants import REFERENCE


def test_paho_keepalive_check_timing() -> None:
    c = ClientConfig(keepalive_s=5)
    # a busy link (a packet each way just now): PINGREQ after 5 s, the close 5 s later
    assert c.notice_ms(1000.0, 1000.0, 1000.0) == 11_000.0
    # quiet for 4 s already: PINGREQ in 1 s, the close 5 s after it
    assert c.notice_ms(10_000.0, 6_000.0, 6_000.0) == 16_000.0
    # nothing for ages (an idle client pings every keepalive, so one is due now at the
    # latest): the close one keepalive later
    assert c.notice_ms(10_000.0, 0.0, 0.0) == 15_000.0
    assert [c.backoff_s(n) for n in (1, 2, 3, 9)] == [1.0, 2.0, 2.0, 2.0]


def _partition(tmp: Path, model: str, how: str = "blackhole") -> History:
    path = tmp / "p.toml"
    path.write_text("\n".join([
        'topology = "star"', "seed = 2", "duration_s = 40", "drain_s = 10",
        "[workload]", "rate_per_s = 2",
        "[[faults]]", 'kind = "partition"', 'nodes = ["exec-2"]', "at_s = 5",
        "duration_s = 25", f'how = "{how}"', ""]))
    scenario = load_scenario(path).with_broker_model(model)
    run_scenario(scenario, REFERENCE, tmp / model, mode="sim")
    return History.read(tmp / model / "history.jsonl")


@pytest.mark.parametrize("model", ["generic", "mosquitto", "amqtt"])
def test_a_partition_plays_out_on_each_sides_clock(tmp_path: Path, model: str) -> None:
    h = _partition(tmp_path, model)
    origin = h.of(ev.WorkloadStarted)[0].t_ms
    start, heal = origin + 5_000, origin + 30_000
    ka = CLIENT.keepalive_s * 1000
    lost = [e.t_ms for e in h.of(ev.MqttDisconnected) if e.node == "exec-2"]
    # the client's keepalive check: between one and two keepalives into the silence
    assert lost and start + ka <= lost[0] <= start + 2 * ka + 1, lost
    # the broker's: the peers learn the node is gone (its will) when the row says
    gone = min((u.t_ms for u in h.of(ev.DirectoryUpdated)
                if u.node_id == "exec-2" and not u.online and u.node != "exec-2"), default=None)
    window = BEHAVIOURS[model].keepalive_close_ms(CLIENT.keepalive_s)
    if window is None:   # amqtt never times it out: its will goes out at the heal's reset
        assert gone is not None and heal <= gone < heal + 100
    else:   # timed from the node's last packet: its last publish, or an idle one's PINGREQ
        low, high = window
        assert gone is not None and start + low - ka <= gone < start + high + 100
    # the heal resets the connection attempt hanging in the partition: back within the
    # backoff (1-2 s) and a round trip, not a keepalive later
    back = min(e.t_ms for e in h.of(ev.MqttConnected) if e.node == "exec-2" and e.t_ms > heal)
    assert back - heal <= CLIENT.backoff_max_s * 1000 + 50, back - heal


def test_an_unplugged_node_fails_its_connects_at_once_where_a_blackholed_one_waits(
        tmp_path: Path) -> None:
    """Blackhole: a CONNECT into the partition hangs until paho gives it up (a keepalive).
    Unplugged (no interface): it fails at once, and the client retries at its backoff."""
    def reasons(how: str) -> list[str]:
        (tmp_path / how).mkdir()
        h = _partition(tmp_path / how, "generic", how)
        return [e.reason for e in h.of(ev.MqttDisconnected) if e.node == "exec-2"]
    blackhole, unplugged = reasons("blackhole"), reasons("unplug")
    assert "network unreachable (unplugged)" not in blackhole
    assert any(r.startswith("CONNECT unanswered") for r in blackhole), blackhole
    fails = [r for r in unplugged if r == "network unreachable (unplugged)"]
    # 25 s cut, noticed within 10 s, then a try every 2 s: several refusals, none hanging
    assert len(fails) >= 4 and not any(r.startswith("CONNECT unanswered") for r in unplugged)


def test_a_one_way_partition_in_simulation_lets_the_other_way_through(tmp_path: Path) -> None:
    """partition_one_way (Mosquitto's row): exec-2, its packets lost, still takes requests
    in while the broker's keepalive runs out, and hears the broker close it; orch-1, the
    broker's packets lost, is heard throughout (the executors take its requests in), gives
    itself up at its own keepalive, and the broker hears that close: its will, before the
    heal. Both sent again what was unacknowledged: duplicates reach the nodes, none runs
    twice."""
    from bench.spec.scenario import SCENARIOS
    scenario = load_scenario(SCENARIOS / "partition_one_way.toml").with_broker_model("mosquitto")
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="sim")
    h = History.read(tmp_path / "history.jsonl")
    starts = {f.params["nodes"][0]: f.t_ms for f in h.of(ev.FaultStart)}
    heals = sorted(e.t_ms for e in h.of(ev.FaultHealed))
    reasons = {n: [e.reason for e in h.of(ev.MqttDisconnected) if e.node == n
                   and starts[n] < e.t_ms] for n in starts}
    assert reasons["exec-2"][:1] == ["keepalive expired at the broker"], reasons
    assert reasons["orch-1"][:1] == ["keepalive timeout (partition)"], reasons
    admitted = h.of(ev.InboundAdmitted)
    assert any(e.node == "exec-2" and starts["exec-2"] < e.t_ms < heals[0] for e in admitted)
    assert any(e.node != "orch-1" and starts["orch-1"] < e.t_ms < heals[1] for e in admitted)
    wills = {w["node"]: w for w in result.metrics["wills_after_silence"] or []}
    assert wills["orch-1"]["direction"] == "from_broker"
    assert wills["orch-1"]["willAfterMs"] is not None
    m = result.metrics
    assert m["duplicates_delivered"] > 0 and m["duplicates_executed"] == 0, m
    assert all(v.value.value != "false" for v in result.verdicts)


def test_a_client_that_still_hears_the_broker_never_gives_itself_up(tmp_path: Path) -> None:
    """exec-2's packets to the broker lost, on amqtt's row (which never gives a silent
    client up): requests keep reaching it, so paho's keepalive check never finds it quiet
    and it stays connected until the heal resets it — as live amqtt showed (2026-12-07,
    `a2a-bench run partition_one_way --mode live --broker amqtt`: its one disconnect at the
    heal, 21.0 s into the workload)."""
    from bench.spec.scenario import SCENARIOS
    scenario = load_scenario(SCENARIOS / "partition_one_way.toml").with_broker_model("amqtt")
    run_scenario(scenario, REFERENCE, tmp_path, mode="sim")
    h = History.read(tmp_path / "history.jsonl")
    cut = next(f for f in h.of(ev.FaultStart) if f.params["nodes"] == ["exec-2"])
    heal = min(e.t_ms for e in h.of(ev.FaultHealed))
    lost = [(e.t_ms, e.reason) for e in h.of(ev.MqttDisconnected)
            if e.node == "exec-2" and e.t_ms > cut.t_ms]
    assert lost[:1] == [(heal, "partition healed: connections reset")], lost
