"""An A2A-over-MQTT topology and scenario, as a user writes them: what they may say, the one
line that names the key when they say it wrong (exit 3), and a run on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks import Value
from bench.cli import main
from bench.run import EXIT_INVALID, run_scenario
from bench.spec.scenario import SCENARIOS, SpecError, load_scenario, load_topology
from bench.variants import REFERENCE

GOOD = """name = "t"
protocol = "a2a-mqtt"
[a2a]
org = "acme"
[[nodes]]
id = "client-1"
role = "requester"
namespace = "billing"
agents = ["billing.client1"]
[[nodes]]
id = "tax-1"
role = "responder"
namespace = "billing"
agents = ["billing.tax1"]
"""


def topology(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path


def test_an_a2a_topology_speaks_mqtt_5_with_requesters_and_responders(tmp_path: Path) -> None:
    t = load_topology(topology(tmp_path, GOOD + 'pool = "p1"\n'))
    assert t.settings == {"a2a": {"org": "acme"}} and t.mqtt.value == "5"
    assert [(n.role.value, n.pool) for n in t.nodes] == [("orchestrator", None),
                                                        ("executor", "p1")]


@pytest.mark.parametrize(("text", "says"), [
    (GOOD.replace('protocol = "a2a-mqtt"\n[a2a]\norg = "acme"\n', ""),
     "nodes[0].role='requester' is a role of A2A over MQTT: the topology needs protocol = "
     '"a2a-mqtt"'),
    (GOOD.replace('protocol = "a2a-mqtt"\n', ""), "a2a: [a2a] holds the settings of A2A over "
                                                  "MQTT; this topology speaks the seed protocol"),
    (GOOD.replace('[a2a]\norg = "acme"\n', ""), 'protocol = "a2a-mqtt" needs its [a2a] table'),
    (GOOD.replace('"a2a-mqtt"', '"a2a"'), "protocol='a2a': expected one of"),
    (GOOD.replace('org = "acme"', 'org = "a/b"'), "a2a.org='a/b' must match"),
    (GOOD.replace('["billing.tax1"]', '["billing.tax1", "billing.tax2"]'),
     "nodes[1].agents: an A2A-over-MQTT node is one agent"),
    (GOOD + '[broker]\nmqtt = "3.1.1"\n', "broker.mqtt='3.1.1': the A2A-over-MQTT profile "
                                            "speaks MQTT 5 only"),
    (GOOD.replace('role = "requester"', 'role = "requester"\npool = "p"'),
     "nodes[0].pool: only a responder"),
    # the seed's: its directory's scope and its scene groups (taken and unused, 2026-12-07)
    ('directory = "namespace"\n' + GOOD, "directory: a topology key of the seed protocol; "
                                         "this topology speaks A2A over MQTT"),
    (GOOD.replace('role = "requester"', 'role = "requester"\nscene_groups = ["g1"]'),
     "nodes[0].scene_groups: a node key of the seed protocol; this topology speaks A2A"),
])
def test_a_wrong_a2a_topology_names_file_and_key(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(SpecError, match="t.toml: " + says.replace("[", r"\[").replace("(", r"\(")):
        load_topology(topology(tmp_path, text))


def test_an_a2a_scenario_on_mqtt_3_is_refused_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(SCENARIOS / "a2a_quickstart.toml")]) == 0
    with pytest.raises(SpecError, match="the A2A-over-MQTT profile speaks MQTT 5 only"):
        load_scenario(SCENARIOS / "a2a_quickstart.toml", mqtt="3.1.1")
    assert main(["run", "a2a_quickstart", "--mode", "live", "--broker", "amqtt"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MQTT 5 on amqtt" in err[0] and "--mqtt 3.1.1" not in err[0]


def test_the_a2a_quickstart_is_judged_by_the_profiles_checkers(tmp_path: Path) -> None:
    result = run_scenario(load_scenario(SCENARIOS / "a2a_quickstart.toml"), REFERENCE,
                          tmp_path, mode="sim")
    verdicts = {v.name: v.value for v in result.verdicts}
    assert verdicts == {"duplicate_execution": Value.TRUE, "a2a_requests": Value.TRUE,
                        "a2a_replies": Value.TRUE, "a2a_pools": Value.UNKNOWN,
                        "a2a_broker": Value.TRUE, "a2a_session": Value.UNKNOWN,
                        "a2a_oauth": Value.UNKNOWN, "a2a_handover": Value.UNKNOWN,
                        "a2a_robustness": Value.TRUE}
    # no pool asked for, no wire in a simulation, no bearer tokens, no handover: a2a_pools,
    # a2a_session, a2a_oauth and a2a_handover are UNKNOWN (a2a_broker judges every request's
    # reply path)
    assert result.exit_code == 0
    assert result.metrics["requests"] > 0
    assert result.metrics["outcomes"] == {"COMPLETED": result.metrics["requests"]}


def test_mosquitto_serves_no_profile_pool_and_the_verdict_says_so(tmp_path: Path) -> None:
    """Mosquitto 2.0.11 never delivers a shared subscription on a topic that starts with $
    (measured by `a2a-bench brokers`, and seen with mosquitto_sub: docs/brokers.md); every
    profile pool is such a topic. Its simulated row reproduces it, and a2a_broker names it."""
    scenario = load_scenario(SCENARIOS / "a2a_pool.toml").with_broker_model("mosquitto")
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="sim")
    pools = next(v for v in result.verdicts if v.name == "a2a_broker")
    assert pools.value is Value.FALSE
    assert pools.rules["pooled_requests_reach_the_pool"]["violations"] > 0
    assert result.exit_code == 0          # as [expect.mosquitto] says
    # the members joined: it is the broker that served no pool, not a responder that joined none
    unknown = next(v for v in result.verdicts if v.name == "a2a_pools")
    assert unknown.note.endswith("no reply to a pooled request came back"), unknown.note


def test_a_pool_no_responder_joined_is_said_so() -> None:
    """A responder that serves only its own topic (pools are Extended) joins no pool: the
    pool verdict's UNKNOWN says that no one subscribed, not only that no reply came."""
    from bench.checks import checkers
    from bench.core import events as ev
    from tests.helpers import history
    sent = ev.A2mAttempt(op_id="r1", method="SendMessage", task_id="t1", attempt=1,
                         correlation="c1", topic="$a2a/v1/request/acme/billing/pool/tax",
                         why="first", node="client-1")
    v = checkers()["a2a_pools"](history(sent))
    assert v.value is Value.UNKNOWN
    assert "no responder subscribed to a pool" in v.note


def test_the_profiles_follow_ups_and_streams_are_drawn_and_the_seed_refuses_them(
        tmp_path: Path) -> None:
    """streaming_fraction, get_fraction and cancel_fraction: requests sent streaming, and a
    GetTask or CancelTask on the same task follow_up_ms later (its payload names the request
    whose Task.id it is about); on a seed topology the key is refused with its name."""
    from bench.workload import RequestOp, plan
    scenario = load_scenario(SCENARIOS / "a2a_streams.toml")
    ops = [op for op in plan(scenario.topology, scenario.workload, 1, scenario.duration_ms)
           if isinstance(op, RequestOp)]
    methods = [op.payload.get("method", "SendMessage") for op in ops
               if isinstance(op.payload, dict)]
    assert {"SendStreamingMessage", "GetTask", "CancelTask", "SendMessage"} <= set(methods)
    first = {op.request_id: op.at_ms for op in ops}
    for op in ops:
        if isinstance(op.payload, dict) and "ofRequest" in op.payload:
            assert op.at_ms == first[op.payload["ofRequest"]] + scenario.workload.follow_up_ms
    seed = tmp_path / "s.toml"
    seed.write_text('topology = "star"\n[workload]\nget_fraction = 0.2\n')
    with pytest.raises(SpecError, match=r"s.toml: workload.get_fraction=0.2: a workload of A2A "
                                        r"over MQTT; topology 'star' speaks the seed protocol"):
        load_scenario(seed)


@pytest.mark.parametrize(("topology_name", "kind", "says"), [
    ("star", "malformed_request", "speaks to nodes of A2A over MQTT only; topology 'star' "
                                  "speaks the seed protocol"),
    ("a2a-pair", "malformed_envelope", "speaks to nodes of the seed protocol only; topology "
                                       "'a2a-pair' speaks A2A over MQTT"),
    # what acts on the seed's directory, envelopes and keys: on a2a-pair directory_wipe
    # "fired" and changed nothing, missing_reply_node never fired (2026-12-07)
    ("a2a-pair", "directory_wipe", "speaks to nodes of the seed protocol only"),
    ("a2a-pair", "missing_reply_node", "speaks to nodes of the seed protocol only"),
    ("parley", "replay", "speaks to nodes of the seed protocol only; topology 'parley' "
                         "speaks Parley v1"),
])
def test_a_protocols_hostile_inputs_on_another_protocols_topology_are_refused(
        tmp_path: Path, topology_name: str, kind: str, says: str) -> None:
    """Each protocol's hostile inputs speak to its nodes only (its spec's fault_kinds): a
    scenario naming one on another protocol's topology is refused at load, in one line,
    not at run time by the script."""
    path = tmp_path / "s.toml"
    path.write_text(f'topology = "{topology_name}"\n[[faults]]\nkind = "{kind}"\nat_s = 1\n')
    with pytest.raises(SpecError, match=r"faults\[0\]\.kind='" + kind + "' " + says):
        load_scenario(path)
