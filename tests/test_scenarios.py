"""Every shipped scenario runs on the reference node with every verdict as expected,
and every fault in it actually fired."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks import judging
from bench.run import EXIT_OK, run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.tools.golden import differences, hashes_of, recorded
from bench.variants import REFERENCE

FILES = sorted(p for p in SCENARIOS.glob("*.toml") if not p.name.endswith(".matrix.toml"))
#: the scenarios of a protocol the bench has no node of its own for (Parley v1: its library's
#: classes behind examples/parley are the nodes): the simulator cannot run them; they are
#: judged live, in tests/live/test_parley.py
LIVE_ONLY = [p for p in FILES if load_scenario(p).command_nodes]
SIMULATED = [p for p in FILES if p not in LIVE_ONLY]


def test_only_parley_scenarios_are_live_only() -> None:
    assert LIVE_ONLY and all(p.stem.startswith("parley_") for p in LIVE_ONLY)


@pytest.mark.parametrize("path", SIMULATED, ids=lambda p: p.stem)
def test_scenario_passes_on_the_reference(tmp_path: Path, path: Path) -> None:
    scenario = load_scenario(path, known_checks=judging())
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="sim")
    wrong = {v.name: (v.value.value, v.counterexamples[:2], v.note)
             for v in result.verdicts if v.value.value != scenario.expect.get(v.name, "true")}
    assert result.exit_code == EXIT_OK, wrong
    assert result.metrics["requests"] > 0
    for name in ("history.jsonl", "verdicts.json", "metrics.json", "summary.json", "report.md",
                 "scenario.json", "topology.json"):
        assert (tmp_path / name).exists()
    # same seed, same bytes: a change that alters them says so in tests/data/golden-sim.json
    assert differences(path.stem, hashes_of(tmp_path), recorded()) == [], \
        "the simulation wrote other bytes; if that is meant, python -m bench.tools.golden --write"


def test_the_fault_scenarios_cover_the_catalogue() -> None:
    import tomllib

    from bench.faults import CATALOGUE
    kinds = {f["kind"] for p in FILES for f in tomllib.loads(p.read_text()).get("faults", [])}
    assert set(CATALOGUE) <= kinds


def test_streaming_has_several_agents_streaming_into_one_conversation_at_once(tmp_path: Path) -> None:
    """What relay_integrity's "nothing delivered to another conversation" and per-stream
    cursors are tested under: overlapping streams of different agents in one conversation."""
    import json
    run_scenario(load_scenario(SCENARIOS / "streaming.toml"), REFERENCE, tmp_path, mode="sim")
    spans: dict[tuple[str, str], list[float]] = {}
    for line in (tmp_path / "history.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["kind"] == "relay_delivered":
            s = spans.setdefault((e["conversationId"], e["stream"]), [e["tMs"], e["tMs"]])
            s[1] = e["tMs"]
    overlapping = {(c1, a.split("|")[1], b.split("|")[1])
                   for (c1, a), (x1, y1) in spans.items() for (c2, b), (x2, y2) in spans.items()
                   if c1 == c2 and a < b and x1 < y2 and x2 < y1}
    assert overlapping, "no two agents streamed into one conversation at the same time"


def test_a_puback_failure_reason_ends_failed_with_its_code_and_3_1_1_refuses_the_fault(
        tmp_path: Path) -> None:
    """puback_refused (MQTT 5): each refused publish ends FAILED carrying the PUBACK's code,
    0x80 (the boundary) included; on 3.1.1, whose PUBACK has no reason code, the scenario is
    refused when it loads, and a spec built otherwise has the fault refused in the journal
    and nothing else changed."""
    import json
    from dataclasses import replace

    from bench.spec.distribution import SpecError
    from bench.spec.topology import MqttVersion
    result = run_scenario(load_scenario(SCENARIOS / "puback_refused.toml"), REFERENCE,
                          tmp_path / "v5", mode="sim")
    assert result.exit_code == EXIT_OK
    lines = [json.loads(line) for line in (tmp_path / "v5" / "history.jsonl").open()]
    failed = {e["reasonCode"] for e in lines
              if e["kind"] == "outbound_settled" and e["state"] == "FAILED"}
    assert failed == {0x97, 0x80}
    assert result.metrics["outcomes"].get("SEND_FAILED", 0) > 0
    with pytest.raises(SpecError, match="kind='puback_refused' acts on what MQTT 5 alone has"):
        load_scenario(SCENARIOS / "puback_refused.toml", mqtt="3.1.1")
    built = replace(load_scenario(SCENARIOS / "puback_refused.toml"), mqtt=MqttVersion.V311)
    result = run_scenario(built, REFERENCE, tmp_path / "v3", mode="sim")
    lines = [json.loads(line) for line in (tmp_path / "v3" / "history.jsonl").open()]
    refused = [e for e in lines if e["kind"] == "fault_refused"]
    assert len(refused) == 2 and "MQTT 5 only" in refused[0]["reason"]
    assert not any(e["kind"] == "outbound_settled" and e["state"] == "FAILED" for e in lines)


def test_a_refused_publish_ends_failed_and_its_request_send_failed(tmp_path: Path) -> None:
    """Seed 002 §5's fourth outbound state is reachable: the publish_failure scenario's
    history holds FAILED sends, requests settled SEND_FAILED, and verdicts that hold."""
    import json
    result = run_scenario(load_scenario(SCENARIOS / "publish_failure.toml"), REFERENCE, tmp_path,
                          mode="sim")
    assert result.exit_code == EXIT_OK
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    failed = [e for e in lines if e["kind"] == "outbound_settled" and e["state"] == "FAILED"]
    assert {e["messageType"] for e in failed} >= {"TASK_REQUEST", "TASK_RESPONSE"}
    assert result.metrics["outcomes"].get("SEND_FAILED", 0) > 0


def test_a_gateway_that_adds_a_user_property_is_refused_for_any_other_property(
        tmp_path: Path) -> None:
    """property_tampering's `add` stamps a User Property on (a2a_binding_errors: each is
    counted, and the responder refuses those requests -32005); asked to add a Response
    Topic or Correlation Data it is refused in the journal, nothing else done."""
    import json
    from dataclasses import replace
    scenario = load_scenario(SCENARIOS / "a2a_binding_errors.toml")
    run_scenario(scenario, REFERENCE, tmp_path / "added", mode="sim")
    lines = [json.loads(line) for line in (tmp_path / "added" / "history.jsonl").open()]
    assert any(e["kind"] == "fault_fired" and "added or altered" in e.get("action", "")
               for e in lines), [e for e in lines if e["kind"].startswith("fault")]
    assert any(e["kind"] == "a2m_replied" and e.get("code") == -32005 for e in lines)
    [fault] = scenario.faults
    wrong = replace(scenario, faults=(replace(fault, params={**fault.params,
                                                             "property": "response_topic"}),))
    run_scenario(wrong, REFERENCE, tmp_path / "wrong", mode="sim")
    lines = [json.loads(line) for line in (tmp_path / "wrong" / "history.jsonl").open()]
    refused = [e for e in lines if e["kind"] == "fault_refused"]
    assert refused and "adds a User Property" in refused[0]["reason"]
