"""Parley v1 as a topology and a scenario read it: its [parley] table, its roles, what other
protocols' keys and faults it refuses, and the flags that start its library — each bad input
one line and exit 3, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from bench.cli.common import EXIT_INVALID
from bench.spec.distribution import SpecError
from bench.spec.scenario import SCENARIOS, load_scenario, load_topology

TOPOLOGY = (SCENARIOS.parent / "topologies" / "parley.toml").read_text()


def topology(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path


def test_the_shipped_topology_gives_the_four_topics_and_the_librarys_defaults() -> None:
    t = load_topology(SCENARIOS.parent / "topologies" / "parley.toml")
    assert t.protocol == "parley" and t.settings is not None
    own = t.settings["parley"]
    assert own["topics"] == {"req": "bench/backup/req", "hb": "bench/backup/hb",
                                    "prg": "bench/backup/prg", "res": "bench/backup/res"}
    assert own["qos"] == 1 and own["heartbeat_interval"] == 3.0
    assert [n.role.value for n in t.nodes] == ["orchestrator", "executor"]


@pytest.mark.parametrize(("change", "said"), [
    (('topics = "bench/backup"', 'topics = "bench/+"'), "no MQTT wildcard"),
    (('topics = "bench/backup"', 'topics = "bench/backup"\nqos = 2'), "QoS 0 or 1"),
    (('topics = "bench/backup"', 'topics = "bench/backup"\nheartbeat_interval = 0'),
     "heartbeat_interval"),
    (('topics = "bench/backup"', 'topics = "bench/backup"\nheartbeat = 3'), "heartbeat"),
    (('topics = "bench/backup"', 'topics = "bench/backup"\nstale_timeout = inf'),
     "finite"),
    (('role = "handler"', 'role = "responder"'), "A2A over MQTT"),
    (('agents = ["ops.backup"]', 'agents = ["ops.a", "ops.b"]'), "one command type"),
    (('[parley]\ntopics = "bench/backup"', '[a2a]\norg = "acme"'), "Parley v1"),
])
def test_a_bad_parley_topology_is_one_line_naming_file_and_key(
        tmp_path: Path, change: tuple[str, str], said: str) -> None:
    assert change[0] in TOPOLOGY
    with pytest.raises(SpecError, match=said) as caught:
        load_topology(topology(tmp_path, TOPOLOGY.replace(*change)))
    assert "\n" not in str(caught.value) and "t.toml" in str(caught.value)


def test_another_protocols_hostile_input_is_refused_on_a_parley_topology(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'name = "s"\ntopology = "{SCENARIOS.parent}/topologies/parley.toml"\n'
                        'duration_s = 5\n[[faults]]\nkind = "malformed_request"\nat_s = 1\n')
    with pytest.raises(SpecError, match="A2A over MQTT only"):
        load_scenario(scenario)


def test_a_parley_scenario_is_refused_by_the_simulator_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "parley_quickstart", "--mode", "sim"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--mode live only" in err


@pytest.mark.parametrize("given", ["handler", "=img:1", "nobody=img:1", "handler= "])
def test_a_bad_node_image_is_one_line(capsys: pytest.CaptureFixture[str], given: str) -> None:
    assert main(["run", "parley_quickstart", "--mode", "docker", "--node-image", given]) \
        == EXIT_INVALID
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--node-image" in err, err


def test_conform_names_the_roles_a_protocols_cmd_may_play(
        capsys: pytest.CaptureFixture[str]) -> None:
    import sys
    assert main(["conform", "--protocol", "parley", "--role", "requester", sys.executable]) \
        == EXIT_INVALID
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "handler" in err and "commander" in err
    assert main(["conform", "--protocol", "parley", "--core", sys.executable]) == EXIT_INVALID
    assert "--protocol a2a-mqtt" in capsys.readouterr().err


def test_the_parley_kits_report_validates_against_the_compatibility_schema(
        tmp_path: Path) -> None:
    """conform --protocol parley, either role: compatibility.json names its document and
    role, and validates (docs/schemas/compatibility.schema.json)."""
    import json

    import jsonschema

    from bench.certify import Meta, compatibility
    from bench.conform import PROFILES, Row
    schema = json.loads((SCENARIOS.parent / "docs" / "schemas"
                         / "compatibility.schema.json").read_text())
    for key in ("parley", "parley/commander"):
        profile = PROFILES[key]
        rows = [Row(r, "PASS", "judged", r.where[0]) for r in profile.rules]
        meta = Meta(("python", "x.py"), "parley", profile.role, "mosquitto", tmp_path,
                    {name: 1 for name, _s, _w in profile.suite})
        c = compatibility(rows, meta)
        jsonschema.validate(c, schema)
        assert c["spec"] == {"document": "docs/protocols/parley.md"}
        assert {tuple(x["ids"]) for x in c["clauses"]} >= {("adapter",), ("§3", "§4")}
