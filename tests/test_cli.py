from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import EXIT_FALSE, EXIT_INVALID, EXIT_OK, main
from bench.history import read_jsonl
from bench.protocols.seed.task import TaskService


@pytest.mark.parametrize("auth", ["loose", "strict", "audit"])
@pytest.mark.parametrize("signature", ["1", "2"])
def test_exchange_passes_and_keeps_its_record(tmp_path: Path, auth: str, signature: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["exchange", "--out", str(out), "--auth", auth, "--signature", signature]) == EXIT_OK
    printed = capsys.readouterr().out
    assert "verdict: all checks passed" in printed
    lines = list(read_jsonl(out / "history.jsonl"))
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
    assert f"({len(lines)} events)" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is True and summary["executions"]["req-1"] == 1
    assert (out / "data" / "exec-1" / "a2a-node.db").exists()
    assert (out / "data" / "exec-1" / "a2a-agents.json").exists()


def test_exchange_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exchange", "--out", str(tmp_path), "--json", "--requests", "5"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and set(data["outcomes"]) >= {f"req-{i}" for i in range(1, 6)}


def test_exchange_checks_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A task service that forgets requestIds re-runs the retry: the check must say so."""
    original = TaskService.on_request

    def forgetful(self: TaskService, fx, env, agent_id):  # type: ignore[no-untyped-def]
        self.tasks.clear()
        original(self, fx, env, agent_id)

    monkeypatch.setattr(TaskService, "on_request", forgetful)
    assert main(["exchange", "--out", str(tmp_path)]) == EXIT_FALSE
    printed = capsys.readouterr().out
    assert "[FAIL] no duplicate execution" in printed
    assert "req-1            COMPLETED      executed 2x" in printed


@pytest.mark.parametrize("argv", [["exchange", "--requests", "0"], ["exchange", "--auth", "lax"],
                                  ["nonsense"], []])
def test_bad_arguments_exit_3(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        rc = main(argv)
        raise SystemExit(rc)
    assert exc.value.code == EXIT_INVALID


# -- run / check / list ------------------------------------------------------------------

def test_run_prints_seed_replay_and_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "quickstart", "--mode", "sim", "--out", str(tmp_path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "seed 1; replay: a2a-bench run scenarios/quickstart.toml --mode sim --seed 1" in out
    assert "simulated s per wall s" in out
    assert "duplicate_execution  TRUE" in out
    assert (tmp_path / "report.md").read_text().startswith("# quickstart — reference (seed 1)")


def test_run_with_a_defect_exits_1_and_shows_counterexamples(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "quickstart", "--mode", "sim", "--variant", "reply_to_from_agent", "--out", str(tmp_path)]) == EXIT_FALSE
    out = capsys.readouterr().out
    assert "reply_routing        FALSE      <-- expected true" in out
    assert "but the request named replyNodeId 'orch-1'" in out
    assert "--variant reply_to_from_agent" in out  # the replay command keeps the variant


def test_run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "quickstart", "--mode", "sim", "--seed", "3", "--json", "--out", str(tmp_path)]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["seed"] == 3
    assert {v["name"] for v in data["verdicts"]} >= {"duplicate_execution", "silent_loss"}
    assert data["metrics"]["requests"] > 0


def test_check_rejudges_a_stored_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "quickstart", "--mode", "sim", "--variant", "agent_id_as_node_id", "--out", str(tmp_path)]) == EXIT_FALSE
    (tmp_path / "verdicts.json").unlink()
    capsys.readouterr()
    assert main(["check", str(tmp_path)]) == EXIT_FALSE
    assert "targeted_delivery    FALSE" in capsys.readouterr().out
    assert (tmp_path / "verdicts.json").exists()
    assert main(["check", str(tmp_path / "nope")]) == EXIT_INVALID


def test_list_shows_everything(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == EXIT_OK
    out = capsys.readouterr().out
    for needle in ("quickstart", "mesh-100", "qos1_redelivery", "in_flush_window", "silent_loss",
                   "memory_dedup_60s", "caught by duplicate_execution"):
        assert needle in out


def test_a_crashing_run_keeps_its_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from bench.substrates.sim.host import SimHost
    original = SimHost.feed
    calls = {"n": 0}

    def dies_later(self: SimHost, event: object) -> None:
        calls["n"] += 1
        if calls["n"] == 200:
            raise RuntimeError("harness bug")
        original(self, event)  # type: ignore[arg-type]

    monkeypatch.setattr(SimHost, "feed", dies_later)
    from bench.cli import EXIT_UNKNOWN
    assert main(["run", "quickstart", "--mode", "sim", "--out", str(tmp_path)]) == EXIT_UNKNOWN
    assert "what was recorded is in" in capsys.readouterr().err
    lines = list(read_jsonl(tmp_path / "history.jsonl"))
    assert len(lines) > 100 and lines[0]["kind"] == "run_started"


def test_a_run_with_no_request_and_an_empty_history_say_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing to judge is UNKNOWN (exit 2), never a TRUE that tested nothing."""
    from bench.cli import EXIT_UNKNOWN
    scenario = tmp_path / "idle.toml"
    scenario.write_text('topology = "star"\nmode = "sim"\nduration_s = 5\n'
                        '[workload]\nrate_per_s = 0\n')
    assert main(["run", str(scenario), "--out", str(tmp_path / "idle"), "--no-plots"]) \
        == EXIT_UNKNOWN
    out = capsys.readouterr().out
    assert "silent_loss          UNKNOWN" in out and "nothing to judge: no request" in out
    (tmp_path / "idle" / "history.jsonl").write_text("")
    assert main(["check", str(tmp_path / "idle")]) == EXIT_UNKNOWN
    out = capsys.readouterr().out
    assert "TRUE" not in out and out.count("UNKNOWN") == 15


# -- run folders ---------------------------------------------------------------------------

def test_runs_started_in_the_same_second_finish_in_their_own_folders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("bench.cli.common.utc_stamp", lambda: "20261201-000000")
    for _ in range(2):
        assert main(["run", "quickstart", "--mode", "sim", "--no-plots"]) == EXIT_OK
    folders = sorted(p.name for p in (tmp_path / "results").iterdir())
    assert folders == ["quickstart-reference-s1-20261201-000000",
                       "quickstart-reference-s1-20261201-000000-2"]
    for name in folders:
        assert main(["check", str(tmp_path / "results" / name)]) == EXIT_OK


def test_folders_claimed_at_once_are_all_different(tmp_path: Path) -> None:
    """The claim is an atomic mkdir: threads racing for one name each get their own."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.folders import claim
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: claim(tmp_path, "run"), range(16)))
    assert len(set(got)) == 16 and all(p.is_dir() for p in got)


def test_out_on_an_existing_run_folder_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "quickstart", "--mode", "sim", "--no-plots", "--out", str(tmp_path)]) == EXIT_OK
    before = sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()
    assert main(["run", "quickstart", "--mode", "sim", "--out", str(tmp_path)]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out={tmp_path}: already holds a run" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(("broker", "says"), [
    ("hivemq", "--broker='hivemq' must be one of amqtt, mosquitto"),
    ("mqtt://127.0.0.1:1", "--broker=mqtt://127.0.0.1:1: nothing listens on 127.0.0.1:1"),
    # a name that does not resolve is said so at once (it was "nothing listens on" it)
    ("mqtt://no-such-host.invalid", "no-such-host.invalid does not resolve")])
def test_a_bad_broker_is_one_line_exit_3_and_leaves_nothing_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        broker: str, says: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("bench.substrates.live.EXTERNAL_REACH_S", 0.3)
    assert main(["run", "quickstart", "--broker", broker]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not list(tmp_path.iterdir())


def test_output_cut_short_by_its_reader_is_not_an_error() -> None:
    """`a2a-bench list | head -1`: the reader goes away; no traceback, exit 0. (`true`
    reads nothing and is gone before the first line: the broken pipe every time.)"""
    import subprocess
    import sys
    for reader in ("head -1", "true"):
        done = subprocess.run(["bash", "-o", "pipefail", "-c",
                               f"{sys.executable} -m bench list | {reader}"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stderr == "", (reader, done.stderr[-500:])


@pytest.mark.parametrize("where", ["a2a-bench --help", "a2a-bench run --help"])
def test_every_run_example_of_the_help_names_a_scenario_that_loads(where: str) -> None:
    """The examples in `a2a-bench --help` and `run --help` are what a new user types first."""
    import shlex

    from bench.cli import EPILOG, build_parser
    from bench.spec.scenario import SCENARIOS, find, load_scenario
    text = EPILOG if where == "a2a-bench --help" else \
        build_parser()._subparsers._group_actions[0].choices["run"].epilog  # type: ignore[union-attr]
    examples = [line.strip().split("  ")[0] for line in text.splitlines()
                if line.strip().startswith("a2a-bench run ")]
    assert len(examples) >= 4
    for example in examples:
        args = build_parser().parse_args(shlex.split(example)[1:])
        scenario = load_scenario(find(args.scenario, SCENARIOS, "scenario"),
                                 topology=args.topology, seed=args.seed)
        assert scenario.topology.nodes, example


def test_validate_says_what_each_file_holds_or_what_is_wrong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.spec.scenario import SCENARIOS, TOPOLOGIES
    good = [SCENARIOS / "partition.toml", TOPOLOGIES / "star.toml",
            SCENARIOS / "default.matrix.toml"]
    assert main(["validate", *map(str, good)]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1].split()[0] for line in out] == ["scenario", "topology", "matrix"]
    bad = tmp_path / "bad.toml"
    bad.write_text('topology = "star"\nduration_s = -1\n')
    assert main(["validate", str(good[0]), str(bad)]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.toml" in err[0] and "duration_s=-1 must be > 0" in err[0]


def test_describe_shows_the_whole_of_a_thing_and_both_things_of_one_name(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "partition"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "on amqtt (live, and simulated with its model): deployment FALSE, qos1_delivery FALSE" in text and "faults[0] partition" in text
    assert main(["describe", "loss"]) == EXIT_OK           # a scenario and a fault kind
    text = capsys.readouterr().out
    assert text.startswith("scenario loss") and "\n\nfault loss" in text
    assert main(["describe", "nothing-of-the-kind"]) == EXIT_INVALID
    # what a run expects of a checker that judges only tapped wires, said (a new user read
    # "every verdict TRUE" and then saw wire_evidence UNKNOWN and exit 0, 2026-12-07)
    assert main(["describe", "quickstart"]) == EXIT_OK
    assert "expects: every verdict TRUE; wire_evidence UNKNOWN where no node is behind a " \
        "wire tap" in capsys.readouterr().out


def test_describe_offers_the_substrates_that_take_a_scenario_besides_its_own(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The run line runs the scenario on its own mode (the default) and offers the other
    substrates that would take it, each in its own words; an A2A or Parley scenario shows
    no seed signature settings (it told a2a_quickstart, whose mode is sim, "--mode sim for
    the simulator", and "auth loose (signature v1)" of nodes that sign nothing)."""
    assert main(["describe", "a2a_quickstart"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "run: a2a-bench run scenarios/a2a_quickstart.toml   (--mode live for a real " \
        "broker and nodes; --mode docker for containers)" in text
    assert "mode sim\n" in text and "auth" not in text.split("expects")[0]
    assert main(["describe", "quickstart"]) == EXIT_OK          # a live scenario of the seed
    text = capsys.readouterr().out
    assert "mode live, auth loose (signature v1)" in text
    assert "(--mode sim for the simulator; --mode docker for containers)" in text
    assert main(["describe", "star"]) == EXIT_OK     # a topology: its links, and whose they are
    assert "links, simulated: latency uniform 0.5–3 ms (live, docker and hosts runs use the " \
        "network" in capsys.readouterr().out
    assert main(["describe", "parley_quickstart"]) == EXIT_OK   # nodes of their own: live only
    assert "parley_quickstart.toml   (the one substrate that runs it: another --mode says " \
        "why not)" in \
        capsys.readouterr().out


def test_runs_lists_run_folders_newest_first_and_keeps_the_newest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    results = tmp_path / "results"
    for k, variant in enumerate(("reference", "reply_to_from_agent", "reference")):
        out = results / f"r{k}"
        main(["run", "quickstart", "--mode", "sim", "--no-plots", "--variant", variant,
              "--out", str(out)])
        os.utime(out / "scenario.json", (1_000_000 + k, 1_000_000 + k))
    (results / "a-matrix").mkdir()
    capsys.readouterr()
    assert main(["runs", "--results", str(results), "--json"]) == EXIT_OK
    listed = json.loads(capsys.readouterr().out)
    assert [Path(r["path"]).name for r in listed] == ["r2", "r1", "r0"]
    assert listed[1]["exit_code"] == 1 and listed[1]["verdicts"]["FALSE"] >= 1
    assert main(["runs", "--results", str(results), "--keep", "1"]) == EXIT_OK
    assert sorted(p.name for p in results.iterdir()) == ["a-matrix", "r2"]


def test_a_simulation_copies_the_broker_it_is_told_to_and_expects_what_that_broker_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--mode sim --broker X` runs the simulator with X's row (bench.spec.brokers): the
    partition scenario's amqtt expectations ([expect.amqtt]) hold in simulation too, and
    the replay line names the model."""
    out = tmp_path / "amqtt"
    assert main(["run", "partition", "--mode", "sim", "--broker", "amqtt", "--no-plots",
                 "--out", str(out)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "sim (broker model amqtt)" in text and "--broker amqtt" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "amqtt" and summary["expect"]["qos1_delivery"] == "false"
    verdicts = {v["name"]: v["value"] for v in
                json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["qos1_delivery"] == "false"   # what amqtt does live, predicted
    assert main(["run", "partition", "--mode", "sim", "--no-plots",
                 "--out", str(tmp_path / "generic")]) == EXIT_OK
    assert json.loads((tmp_path / "generic" / "summary.json").read_text())["model"] == "generic"


@pytest.mark.parametrize(("argv", "says"), [
    (["--mode", "sim", "--broker", "mqtt://127.0.0.1:1883"],
     "--broker=mqtt://127.0.0.1:1883: a simulation takes a broker model, one of generic, amqtt, "
     "mosquitto"),
    (["--mode", "live", "--broker", "generic"], "--broker=generic is a simulated broker model"),
    (["--mode", "sim", "--nodes", "process"], "--nodes applies to live runs only"),
    (["--mode", "docker", "--broker", "mqtt://127.0.0.1:1883"],
     "--mode docker runs its broker in a container: amqtt or mosquitto"),
    (["--mode", "docker", "--nodes", "process"], "in docker every node is a container"),
    # flags for a broker by URL, given with one the bench starts itself: they changed
    # nothing and said so nowhere (2026-12-07)
    (["--mode", "live", "--no-isolation"], "--no-isolation: for a broker by URL (--broker "
     "mqtt://…); the bench starts amqtt itself"),
    (["--mode", "live", "--broker", "mosquitto", "--broker-restart-command", "true"],
     "--broker-restart-command: for a broker by URL (--broker mqtt://…); the bench starts "
     "mosquitto itself"),
    (["--mode", "docker", "--no-isolation", "--broker-restart-command", "true"],
     "--broker-restart-command, --no-isolation: for a broker by URL (--mode live); --mode "
     "docker starts its own broker in a container"),
    (["--mode", "live", "--mqtt", "5", "--broker", "amqtt"],
     "MQTT 5 on amqtt: it speaks MQTT 3.1.1 only"),
    (["--mode", "docker", "--mqtt", "5", "--broker", "amqtt"],
     "MQTT 5 on amqtt: it speaks MQTT 3.1.1 only"),
    # the simulator's model of amqtt speaks what amqtt speaks (it ran MQTT 5 before)
    (["--mode", "sim", "--mqtt", "5", "--broker", "amqtt"],
     "MQTT 5 on amqtt: it speaks MQTT 3.1.1 only (a v5 CONNECT is never answered: `a2a-bench "
     "brokers`); use --broker mosquitto or generic, or --mqtt 3.1.1")])
def test_a_broker_that_does_not_fit_the_mode_is_one_line_exit_3(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: list[str], says: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "quickstart", *argv]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not list(tmp_path.iterdir())


def test_mqtt_5_without_mosquitto_says_what_to_install_and_why_not_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The v5 default is Mosquitto (amqtt speaks 3.1.1 only; the embedded v5 candidate,
    moat-lib-mqtt, fails what the scenarios need): missing, it is one line before anything
    is built, not a run that fails to start its broker."""
    import bench.substrates.live.brokers as brokers
    monkeypatch.setattr(brokers, "mosquitto_exe", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "quickstart", "--mode", "live", "--mqtt", "5"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mosquitto is not installed (Debian: apt-get install mosquitto)" \
        in err[0] and "docs/findings/moat-lib-mqtt.md" in err[0], err
    assert not list(tmp_path.iterdir())


def test_describe_takes_a_file_for_what_it_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """A path is one thing (a scenario file is not tried as a topology too), and a
    scenario's per-broker expectations and the gaps of the simulator's model show."""
    assert main(["describe", "scenarios/broker_restart.toml"]) == EXIT_OK
    text = capsys.readouterr().out
    assert text.startswith("scenario broker_restart") and "\n\nfault" not in text
    assert "on amqtt (live, and simulated with its model): qos1_delivery EITHER (live only)" \
        in text and "the model does not show it" in text
    assert main(["describe", "topologies/star.toml"]) == EXIT_OK
    assert capsys.readouterr().out.startswith("topology star")


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_paths_are_one_line_exit_3_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: str) -> None:
    """A scenario path that is a folder, an `--out` below a file: each was a traceback
    (IsADirectoryError, NotADirectoryError) with exit 1, the code of a FALSE verdict."""
    monkeypatch.chdir(tmp_path)
    extra = ["--mode", "sim"] if command == "run" else []
    assert main([command, str(tmp_path), *extra]) == EXIT_INVALID
    assert f"{tmp_path}: is a directory; expected a TOML file" in _one_line(capsys)
    if command == "run":
        (tmp_path / "a-file").write_text("")
        assert main(["run", "quickstart", "--mode", "sim", "--out",
                     str(tmp_path / "a-file" / "run")]) == EXIT_INVALID
        assert "a parent of it is a file" in _one_line(capsys)


def test_a_wrong_name_is_one_line_with_a_suggestion_not_a_catalogue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Newcomer, 2026-12-04: `describe partitoin` got no did-you-mean (`run` did); `run
    scenarios` (the folder, without a slash) listed all 72 scenario names in one line."""
    assert main(["describe", "partitoin"]) == EXIT_INVALID
    assert "did you mean 'partition'" in _one_line(capsys)   # the closest first
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert main(["run", "scenarios", "--mode", "sim"]) == EXIT_INVALID
    line = _one_line(capsys)
    assert "scenarios: is a directory" in line and len(line) < 200, line
    assert main(["run", "zzzqqq", "--mode", "sim"]) == EXIT_INVALID
    assert _one_line(capsys).endswith("(`a2a-bench list` names them all)")


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_unreadable_scenario_is_one_line_exit_3(tmp_path: Path, command: str) -> None:
    """A file without read permission (PermissionError was a traceback). Root reads
    anything: as root the CLI runs without the capabilities that let it."""
    import os
    import shutil
    import subprocess
    import sys

    from bench.spec.scenario import SCENARIOS
    scenario = tmp_path / "locked.toml"
    scenario.write_text((SCENARIOS / "quickstart.toml").read_text())
    scenario.chmod(0)
    as_user: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")      # util-linux, on every Debian
        if setpriv is None:
            pytest.skip("running as root and no setpriv to drop CAP_DAC_OVERRIDE")
        as_user = [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]
    done = subprocess.run([*as_user, sys.executable, "-m", "bench", command, str(scenario),
                           *(["--mode", "sim", "--out", str(tmp_path / "out")]
                             if command == "run" else [])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_INVALID, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"a2a-bench: {scenario}: cannot be read (Permission denied)"]


@pytest.mark.parametrize(("nodes", "says"), [
    ('count = 1000000000', "nodes[1].count=1000000000: the topology would have 1,000,000,001 "
                           "nodes, more than the 100,000"),
    ('count = 3000', 'directory="global" with 3,001 nodes'),
])
def test_a_topology_no_machine_holds_is_refused_before_anything_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: str, says: str) -> None:
    """`count = 1000000000` ran validate for 10 minutes at 3.4 GB and nothing said why."""
    topology = tmp_path / "huge.toml"
    topology.write_text('[[nodes]]\nid = "o"\nrole = "orchestrator"\nnamespace = "ops"\n'
                        f'[[nodes]]\nid = "e"\nnamespace = "llm"\n{nodes}\n')
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'topology = "{topology}"\nduration_s = 5\n')
    assert main(["validate", str(topology)]) == EXIT_INVALID
    assert says in _one_line(capsys)
    assert main(["run", str(scenario), "--mode", "sim", "--out",
                 str(tmp_path / "run")]) == EXIT_INVALID
    assert says in _one_line(capsys)
    assert not (tmp_path / "run").exists()


def test_a_workload_no_run_can_record_is_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('topology = "star"\nduration_s = 1e9\n')
    assert main(["validate", str(scenario)]) == EXIT_INVALID
    assert "plans 2,000,000,000 requests and events, more than the 2,000,000" \
        in _one_line(capsys)


def test_every_argument_of_every_command_says_what_it_is_and_no_example_is_cut() -> None:
    """`check RUN_DIR` and `--json` once had no help, and `matrix --help` cut its ssh
    gateway example mid-word ('ss h=me@hostb'): every argument of every command has help
    text, and an option's help is wrapped at spaces only."""
    import argparse
    import contextlib
    import io

    from bench.cli import build_parser
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"a2a-bench {name}: {action.dest} has no help"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        parser.parse_args(["matrix", "--help"])
    assert "ssh=me@hostb//python=/opt/a2a-bench/.venv/bin/python//chdir=/opt/a2a-bench" \
        in out.getvalue()


def test_a_live_runs_header_says_which_nodes_are_processes_of_their_own() -> None:
    """Issue 50: an A2A run said "inproc nodes" with the responder under test a process."""
    from bench.spec.scenario import SCENARIOS, Mode, load_scenario
    from bench.substrates import Options, substrate
    scenario = load_scenario(SCENARIOS / "a2a_quickstart.toml")
    live = substrate(Mode.LIVE)
    assert live.header(scenario, Options(broker="mosquitto")).endswith("with inproc nodes")
    theirs = scenario.with_node_command("responder", ("python", "agent.py"))
    assert live.header(theirs, Options(broker="mosquitto")).endswith(
        "with tax-1, tax-2 as processes of their own, 1 inproc")


def test_node_command_takes_each_protocols_own_role_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--node-command names a role as the bench does or as the topology's protocol does
    (Parley's commander and handler too); another name is refused in one line naming every
    role it may be, before anything runs."""
    code = main(["run", "parley_quickstart", "--node-command", "boss=python x.py",
                 "--out", str(tmp_path / "a")])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INVALID and len(said) == 1
    assert "got role 'boss'" in said[0] and "commander, handler" in said[0]
    # a name it takes goes on to the scenario, which asks the role of its own topology
    code = main(["run", "quickstart", "--node-command", "commander=python x.py",
                 "--out", str(tmp_path / "b")])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INVALID and len(said) == 1 and "boss" not in said[0], said


def test_a_node_commands_python_is_the_benchs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--node-command "responder=python examples/…"` from `.venv/bin/a2a-bench` with no
    venv active: no `python` on the PATH (Debian has none), or another one without the
    adapter's packages. The command is accepted, and runs on the bench's interpreter."""
    import sys

    from bench.cli.common import command_line
    from bench.substrates.live.nodes import LocalProcess
    monkeypatch.setenv("PATH", "/nonexistent")
    given = "python examples/emqx-sdk/responder.py"
    argv = command_line(given, f"--node-command=responder={given}", "responder")
    assert argv == ("python", "examples/emqx-sdk/responder.py")
    assert LocalProcess(argv).command == (sys.executable, "examples/emqx-sdk/responder.py")
    assert LocalProcess(("python3", "-c", "pass")).command[0] == sys.executable
    assert LocalProcess(("./my-node",)).command == ("./my-node",)


@pytest.mark.parametrize("tool", ["golden", "scale", "benchmark", "reach"])
def test_a_tool_refuses_bad_arguments_with_exit_3(tool: str) -> None:
    """`python -m bench.tools.NAME` says what was wrong in one line and exits 3, as every
    `a2a-bench` command does (argparse alone exits 2, the bench's UNKNOWN)."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", f"bench.tools.{tool}", "--no-such-option"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "error: unrecognized arguments: --no-such-option" in done.stderr \
        or "error:" in done.stderr.splitlines()[-1]


def test_every_directory_the_scale_tool_accepts_is_one_a_topology_loads(tmp_path: Path) -> None:
    """`python -m bench.tools.scale 100000 scoped 10` was accepted, then failed loading its
    own topology a second later (it said "scoped" where topologies say "namespace")."""
    from bench.spec.scenario import load_scenario
    from bench.tools.scale import DIRECTORIES, scenario_toml, topology_toml
    for directory in DIRECTORIES:
        (tmp_path / "t.toml").write_text(topology_toml(120, directory))
        (tmp_path / "s.toml").write_text(scenario_toml(tmp_path / "t.toml", 120, 1.0))
        assert load_scenario(tmp_path / "s.toml").topology.directory == directory


def test_compare_refuses_a_folder_given_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One run beside itself would read as two runs that agree."""
    run = tmp_path / "run"
    run.mkdir()
    assert main(["compare", str(run), str(tmp_path / "." / "run")]) == EXIT_INVALID
    assert f"compare: {tmp_path / '.' / 'run'} is given twice" in capsys.readouterr().err


def test_deploy_writes_each_protocols_topology_and_refuses_what_it_would_not_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A deployment is the topology with the default workload (the quickstart's, used here
    once, is the seed's alone and refused a2a-pair); its broker is the one a run of the
    topology starts (MQTT 5: mosquitto); a node of a program or an image of its own is
    refused, not written as the reference node; a broker that cannot speak the topology's
    MQTT version is refused, not written."""
    import json
    assert main(["deploy", "a2a-pair", "--compose", str(tmp_path / "a.yml")]) == EXIT_OK
    doc = json.loads((tmp_path / "a.yml").read_text())
    assert doc["services"]["broker"]["command"][0] == "mosquitto"
    assert {"client-1", "tax-1", "tax-2"} <= set(doc["services"])
    assert "the mosquitto broker" in capsys.readouterr().out
    for argv, says in ((["parley"], "commander-1, handler-1 run a program or image of their "
                                    "own"),
                       (["a2a-pair", "--broker", "amqtt"], "MQTT 5 on amqtt")):
        assert main(["deploy", *argv, "--compose", str(tmp_path / "b.yml")]) == EXIT_INVALID
        assert says in capsys.readouterr().err
        assert not (tmp_path / "b.yml").exists()


def test_inputs_that_would_change_nothing_are_one_line_exit_3(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by a sweep for inputs taken and then unused (2026-12-07): a gap declared for a
    broker the simulator has no model of; a restart command for a broker the bench starts
    (and restarts) itself; a results folder that is not there, read as one with no runs."""
    scenario = tmp_path / "s.toml"
    scenario.write_text('topology = "star"\n[unmodelled.rabbitmq]\nqos1_delivery = "why"\n')
    for argv, says in (
            (["validate", str(scenario)], "unmodelled.rabbitmq: the simulator has no model of "
                                          "rabbitmq (it models amqtt, mosquitto)"),
            (["brokers", "--broker", "amqtt", "--broker-restart-command", "true"],
             "--broker-restart-command: for a broker by URL (mqtt://…); the bench starts amqtt "
             "itself"),
            (["runs", "--results", str(tmp_path / "nope")], "no such folder"),
            (["runs", "--results", str(scenario)], "not a folder")):
        assert main(argv) == EXIT_INVALID, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
