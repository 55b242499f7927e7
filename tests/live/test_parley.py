"""Parley v1 (`parley-mqtt` 1.0.1, pinned in pyproject.toml) under test, live: the library's
own `ParleyCommander` and `ParleyCommandHandler` behind examples/parley, judged from the wire.

- The shipped scenarios keep every verdict TRUE on the library as released: each promise of
  docs/findings/parley-mqtt.md listed as kept was tried by these faults.
- A plausible bug written into the library (tests/data/parley/seeded.py patches it in the
  node's own process; the library installed is untouched) turns the rule that judges it
  FALSE: the rules catch the library's own misbehaviour, not only mutated histories
  (tests/checks/test_parley_rules.py).
- What the bench sees, a raw MQTT client sees too: the heartbeats and results on the wire
  counted by a plain paho subscriber beside a run, against the tap's count.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.checks import Value
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import Options
from bench.variants import REFERENCE

pytest.importorskip("parley", reason="parley-mqtt is a test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {role: (sys.executable, str(ROOT / "examples" / "parley" / f"{role}.py"))
            for role in ("commander", "handler")}
SEEDED = ROOT / "tests" / "data" / "parley" / "seeded.py"


def _run(tmp_path: Path, name: str, squeezed_s: float | None = None,
         **commands: tuple[str, ...]) -> dict[str, Any]:
    """The scenario live on the embedded broker, its nodes this interpreter's adapters
    (`commands` replaces a role's)."""
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    for role, command in {**COMMANDS, **commands}.items():
        scenario = scenario.with_node_command(role, command)
    if squeezed_s is not None:
        scenario = scenario.squeezed(squeezed_s)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live", options=Options())
    return {v.name: v for v in result.verdicts}


#: the kill is tried in docker (tests/docker/test_docker.py), every scenario by `a2a-bench
#: conform --protocol parley` (docs/findings/parley-mqtt.md); parley_redelivery and
#: parley_duplicate_client_id run the faults' branches for nodes of another protocol (a
#: protocol's inbox topics replayed, the nemesis as the impostor): broken, they never fire
#: and the verdicts are UNKNOWN
@pytest.mark.parametrize("name", ["parley_quickstart", "parley_cancel",
                                  "parley_duplicate_publish", "parley_partition",
                                  "parley_redelivery", "parley_duplicate_client_id"])
def test_the_library_keeps_its_promises(tmp_path: Path, name: str) -> None:
    verdicts = _run(tmp_path, name)
    assert {n: v.value for n, v in verdicts.items()} == {
        "parley_commander": Value.TRUE, "parley_handler": Value.TRUE,
        "parley_envelope": Value.TRUE}, \
        [(v.name, v.counterexamples[:1], v.note) for v in verdicts.values()]
    for checker, count in TRIES.get(name, ()):
        assert verdicts[checker].counts.get(count, 0) > 0, (name, count, verdicts[checker].counts)


#: what a scenario is there to try, counted where the library was put in that situation (a
#: TRUE where it never was says nothing: conform asks the same counts of its clauses)
TRIES = {
    "parley_duplicate_publish": [("parley_handler", "requests_again_while_running")],
    "parley_partition": [("parley_commander", "requests_resent")],
}


#: bug -> (the role it is written into, the scenario that shows it, squeezed to (None: not),
#: the checker and rule it must turn FALSE)
BUGS = {
    # every request doubled, back to back, at its length (a squeeze moves its window)
    "forgets-running-commands": ("handler", "parley_duplicate_publish", None,
                                 "parley_handler", "executed_at_most_once"),
    "never-acknowledges": ("commander", "parley_quickstart", 8,
                           "parley_commander", "results_acknowledged"),
    "retries-after-life": ("commander", "parley_quickstart", 8,
                           "parley_commander", "no_request_after_a_sign_of_life"),
    "heartbeats-once": ("handler", "parley_cancel", 10,
                        "parley_handler", "heartbeats_until_the_result"),
    "heartbeats-past-the-result": ("handler", "parley_quickstart", 8,
                                   "parley_handler", "heartbeats_until_the_result"),
    "deaf-to-cancels": ("handler", "parley_cancel", 10,
                        "parley_handler", "cancels_reach_the_running_handler"),
    "resends-acknowledged-results": ("handler", "parley_quickstart", 8,
                                     "parley_handler", "acknowledged_results_not_resent"),
    # commands at 1/s of 1 to 3 s each on a cap of 2: a third often waits for a slot
    "one-slot-too-many": ("handler", "parley_broker_restart", 8,
                          "parley_handler", "executions_within_the_cap"),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_bug_written_into_the_library_turns_its_rule_false(tmp_path: Path, bug: str) -> None:
    role, scenario, seconds, checker, rule = BUGS[bug]
    verdicts = _run(tmp_path, scenario, seconds,
                    **{role: (sys.executable, str(SEEDED), bug, role)})
    v = verdicts[checker]
    assert v.value is Value.FALSE and v.rules[rule]["violations"] > 0, \
        (v.rules, v.counterexamples[:2], v.note)


def test_a_clock_skew_the_library_cannot_take_is_said_and_vouches_for_nothing(
        tmp_path: Path) -> None:
    """clock_skew is an op to the node (PROTOCOL.md §2.3, P-OP-6) that Parley's library
    has no hook for: the adapter says so (harness_error), and no verdict is TRUE of a run
    whose fault never acted — until 2026-12-08 the adapter ignored the op, the fault
    counted as fired, and every verdict was TRUE."""
    from dataclasses import replace

    from bench.faults import FaultSpec
    scenario = load_scenario(SCENARIOS / "parley_quickstart.toml")
    for role, command in COMMANDS.items():
        scenario = scenario.with_node_command(role, command)
    skew = FaultSpec(0, "clock_skew", 1000.0, None, {"node": "handler-1", "skew_ms": 60_000.0})
    scenario = replace(scenario.squeezed(5), faults=(skew,))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live", options=Options())
    assert {v.value for v in result.verdicts} == {Value.UNKNOWN}, result.verdicts
    assert all("not carried out (harness_error): handler-1 op 'clock_skew'" in v.note
               for v in result.verdicts)


def test_a_raw_subscriber_sees_what_the_tap_recorded(tmp_path: Path) -> None:
    """The second observation: a paho client of its own, subscribed to the command type's
    heartbeat and result topics on the run's broker, counts per command id what the
    handler published; the tap's record agrees (the broker delivered each publish once)."""
    import paho.mqtt.client as mqtt

    from bench.substrates.live.brokers import make_broker
    seen: dict[tuple[str, str], int] = {}
    lock = threading.Lock()

    def on_message(_c: Any, _u: Any, msg: Any) -> None:
        body = json.loads(msg.payload)
        with lock:
            seen[(body["t"], body["id"])] = seen.get((body["t"], body["id"]), 0) + 1

    broker = make_broker("mosquitto" if _mosquitto() else "amqtt", tmp_path / "broker")
    broker.start()
    raw = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="raw-observer",
                      protocol=mqtt.MQTTv311)
    try:
        raw.username_pw_set("raw-observer")
        raw.on_message = on_message
        subscribed = threading.Event()
        raw.on_subscribe = lambda *_a: subscribed.set()
        raw.connect(broker.host, broker.port)
        raw.loop_start()
        raw.subscribe([("bench/backup/hb", 1), ("bench/backup/res", 1)])
        assert subscribed.wait(10), "the raw observer's SUBACK never came"
        scenario = load_scenario(SCENARIOS / "parley_quickstart.toml")
        for role, command in COMMANDS.items():
            scenario = scenario.with_node_command(role, command)
        # the same broker, by its URL; the topics as the topology names them (no run prefix)
        run_scenario(scenario, REFERENCE, tmp_path / "run", mode="live",
                     options=Options(broker=broker.url, isolate=False))
    finally:
        raw.loop_stop()
        raw.disconnect()
        broker.stop()
    tapped: dict[tuple[str, str], int] = {}
    for line in (tmp_path / "run" / "history.jsonl").open():
        e = json.loads(line)
        body = e.get("body") or {}
        if e["kind"] == "wire" and e["node"] == "handler-1" and e["direction"] == "out" \
                and body.get("t") in ("hb", "res"):
            tapped[(body["t"], body["id"])] = tapped.get((body["t"], body["id"]), 0) + 1
    assert tapped and seen == tapped


def _mosquitto() -> bool:
    from tests.live.conftest import MOSQUITTO
    return MOSQUITTO is not None


def _requests(run: Path) -> tuple[set[str], set[str]]:
    """The ids of the requests the run's commander sent and its handler took in, as the
    tap saw them."""
    sent: set[str] = set()
    taken: set[str] = set()
    for line in (run / "history.jsonl").open():
        e = json.loads(line)
        if e["kind"] == "wire" and (e.get("body") or {}).get("t") == "req":
            if e["node"] == "commander-1" and e["direction"] == "out":
                sent.add(e["body"]["id"])
            elif e["node"] == "handler-1" and e["direction"] == "in":
                taken.add(e["body"]["id"])
    return sent, taken


@pytest.mark.parametrize("isolated", [True, False])
def test_runs_on_one_shared_broker_meet_only_without_isolation(tmp_path: Path,
                                                               isolated: bool) -> None:
    """A run on a broker given by URL is isolated by default: the bench appends its run id
    to each client id, and Parley's deployment puts it into each topic (`bench/backup/req`
    becomes `bench/backup/run-<id>/req`). Two parley_quickstart runs at once on one broker
    then each see only their own commands, every verdict TRUE. A raw client publishing
    requests on the topology's own topics all the while stands in for another run that is
    not isolated: an isolated handler never takes one; with --no-isolation the handler
    takes them (what isolation prevents, shown; CI showed two un-isolated runs need not
    overlap on a loaded machine, so the other run is this client)."""
    import subprocess
    import uuid

    import paho.mqtt.client as mqtt

    from bench.substrates.live.brokers import make_broker
    broker = make_broker("mosquitto" if _mosquitto() else "amqtt", tmp_path / "broker")
    broker.start()
    foreign: set[str] = set()
    raw = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="another-run",
                      protocol=mqtt.MQTTv311)
    try:
        raw.username_pw_set("another-run")
        raw.connect(broker.host, broker.port)
        raw.loop_start()
        runs = [tmp_path / f"run-{i}" for i in ((1, 2) if isolated else (1,))]
        procs = [subprocess.Popen(
            [sys.executable, "-m", "bench", "run", "parley_quickstart", "--broker", broker.url,
             *(["--no-isolation"] if not isolated else []),
             *(a for role, command in COMMANDS.items()
               for a in ("--node-command", f"{role}={' '.join(command)}")),
             "--no-plots", "--out", str(run)], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True) for run in runs]
        # requests on the un-isolated topic until every run has ended (each a new id)
        while any(p.poll() is None for p in procs):
            command = uuid.uuid4().hex[:22]
            foreign.add(command)
            raw.publish("bench/backup/req", json.dumps(
                {"v": 1, "t": "req", "id": command, "p": {"ms": 100}}), qos=1)
            time.sleep(0.25)
        ended = [p.communicate(timeout=60) for p in procs]
    finally:
        raw.loop_stop()
        raw.disconnect()
        broker.stop()
    seen = [_requests(run) for run in runs]
    assert all(sent for sent, _taken in seen)
    if isolated:
        assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _out, err in ended]
        (sent_1, taken_1), (sent_2, taken_2) = seen
        assert not sent_1 & sent_2 and taken_1 <= sent_1 and taken_2 <= sent_2
        for run in runs:
            started = json.loads((run / "history.jsonl").open().readline())
            assert all(f"/run-{started['runId']}/" in topic
                       for topic in started["settings"]["topics"].values())
    else:
        [(_sent, taken)] = seen
        assert taken & foreign, "the un-isolated handler took none of the other's requests"


def test_a_redelivery_on_a_shared_broker_replays_the_isolated_topics(tmp_path: Path) -> None:
    """parley_redelivery on a broker given by URL: the run's topics carry its run id, and
    the qos1_redelivery fault — a client of the bench's own on that broker — replays what
    crosses those topics (`deploy.inbox` with the run id). Copies reach both nodes and every
    verdict holds. A fault listening on the topology's bare topics would replay nothing,
    and the run would say so (a fault that never fired is UNKNOWN, exit 2)."""
    import subprocess

    from bench.substrates.live.brokers import make_broker
    broker = make_broker("mosquitto" if _mosquitto() else "amqtt", tmp_path / "broker")
    broker.start()
    run = tmp_path / "run"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench", "run", "parley_redelivery", "--broker", broker.url,
             *(a for role, command in COMMANDS.items()
               for a in ("--node-command", f"{role}={' '.join(command)}")),
             "--no-plots", "--out", str(run)], cwd=ROOT, capture_output=True, text=True,
            timeout=300)
    finally:
        broker.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = [json.loads(line) for line in (run / "history.jsonl").open()]
    topics = lines[0]["settings"]["topics"]
    assert all(f"/run-{lines[0]['runId']}/" in topic for topic in topics.values())
    fired = sum(1 for e in lines if e["kind"] == "fault_fired")
    came: dict[tuple[str, str, str], list[str]] = {}   # (node, type, id) -> the topics
    for e in lines:
        if e["kind"] == "wire" and e["direction"] == "in" and e["packet"] == "PUBLISH":
            body = e.get("body") or {}
            came.setdefault((e["node"], str(body.get("t")), str(body.get("id"))),
                            []).append(e["topic"])
    again = {k: v for k, v in came.items() if len(v) > 1}     # the copies the fault sent
    assert fired > 5 and {node for node, _t, _id in again} == {"commander-1", "handler-1"}
    assert all(t in topics.values() for ts in again.values() for t in ts)
