"""Broken scenario and topology files are refused with file:key messages (exit 3)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bench.checks import judging
from bench.cli import EXIT_INVALID, main
from bench.spec.distribution import SpecError
from bench.spec.scenario import SCENARIOS, load_scenario, load_topology
from bench.workload import WorkloadSpec

GOOD_TOPOLOGY = """
name = "t"
[[nodes]]
id = "o"
role = "orchestrator"
namespace = "fin"
agents = ["fin.o"]
[[nodes]]
id = "e"
namespace = "llm"
agents = ["llm.tax"]
"""


def write(tmp: Path, scenario: str, topology: str = GOOD_TOPOLOGY) -> Path:
    (tmp / "t.toml").write_text(topology)
    path = tmp / "s.toml"
    path.write_text(f'topology = "{tmp / "t.toml"}"\n' + scenario)
    return path


@pytest.mark.parametrize("body, needle", [
    ("[[faults]]\nkind = \"loss\"\nnodes = [\"e\"]\nprobability = 1.5\n",
     "faults[0].probability=1.5 must be within [0, 1]"),
    ("[[faults]]\nkind = \"restart\"\n", "faults[0].node is required"),
    ("[[faults]]\nkind = \"restart\"\nnode = \"nope\"\n", "faults[0].node='nope' must be a node"),
    ("[[faults]]\nkind = \"explode\"\n", "faults[0].kind='explode' must be one of"),
    ("[[faults]]\nkind = \"restart\"\nnode = \"e\"\ndown = 3\n", "faults[0]: unknown key(s) ['down']"),
    ("[[faults]]\nkind = \"restart\"\nnode = \"e\"\nat_s = 99\n", "faults[0].at_s=99 must be < duration_s"),
    ("duration_s = -1\n", "duration_s=-1 must be > 0"),
    # a checker that never judges this protocol's runs: expected, it was never there to
    # differ, and the run passed (2026-12-07)
    ("[expect]\na2a_requests = \"false\"\n", "s.toml: expect.a2a_requests: a2a_requests "
                                               "judges runs of A2A over MQTT; topology 't' "
                                               "speaks the seed protocol"),
    ("[expect.mosquitto]\nparley_handler = \"false\"\n", "expect.mosquitto.parley_handler: "
                                                           "parley_handler judges runs of "
                                                           "Parley v1"),
    # MQTT 3.1.1 has no Session Expiry Interval: given, it was dropped without a word
    ("session_expiry_s = 60\n", "session_expiry_s=60: the Session Expiry Interval is MQTT "
                                "5's, and this run speaks 3.1.1 (mqtt = \"5\" asks for 5)"),
    ("[workload]\nrate_per_s = \"fast\"\n", "workload.rate_per_s='fast' must be a number"),
    ("[workload]\ntask_duration_ms = { dist = \"gamma\" }\n", "workload.task_duration_ms.dist='gamma'"),
    ("[workload]\ntask_duration_ms = { dist = \"uniform\", low = 5, high = 1 }\n", "low=5 must be <= high=1"),
    ("[auth]\nmode = \"paranoid\"\n", "auth.mode='paranoid' must be one of"),
    ("[auth]\nsignature_by_node = { nope = 2 }\n", "auth.signature_by_node={'nope': 2} must be a table"),
    # nothing is signed without keys: the version named no signature any envelope carried
    ("[auth]\nsignature = 2\n", "auth.signature: envelopes are signed only with keys, and "
                                  "auth.keys is \"none\""),
    ("[auth]\nsignature_by_node = { e = 2 }\n", "auth.signature_by_node: envelopes are signed "
                                                  "only with keys"),
    ("[workload]\nhumans = { psychic = 1.0 }\n", "workload.humans.psychic: unknown kind of human"),
    ("[workload]\ngate_on_timeout = \"shrug\"\n", "workload.gate_on_timeout='shrug' must be one of"),
    ("[[faults]]\nkind = \"forged_sender\"\nhow = \"psychic\"\n", "faults[0].how='psychic' must be one of"),
    ("[[faults]]\nkind = \"partition\"\nnodes = [\"e\"]\nhow = \"unplug\"\n"
     "direction = \"to_broker\"\n",
     "faults[0]: how = 'unplug' takes the cable out both ways: direction must be 'both'"),
    ("[[faults]]\nkind = \"partition\"\nnodes = [\"e\"]\ndirection = \"inward\"\n",
     "faults[0].direction='inward' must be one of ['both', 'to_broker', 'from_broker']"),
    ("colour = 1\n", "unknown key(s) ['colour']"),
    ("[expect]\nduplicate_execution = \"maybe\"\n", "expect.duplicate_execution='maybe' must be one of"),
    ("[expect]\nno_such_check = \"true\"\n", "expect: unknown key(s) ['no_such_check']"),
    ("[expect]\namqtt = \"false\"\n", "expect.amqtt must be a table"),
    ("[expect.mosquitto]\nno_such_check = \"true\"\n",
     "expect.mosquitto: unknown key(s) ['no_such_check']"),
    ("[expect.amqtt]\nsilent_loss = \"sometimes\"\n", "expect.amqtt.silent_loss='sometimes'"),
    ("mode = \"quantum\"\n", "mode='quantum' must be one of"),
    ("this is = not toml [", "not valid TOML"),
    ("[[faults]]\nkind = \"qos1_redelivery\"\nlive_method = \"replay\"\n",
     "faults[0].live_method is now called method"),
    ("[[faults]]\nkind = \"qos1_redelivery\"\nmethod = \"replay\"\n",
     "faults[0].method='replay' must be one of ['redeliver', 'withhold_puback', 'duplicate_publish']"),
    # a parameter the chosen method never reads (the shipped broker_redelivery and
    # duplicate_publish carried them, 2026-12-07), and a method without the node it needs
    ("[[faults]]\nkind = \"qos1_redelivery\"\nmethod = \"withhold_puback\"\nnode = \"e\"\n"
     "probability = 0.5\n", "faults[0].probability: read only with method = 'redeliver' or "
                            "'duplicate_publish'; method is 'withhold_puback' here"),
    ("[[faults]]\nkind = \"qos1_redelivery\"\nmethod = \"duplicate_publish\"\nnode = \"e\"\n"
     "delay_ms = 5\n", "faults[0].delay_ms: read only with method = 'redeliver'"),
    ("[[faults]]\nkind = \"qos1_redelivery\"\nmethod = \"withhold_puback\"\n",
     "faults[0]: method = 'withhold_puback' acts on one node's link: give the fault a node"),
    ("[[faults]]\nkind = \"property_tampering\"\nnode = \"e\"\nkey = \"x\"\n",
     "faults[0].key: read only with property = 'user_property'"),
    ("[[faults]]\nkind = \"property_tampering\"\nnode = \"e\"\naction = \"add\"\n",
     "faults[0]: action = \"add\" adds a User Property"),
    # MQTT 5's reason codes and properties on a 3.1.1 run: refused when it ran, exit 2
    ("[[faults]]\nkind = \"puback_refused\"\nnode = \"e\"\n",
     "faults[0].kind='puback_refused' acts on what MQTT 5 alone has, and this run speaks "
     "3.1.1 (mqtt = \"5\" asks for 5)"),
])
def test_bad_scenario_names_file_and_key(tmp_path: Path, body: str, needle: str) -> None:
    from bench.checks import judging
    path = write(tmp_path, body)
    with pytest.raises(SpecError) as exc:
        load_scenario(path, known_checks=judging())
    assert needle in str(exc.value)
    assert "s.toml" in str(exc.value)


@pytest.mark.parametrize("topology, needle", [
    (GOOD_TOPOLOGY.replace('agents = ["llm.tax"]', 'agents = ["fin.tax"]'), "must be 'llm.<capability>'"),
    (GOOD_TOPOLOGY.replace('id = "e"', 'id = "o"'), "id 'o' appears twice"),
    (GOOD_TOPOLOGY.replace('role = "orchestrator"', 'role = "boss"'), "nodes[0].role='boss'"),
    (GOOD_TOPOLOGY.replace('role = "orchestrator"\n', ''), "at least one node needs role"),
    ('name = "x"\n', "nodes must be a non-empty array"),
    (GOOD_TOPOLOGY + '[link]\nloss = 2\n', "link.loss=2 must be within"),
    (GOOD_TOPOLOGY + '[broker]\nmodel = "emqx"\n', "broker.model='emqx' must be one of"),
])
def test_bad_topology_names_file_and_key(tmp_path: Path, topology: str, needle: str) -> None:
    (tmp_path / "t.toml").write_text(topology)
    with pytest.raises(SpecError) as exc:
        load_topology(tmp_path / "t.toml")
    assert needle in str(exc.value) and "t.toml" in str(exc.value)


def test_cli_exits_3_with_the_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "[[faults]]\nkind = \"loss\"\nnodes = [\"e\"]\nprobability = 1.5\n")
    assert main(["run", str(path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "s.toml: faults[0].probability=1.5 must be within [0, 1]" in err


def test_unknown_scenario_and_variant_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no_such_scenario"]) == EXIT_INVALID
    assert "no scenario named 'no_such_scenario'" in capsys.readouterr().err
    assert main(["run", "quickstart", "--variant", "nope"]) == EXIT_INVALID
    assert "unknown variant 'nope'" in capsys.readouterr().err
    assert main(["run", "quickstrat"]) == EXIT_INVALID       # a typo: the names it is near
    assert "did you mean 'quickstart'" in capsys.readouterr().err


@pytest.mark.parametrize("topology", ["a2a-pair", "parley"])
def test_an_auth_table_is_refused_where_the_nodes_sign_nothing(
        tmp_path: Path, topology: str, capsys: pytest.CaptureFixture[str]) -> None:
    """[auth] sets the seed protocol's envelope signatures: on a topology of a protocol whose
    nodes sign nothing it would change nothing, and a user who wrote `mode = "strict"` there
    would believe it did (both ran as loose, silently, until 2026-12-07)."""
    path = tmp_path / "s.toml"
    path.write_text(f'topology = "{topology}"\nmode = "sim"\n[auth]\nmode = "strict"\n')
    assert main(["run", str(path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert f"s.toml: auth: topology {topology!r} speaks " in err
    assert "[auth] sets the signatures of the seed protocol" in err
    path.write_text(f'topology = "{topology}"\nmode = "sim"\n')
    assert load_scenario(path).topology.name == topology       # without it: as before


@pytest.mark.parametrize("key, value", [("process_fraction", "0.5"),
                                        ("group_event_rate_per_s", "2"),
                                        ("tabs_per_conversation", "2"),
                                        ("misaddressed_fraction", "0.3"),
                                        ("explicit_target_fraction", "0.3"),
                                        # set other than their defaults: A2A's requester
                                        # keeps the profile's timeouts, and neither
                                        # protocol's responder has a watchdog
                                        ("request_timeout_ms", "300"),
                                        ("task_timeout_ms", "100"),
                                        # what shapes processes, gates and tabs (a sweep
                                        # ran them on a2a-pair: the same 153 events)
                                        ("gate_fraction", "1"), ("humans", "{ never = 1 }"),
                                        ("tab_churn", "true")])
@pytest.mark.parametrize("topology", ["a2a-pair", "parley"])
def test_a_seed_workload_is_refused_on_another_protocols_topology(
        tmp_path: Path, topology: str, key: str, value: str) -> None:
    """Process instances, scene groups' events, the relay's tabs and a request's
    targetNodeId are things only the seed's nodes do: an A2A or Parley run given them sent
    nothing of the kind and said so nowhere (process_fraction = 0.5 on a2a-pair ran 9 plain
    requests; A2A's requester addresses agents, never a node; 2026-12-07)."""
    path = tmp_path / "s.toml"
    path.write_text(f'topology = "{topology}"\n[workload]\n{key} = {value}\n')
    with pytest.raises(SpecError, match=rf"s.toml: workload.{key}=.+: a workload of the "
                                        rf"seed protocol; topology '{topology}' speaks"):
        load_scenario(path)


@pytest.mark.parametrize("key", ["unknown_agent_fraction", "stream_events", "pool_fraction"])
def test_what_parley_has_no_part_of_is_refused_on_its_topology(tmp_path: Path, key: str) -> None:
    """A Parley command goes to its request topic whatever agent it names, its handler
    streams no flow and serves no pool: an unknown agent's request ran and completed."""
    path = tmp_path / "s.toml"
    path.write_text(f'topology = "parley"\n[workload]\n{key} = 1\n')
    with pytest.raises(SpecError, match=rf"workload.{key}=1.*: a workload of A2A over MQTT.*; "
                                        "topology 'parley' speaks Parley v1"):
        load_scenario(path)
    path.write_text(f'topology = "star"\n[workload]\n{key} = 1\n')
    if key == "pool_fraction":        # A2A's alone
        with pytest.raises(SpecError, match="a workload of A2A over MQTT; topology 'star'"):
            load_scenario(path)
    else:                              # the seed's too
        assert getattr(load_scenario(path).workload, key) == 1


@pytest.mark.parametrize("topology, key, value, needs, given", [
    ("star", "gate_fraction", "0.5", "process_fraction > 0", "process_fraction = 0.5"),
    ("star", "humans", "{ never = 1 }", "process_fraction > 0 and gate_fraction > 0",
     "process_fraction = 0.5\ngate_fraction = 1"),
    ("star", "watched_fraction", "0.5", "tabs_per_conversation > 0", "tabs_per_conversation = 1"),
    ("star", "tab_churn", "true", "tabs_per_conversation > 0", "tabs_per_conversation = 1"),
    ("star", "thinking_fraction", "0.9", "stream_events > 0", "stream_events = 3"),
    ("a2a-pair", "follow_up_ms", "200", "get_fraction or cancel_fraction > 0",
     "get_fraction = 0.3"),
])
def test_a_key_read_only_with_another_is_refused_without_it(
        tmp_path: Path, topology: str, key: str, value: str, needs: str, given: str) -> None:
    """A gate's share with no processes, tabs' habits with no tabs, thinking with no
    stream: nothing reads them (`NEEDS`). On star, seed 7, each of gate_fraction,
    watched_fraction, thinking_fraction and tab_churn alone gave the same 157 history lines
    as none (2026-12-08) — a user who set one believed it shaped the run."""
    path = tmp_path / "s.toml"
    path.write_text(f'topology = "{topology}"\n[workload]\n{key} = {value}\n')
    with pytest.raises(SpecError, match=rf"s.toml: workload.{key}=.+ changes nothing: it is "
                                        rf"read only with {re.escape(needs)}, which this "
                                        "workload does not have"):
        load_scenario(path)
    path.write_text(f'topology = "{topology}"\n[workload]\n{key} = {value}\n{given}\n')
    assert load_scenario(path).workload != WorkloadSpec()


def test_group_events_where_no_orchestrator_has_a_scene_group_are_refused(tmp_path: Path) -> None:
    """An orchestrator sends its events to its own scene groups: with none anywhere, none
    is sent. The default matrix ran the quickstart (1 event/s) on host-local, which had no
    scene group, and compared its messages with star's as if it had (until 2026-12-08)."""
    (tmp_path / "t.toml").write_text(
        'name = "t"\n[[nodes]]\nid = "o"\nrole = "orchestrator"\nnamespace = "a"\n'
        'agents = ["a.o"]\n[[nodes]]\nid = "e"\nrole = "executor"\nnamespace = "b"\n'
        'agents = ["b.x"]\nscene_groups = ["g1"]\n')
    path = tmp_path / "s.toml"
    path.write_text('topology = "t.toml"\n[workload]\ngroup_event_rate_per_s = 1\n')
    with pytest.raises(SpecError, match=r"s.toml: workload.group_event_rate_per_s=1 changes "
                                        "nothing: no orchestrator of topology 't' has "
                                        "scene_groups to send events to"):
        load_scenario(path)
    assert load_scenario(SCENARIOS / "quickstart.toml", topology="host-local").topology.name \
        == "host-local"


def test_a_pool_share_where_no_node_serves_a_pool_is_refused(tmp_path: Path) -> None:
    """A pooled request goes to the pool its agent's node serves: on a2a-pair, whose nodes
    serve none, pool_fraction = 0.5 ran plain requests, and a2a_pools said UNKNOWN."""
    path = tmp_path / "s.toml"
    path.write_text('topology = "a2a-pair"\n[workload]\npool_fraction = 0.5\n')
    with pytest.raises(SpecError, match=r"s.toml: workload.pool_fraction=0.5 changes nothing: "
                                        "no node of topology 'a2a-pair' serves a pool"):
        load_scenario(path)
    assert load_scenario(SCENARIOS / "a2a_pool.toml").workload.pool_fraction > 0


@pytest.mark.parametrize("table", ["expect.amqtt", "unmodelled.amqtt"])
def test_an_expectation_of_amqtt_on_an_mqtt_5_protocol_is_refused(tmp_path: Path, table: str) -> None:
    """amqtt speaks MQTT 3.1.1 only and A2A over MQTT 5 alone: no run of an A2A scenario is
    on amqtt, so what it expects there is never read (it validated, exit 0)."""
    path = tmp_path / "s.toml"
    path.write_text(f'topology = "a2a-pair"\n[{table}]\na2a_replies = "false"\n')
    with pytest.raises(SpecError, match=rf"s.toml: {table}: amqtt speaks MQTT 3.1.1 only, and "
                                        "topology 'a2a-pair' speaks A2A over MQTT, MQTT 5 "
                                        "alone: no run of it is on amqtt"):
        load_scenario(path, known_checks=judging())
    path.write_text(f'topology = "star"\nmqtt = "5"\n[{table}]\nqos1_delivery = "false"\n')
    # --mqtt 3.1.1 runs it on amqtt
    assert load_scenario(path, known_checks=judging()).mqtt.value == "5"


@pytest.mark.parametrize("fault, keys, need", [
    ('kind = "forged_sender"\nhow = "flat_token"', "none", "'flat' or 'per-agent'"),
    ('kind = "forged_sender"\nhow = "other_agent_key"', "flat", "'per-agent'"),
    ('kind = "tamper_payload"\nnode = "exec-1"', "none", "'flat' or 'per-agent'"),
    ('kind = "key_rotation"\nagent = "llm.tax1"', "flat", "'per-agent'"),
])
def test_a_fault_that_needs_keys_the_scenario_lacks_is_refused(
        tmp_path: Path, fault: str, keys: str, need: str) -> None:
    """A forgery signed with a key nobody has, a man in the middle with no signature to
    defeat, a key rotation with no agent keys: each validated, ran, never fired, and the run
    ended exit 2 (forged_sender flat_token on star, keys "none": 2026-12-08)."""
    path = tmp_path / "s.toml"
    auth = "" if keys == "none" else f'[auth]\nkeys = "{keys}"\n'
    path.write_text(f'topology = "star"\n{auth}[[faults]]\n{fault}\nat_s = 1\n')
    with pytest.raises(SpecError, match=rf"s.toml: faults\[0\].kind=.+: it acts only with "
                                        rf"auth.keys = {need}, and this scenario's is '{keys}'"):
        load_scenario(path)
    path.write_text(f'topology = "star"\n[auth]\nkeys = "per-agent"\n[[faults]]\n{fault}\n'
                    'at_s = 1\n')
    assert load_scenario(path).faults[0].at_ms == 1000


def test_a_key_rotation_of_an_agent_the_topology_lacks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('topology = "star"\n[auth]\nkeys = "per-agent"\n[[faults]]\n'
                    'kind = "key_rotation"\nagent = "llm.nobody"\nat_s = 1\n')
    with pytest.raises(SpecError, match=r"faults\[0\].agent='llm.nobody' must be an agent of "
                                        r"topology 'star': \['fin.orchestrator', "):
        load_scenario(path)


@pytest.mark.parametrize("topology, node", [("a2a-pair", "tax-1"), ("parley", "handler-1")])
def test_a_crash_timed_by_the_seeds_ledger_flush_is_refused_on_another_protocol(
        tmp_path: Path, topology: str, node: str) -> None:
    """in_flush_window crashes a node just before its inbound ledger's next flush, which
    only the seed's nodes keep: on a2a-pair the crash only moved to a tick nobody flushes
    on (2026-12-08)."""
    path = tmp_path / "s.toml"
    fault = f'[[faults]]\nkind = "restart"\nnode = "{node}"\nat_s = 1\n'
    path.write_text(f'topology = "{topology}"\n{fault}in_flush_window = true\n')
    with pytest.raises(SpecError, match=r"s.toml: faults\[0\].in_flush_window=True acts on "
                                        rf"what nodes of the seed protocol do only; topology "
                                        rf"'{topology}' speaks"):
        load_scenario(path)
    path.write_text(f'topology = "{topology}"\n{fault}in_flush_window = false\n')
    assert load_scenario(path).faults[0].params["in_flush_window"] is False


def test_a_session_expiry_on_mqtt_3_1_1_is_refused_from_the_flag_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    """session_expired asks for a 2 s Session Expiry Interval on MQTT 5; --mqtt 3.1.1 would
    run it with none (a 3.1.1 session is kept for ever) and judge an outage it never had."""
    assert main(["run", "session_expired", "--mqtt", "3.1.1", "--mode", "sim"]) == EXIT_INVALID
    assert "session_expired.toml: session_expiry_s=2: the Session Expiry Interval is MQTT " \
        "5's, and this run speaks 3.1.1 (--mqtt 5 asks for 5)" in capsys.readouterr().err


def test_a_scenario_whose_topology_is_unknown_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('topology = "nosuch"\ncolour = 1\n')
    with pytest.raises(SpecError) as exc:
        load_scenario(path)
    assert "s.toml: unknown key(s) ['colour']" in str(exc.value)     # one colon, not ": :"
    path.write_text('topology = "nosuch"\n')
    with pytest.raises(SpecError, match="s.toml: topology='nosuch': no topology named"):
        load_scenario(path)


def test_a_scenario_may_expect_other_verdicts_live_on_one_broker() -> None:
    from bench.spec.scenario import SCENARIOS
    partition = load_scenario(SCENARIOS / "partition.toml")
    assert partition.expect_for("amqtt").get("qos1_delivery") == "false"
    assert "qos1_delivery" not in partition.expect_for("mosquitto")
    assert "qos1_delivery" not in partition.expect_for(None)   # simulation


def test_a_simulation_only_scenario_says_so_live_and_runs_in_simulation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """replay_expired's replays come 25 hours after the capture: live it cannot run, and
    says so instead of ending UNKNOWN ("never fired"); by default it runs in simulation."""
    assert main(["run", "replay_expired", "--mode", "live"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "simulation only (its replays come 25 hours" in err[0], err
    from bench.spec.scenario import SCENARIOS
    assert load_scenario(SCENARIOS / "replay_expired.toml").mode.value == "sim"
    from bench.matrix import load_matrix
    path = tmp_path / "x.matrix.toml"
    path.write_text('[[group]]\nscenarios = ["replay_stale"]\nmodes = ["live"]\n')
    with pytest.raises(SpecError, match="'replay_stale' is simulation only"):
        load_matrix(path)
    path.write_text('[[group]]\nmodes = ["sim", "live"]\n')     # "@all": left out of live
    ids = {c.id for c in load_matrix(path).cells}
    assert "replay_stale.reference.own.s1.sim" in ids
    assert not any(i.startswith("replay_stale") and ".live." in i for i in ids)


def test_either_takes_a_judged_verdict_of_both_values_and_not_an_unknown() -> None:
    from bench.checks import Value, Verdict, as_expected
    from bench.run import EXIT_OK, EXIT_UNKNOWN, exit_code
    assert as_expected("true", "either") and as_expected("false", "either")
    assert not as_expected("unknown", "either") and not as_expected("false", "true")
    for value, code in ((Value.TRUE, EXIT_OK), (Value.FALSE, EXIT_OK),
                        (Value.UNKNOWN, EXIT_UNKNOWN)):
        v = Verdict("qos1_delivery", value)
        assert exit_code([v], {"qos1_delivery": "either"}) == code, value
    s = load_scenario(SCENARIOS / "streaming_home_restart.toml")
    assert s.expect_for("amqtt")["qos1_delivery"] == "either"


def test_the_mqtt_version_comes_from_the_flag_the_scenario_or_the_topology(tmp_path: Path) -> None:
    from bench.spec.distribution import SpecError
    from bench.spec.scenario import SCENARIOS, load_scenario
    from bench.spec.topology import BrokerModel, MqttVersion
    quickstart = SCENARIOS / "quickstart.toml"
    assert load_scenario(quickstart).mqtt is MqttVersion.V311
    assert load_scenario(quickstart, mqtt="5").mqtt is MqttVersion.V5
    five = tmp_path / "five.toml"
    five.write_text('mqtt = 5\n' + quickstart.read_text())
    assert load_scenario(five).mqtt is MqttVersion.V5
    assert load_scenario(five, mqtt="3.1.1").mqtt is MqttVersion.V311
    bad = tmp_path / "bad.toml"
    bad.write_text('mqtt = "3"\n' + quickstart.read_text())
    with pytest.raises(SpecError, match=r'mqtt=.3.: expected "3.1.1" or "5"'):
        load_scenario(bad)
    # amqtt speaks 3.1.1 only: a generic topology on 5 runs live on Mosquitto
    assert BrokerModel.GENERIC.live_default_for(MqttVersion.V5) == "mosquitto"
    assert BrokerModel.GENERIC.live_default_for(MqttVersion.V311) == "amqtt"


@pytest.mark.parametrize("change, needle", [
    # a pool member subscribing the pool's topic itself beside another member: each would
    # get every request
    (lambda t: t.replace('pool = "p1"\n', 'pool = "p1"\npool_shared = false\n', 1),
     "nodes[1].pool_shared=false: 'tax-1' subscribes pool 'p1' itself"),
    (lambda t: t.replace('agents = ["billing.client1"]\n',
                         'agents = ["billing.client1"]\ncapacity = 2\n'),
     "nodes[0].capacity: only a responder"),
    (lambda t: t.replace('pool = "p1"\n', 'pool = "p1"\ncapacity = 0\n', 1),
     "nodes[1].capacity=0 must be"),
])
def test_a_pool_member_alone_and_a_capacity_name_file_and_key(
        tmp_path: Path, change: Any, needle: str) -> None:
    from bench.spec.scenario import TOPOLOGIES
    (tmp_path / "t.toml").write_text(change((TOPOLOGIES / "a2a-pool.toml").read_text()))
    with pytest.raises(SpecError) as exc:
        load_topology(tmp_path / "t.toml")
    assert needle in str(exc.value) and "t.toml" in str(exc.value), str(exc.value)
