"""Every fault of the catalogue, on every substrate: it is journaled before it acts, it
fires (or the substrate refuses it, explicitly, with a reason), and its window closes.

One fault script per kind and one primitive per action mean a kind cannot exist on one
substrate and silently do nothing on another; this is the test that says so. Each run is
a small scenario with just that fault (the shipped scenarios test what the faults find).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.faults import CATALOGUE
from bench.run import run_scenario
from bench.spec.scenario import Mode, load_scenario
from bench.substrates import Hosting, Options
from bench.variants import REFERENCE

#: What each kind needs in the star topology (orch-1; exec-1..3 with llm.tax{i},
#: llm.invoice{i}); a kind with several methods appears once per method.
PARAMS: dict[str, dict[str, object]] = {
    "qos1_redelivery": {"node": "exec-1", "probability": 1.0,
                        "delay_ms": {"dist": "uniform", "low": 10, "high": 50}},
    "qos1_redelivery:withhold_puback": {"node": "exec-1", "method": "withhold_puback"},
    "qos1_redelivery:duplicate_publish": {"node": "exec-1", "method": "duplicate_publish",
                                          "probability": 1.0},
    "double_subscription": {"node": "exec-1"},
    "empty_directory": {"node": "exec-1", "down_ms": 200},
    "directory_wipe": {"node": "exec-1"},
    "ghost_announcement": {"node": "exec-1"},
    "stale_roster": {"node": "exec-1", "namespace": "ops", "agents": ["ops.a"], "down_ms": 200},
    "restart": {"node": "exec-1", "down_ms": 200},
    "broker_restart": {"down_ms": 300},
    "partition": {"nodes": ["exec-1"]},
    "partition:unplug": {"nodes": ["exec-1"], "how": "unplug"},
    "partition:to_broker": {"nodes": ["exec-1"], "direction": "to_broker"},
    "partition:from_broker": {"nodes": ["orch-1"], "direction": "from_broker"},  # it sends
    "pause": {"node": "exec-1"},
    "latency": {"nodes": ["exec-1"], "latency_ms": 20},
    "loss": {"nodes": ["exec-1"], "probability": 0.5},
    "duplicate_client_id": {"node": "exec-1", "impostor": "exec-2"},
    "forged_sender": {"how": "unsigned", "interval_ms": 300},
    "ledger_poisoning": {"ahead": 3, "interval_ms": 300},
    "replay": {"probability": 1.0, "delay_ms": {"dist": "uniform", "low": 100, "high": 300}},
    "hostile_input": {"interval_ms": 200},
    "tamper_payload": {"node": "exec-1"},
    "tamper_routing": {"node": "exec-1"},
    "tamper_headers": {"node": "exec-1"},
    "clock_skew": {"node": "exec-1", "skew_ms": 1000},
    "key_rotation": {"agent": "llm.tax1", "overlap_ms": 400},
    "missing_reply_node": {"node": "orch-1"},
    "publish_failure": {"node": "orch-1", "probability": 0.5},
    "puback_refused": {"node": "orch-1", "probability": 0.5},
    "property_tampering": {"node": "client-1", "probability": 1.0, "property": "user_property",
                           "action": "alter", "key": "a2a-context-id"},
    "malformed_request": {"interval_ms": 300},
    "malformed_envelope": {"interval_ms": 100},
}
#: Kinds that act on MQTT 5 only: their small scenario speaks it (live: on Mosquitto).
V5_ONLY = {"puback_refused", "property_tampering", "malformed_request"}
#: Kinds that act on what only the A2A-over-MQTT profile's agents send (PUBLISH
#: properties): their small scenario runs its requester and two responders instead.
ON_A2A = {"property_tampering", "malformed_request"}

#: What a substrate refuses, explicitly, and the words of its reason.
REFUSED = {("pause", Mode.LIVE, Hosting.INPROC): "pause needs --nodes process"}

SUBSTRATES = [pytest.param((Mode.SIM, Hosting.INPROC), id="sim"),
              pytest.param((Mode.LIVE, Hosting.INPROC), id="live-inproc"),
              pytest.param((Mode.LIVE, Hosting.PROCESS), id="live-process")]


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def scenario_file(tmp: Path, kind: str, params: dict[str, object]) -> Path:
    # the drain ends as soon as every fault's script is done and the run is quiet; its
    # bound only has to outlast a node process's restart on a loaded machine (seen > 6 s)
    lines = [f'topology = "{"a2a-pair" if kind in ON_A2A else "star"}"', "seed = 3",
             "duration_s = 2.5", "drain_s = 20",
             *(['mqtt = "5"'] if kind in V5_ONLY else []),
             # (the seed's envelope keys: A2A's nodes sign none, and its topology refuses them)
             *(["[auth]", 'keys = "per-agent"'] if kind not in ON_A2A else []),
             "[workload]", "rate_per_s = 8",
             # (the seed requester's deadline: A2A's keeps the profile's own timeouts)
             *(["request_timeout_ms = 2000"] if kind not in ON_A2A else []),
             "[[faults]]", f'kind = "{kind}"', "at_s = 0.4", "duration_s = 1.4"]
    lines += [f"{k} = {_toml(v)}" for k, v in params.items()]
    path = tmp / f"{kind}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_kind_of_the_catalogue_is_exercised_here() -> None:
    assert {k.split(":")[0] for k in PARAMS} == set(CATALOGUE)
    assert all(CATALOGUE[k].script is not None for k in CATALOGUE)


@pytest.mark.parametrize("substrate", SUBSTRATES)
@pytest.mark.parametrize("case", sorted(PARAMS))
def test_fault_acts_on_substrate(tmp_path: Path, case: str, substrate: tuple[Mode, Hosting]) -> None:
    mode, hosting = substrate
    kind = case.split(":")[0]
    scenario = load_scenario(scenario_file(tmp_path, kind, PARAMS[case]))
    run_scenario(scenario, REFERENCE, tmp_path / "run", mode=mode,
                 options=Options(hosting=hosting,
                                 broker="mosquitto" if kind in V5_ONLY else "amqtt"))
    events = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").open()]
    mine = [e for e in events if e.get("faultIndex") == 0 and e.get("fault") == kind]
    kinds = [e["kind"] for e in mine]
    assert kinds[:1] == ["fault_start"], kinds
    refused = [e for e in mine if e["kind"] in ("fault_refused", "fault_error")]
    if (kind, mode, hosting) in REFUSED:   # beyond this substrate: it says why, fires nothing
        assert refused and REFUSED[(kind, mode, hosting)] in refused[0]["reason"], refused
        assert "fault_fired" not in kinds, kinds
        return
    assert not refused, refused        # nothing here is beyond either substrate
    assert "fault_fired" in kinds, f"{case} never fired on {mode}: {kinds}"
    healed = kinds.index("fault_healed") if "fault_healed" in kinds else None
    assert healed is not None, kinds
    # only effects already under way may land after the heal (a replay due later)
    assert set(kinds[healed + 1:]) <= {"fault_fired"}, kinds[healed:]
    start = next(e for e in mine if e["kind"] == "fault_start")
    assert start["disrupts"] is CATALOGUE[kind].disrupts
    if PARAMS[case].get("direction", "both") != "both":
        # one way only: the other way still carried packets (a cut both ways passes none)
        cut = [e for e in mine if e["kind"] == "fault_fired" and e["action"] == "partitioned"]
        assert cut and cut[0]["packetsPassed"] > 0, cut
