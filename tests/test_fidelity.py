"""The fidelity report: each simulated cell held against the live cell of the same
broker, and live inproc cells against process cells, with the issue's targets counted."""

from __future__ import annotations

from typing import Any

from bench.report.fidelity import pairs, summary, table


def record(mode: str, broker: str, nodes: str = "inproc", *, verdicts: dict[str, str] | None = None,
           outcomes: dict[str, int] | None = None, p99: float | None = 100.0,
           scenario: str = "restart", mqtt: str = "") -> dict[str, Any]:
    return {"cell": {"scenario": scenario, "variant": "reference", "topology": None, "seed": 1,
                     "mode": mode, "broker": broker, "nodes": nodes,
                     **({"mqtt": mqtt} if mqtt else {})},
            "verdicts": verdicts or {"silent_loss": "true", "relay_integrity": "unknown"},
            "metrics": {"outcomes": outcomes or {"COMPLETED": 10},
                        "latency_ms": {"p50": 10.0, "p90": 50.0, "p99": p99}}}


def test_pairs_count_agreement_outcomes_and_p99_against_the_targets() -> None:
    records = [
        record("sim", "mosquitto"), record("live", "mosquitto", p99=140.0),
        record("sim", "amqtt", outcomes={"COMPLETED": 9, "NO_RESPONSE": 1}),
        record("live", "amqtt", p99=400.0, verdicts={"silent_loss": "false",
                                                    "relay_integrity": "true"}),
        record("live", "mosquitto", "process", outcomes={"COMPLETED": 9, "UNDELIVERABLE": 1}),
        record("sim", "sim"),    # the topology's own model: nothing live to hold it against
    ]
    ps = {p.kind: p for p in pairs(records)}
    assert set(ps) == {"sim vs live, mosquitto", "sim vs live, amqtt",
                       "inproc vs process, mosquitto"}
    m, a, proc = ps["sim vs live, mosquitto"], ps["sim vs live, amqtt"], \
        ps["inproc vs process, mosquitto"]
    assert not m.verdicts_differ and not m.outcome_diff and m.p99_close   # x1.4
    assert a.verdicts_differ == ["silent_loss"] and a.unknown_differ == ["relay_integrity"]
    assert a.outcome_diff == {"COMPLETED": 1, "NO_RESPONSE": -1} and not a.p99_close  # x4
    assert proc.outcome_diff == {"COMPLETED": -1, "UNDELIVERABLE": 1}
    lines = summary(list(ps.values()))
    assert "sim vs live, amqtt: verdicts agree 0/1 (0 %); outcome counts identical 0/1 (0 %); " \
           "p99 within x1.5 0/1 (0 %)" in lines
    rows = table([a])
    assert "differ: silent_loss (unknown on one side: relay_integrity)" in rows[2]
    assert "COMPLETED +1, NO_RESPONSE -1" in rows[2] and "x4.00 **far**" in rows[2]


def test_a_difference_the_scenario_declares_out_of_the_models_reach_is_listed_not_counted() -> None:
    sim = record("sim", "amqtt") | {"unmodelled": {"silent_loss": "not in the model"}}
    live = record("live", "amqtt", verdicts={"silent_loss": "false", "relay_integrity": "unknown"})
    [p] = pairs([sim, live])
    assert p.verdicts_differ == [] and p.declared_differ == ["silent_loss"]
    assert "verdicts agree 1/1" in summary([p])[0]
    assert "(declared: silent_loss — not in the model)" in table([p])[2]


def test_a_verdict_the_scenario_takes_either_way_on_a_broker_is_declared_not_counted() -> None:
    sim = record("sim", "amqtt", verdicts={"qos1_delivery": "false"})
    live = record("live", "amqtt", verdicts={"qos1_delivery": "true"}) | {
        "expect": {"qos1_delivery": "either"}}
    [p] = pairs([sim, live])
    assert p.verdicts_differ == [] and p.declared_differ == ["qos1_delivery"]


def test_a_docker_cell_is_held_against_the_simulation_and_the_live_run_and_a_defect_is_a_row() -> None:
    """The three-substrate matrix (scenarios/docker.matrix.toml): docker against sim and
    against live, and a seeded defect's cells a row of their own, not folded into the
    reference's."""
    from bench.report.fidelity import wide_table
    defect = {"variant": "clean_session"}
    records = [record("sim", "mosquitto"), record("live", "mosquitto"),
               record("docker", "mosquitto", p99=90.0),
               *({**r, "cell": r["cell"] | defect} for r in (
                   record("sim", "mosquitto", verdicts={"qos1_delivery": "false"}),
                   record("docker", "mosquitto", verdicts={"qos1_delivery": "true"})))]
    kinds = sorted((p.scenario, p.kind) for p in pairs(records))
    assert kinds == [("restart", "live vs docker, mosquitto"),
                     ("restart", "sim vs docker, mosquitto"),
                     ("restart", "sim vs live, mosquitto"),
                     ("restart · clean_session", "sim vs docker, mosquitto")]
    defect_pair = next(p for p in pairs(records) if p.scenario == "restart · clean_session")
    assert defect_pair.verdicts_differ == ["qos1_delivery"]
    rows = wide_table(pairs(records))
    assert any(r.startswith("| restart · clean_session |") and "≠ qos1_delivery" in r
               for r in rows), rows


def test_mqtt_5_cells_are_held_against_each_other_a_column_of_their_own() -> None:
    records = [record("sim", "mosquitto"), record("live", "mosquitto"),
               record("sim", "mosquitto", mqtt="5"),
               record("live", "mosquitto", mqtt="5", outcomes={"COMPLETED": 9, "FAILED": 1})]
    ps = {p.kind: p for p in pairs(records)}
    assert set(ps) == {"sim vs live, mosquitto", "sim vs live, mosquitto, MQTT 5"}
    assert not ps["sim vs live, mosquitto"].outcome_diff
    assert ps["sim vs live, mosquitto, MQTT 5"].outcome_diff == {"COMPLETED": -1, "FAILED": 1}
