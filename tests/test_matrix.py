"""Matrices: files are checked and expanded; cells run as pytest items (so -k, --lf and
JUnit XML work), land in results/<id>/cells/, and a matrix killed with SIGKILL resumes
without redoing a finished cell."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.matrix import load_matrix
from bench.spec.distribution import SpecError
from bench.spec.scenario import SCENARIOS
from bench.variants import VARIANTS

SMALL = """
name = "small"
description = "two reference cells and a defect"
[[group]]
scenarios = ["quickstart", "empty_directory"]
[[group]]
name = "defect"
variants = ["no_default_executor"]
scenarios = ["empty_directory"]
"""


def write(tmp_path: Path, body: str, name: str = "small.matrix.toml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def matrix_cli(tmp_path: Path, *args: str, wait: bool = True) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "bench", "matrix", *args]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    if not wait:
        return subprocess.Popen(cmd, cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return subprocess.run(cmd, cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)


@pytest.mark.parametrize("body, needle", [
    ("[[group]]\nscenarios = ['nope']", "group[0].scenarios: 'nope' is neither a scenario"),
    ("[[group]]\nvariants = ['nope']", "group[0].variants: 'nope' is not a variant"),
    ("[[group]]\nmodes = ['swarm']", "group[0].modes: 'swarm' must be one of"),
    ("[[group]]\nseeds = ['one']", "group[0].seeds=['one'] must be integers"),
    ("[[group]]\nwhat = 1", "group[0]: unknown key(s) ['what']"),
    ("[[group]]\nmqtt = ['4']", "group[0].mqtt: '4' must be one of ['3.1.1', '5']"),
    ("name = 'x'", "group must be a non-empty array"),
    ("[[group]\n", "not valid TOML"),
])
def test_bad_matrix_files_name_the_file_and_the_key(tmp_path: Path, body: str, needle: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(SpecError, match=None) as err:
        load_matrix(path)
    assert str(path) in str(err.value) and needle in str(err.value), err.value


def test_groups_cross_and_defects_pair_with_their_scenario(tmp_path: Path) -> None:
    m = load_matrix(Path("scenarios/default.matrix.toml"))
    ids = [c.id for c in m.cells]
    assert len(ids) == len(set(ids))
    defects = [c for c in m.cells if c.variant != "reference"]
    assert {(c.variant, c.scenario) for c in defects} == \
        {(v.name, v.scenario) for v in VARIANTS.values() if v.name != "reference"}
    assert {c.topology for c in m.cells if c.group == "topologies"} == {"star", "split", "host-local"}
    live = load_matrix(write(tmp_path, "[[group]]\nscenarios=['quickstart']\nmodes=['sim','live']\n"
                                       "brokers=['amqtt','mosquitto']\nseeds=[1,2]"))
    # brokers named: the simulation copies each broker too (sim and live, per broker)
    assert sorted(c.id for c in live.cells if c.seed == 1) == [
        "quickstart.reference.own.s1.live.amqtt", "quickstart.reference.own.s1.live.mosquitto",
        "quickstart.reference.own.s1.sim.amqtt", "quickstart.reference.own.s1.sim.mosquitto"]
    assert len(live.cells) == 2 * 4
    five = load_matrix(write(tmp_path, "[[group]]\nscenarios=['quickstart']\nmodes=['sim','live']"
                                       "\nbrokers=['mosquitto']\nmqtt=['3.1.1', '5']"))
    assert sorted(c.id for c in five.cells) == [   # the version is an axis of its own
        "quickstart.reference.own.s1.live.mosquitto.mqtt3.1.1",
        "quickstart.reference.own.s1.live.mosquitto.mqtt5",
        "quickstart.reference.own.s1.sim.mosquitto.mqtt3.1.1",
        "quickstart.reference.own.s1.sim.mosquitto.mqtt5"]
    from bench.matrix import _deployed
    assert {str(_deployed(c)[0].mqtt) for c in five.cells} == {"3.1.1", "5"}
    own = load_matrix(write(tmp_path, "[[group]]\nscenarios=['quickstart']\nmodes=['sim','live']"))
    assert sorted(c.id for c in own.cells) == [     # not named: the topology's own model
        "quickstart.reference.own.s1.live.amqtt", "quickstart.reference.own.s1.sim"]


def test_a_broker_that_cannot_speak_a_scenarios_mqtt_version_gets_no_cell_of_it(
        tmp_path: Path) -> None:
    """The fidelity matrix's `brokers` group crossed every scenario with amqtt, the A2A
    ones (MQTT 5) included: their live cells were refused and their simulated ones judged
    amqtt's model for MQTT 5 expiries it never offered (2026-12-05). "@all" leaves them
    out; a scenario named outright is said."""
    fidelity = load_matrix(Path("scenarios/fidelity.matrix.toml"))
    assert not [c.id for c in fidelity.cells if c.scenario.startswith("a2a")
                and c.broker == "amqtt"]
    assert [c for c in fidelity.cells if c.scenario.startswith("a2a") and c.mqtt == ""]
    path = write(tmp_path, "[[group]]\nscenarios=['a2a_expiry']\nbrokers=['amqtt']")
    with pytest.raises(SpecError, match="MQTT 5 on amqtt: it speaks MQTT 3.1.1 only"):
        load_matrix(path)
    path = write(tmp_path, "[[group]]\nscenarios=['quickstart']\nbrokers=['amqtt']\nmqtt=['5']")
    with pytest.raises(SpecError, match="or --mqtt 3.1.1"):
        load_matrix(path)


def test_installed_brokers_make_a_broker_matrix_and_its_grid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`brokers = ["@installed"]`: a cell per installed broker (what the live substrate says
    is here), a cell its broker cannot speak listed with the reason instead of an error;
    the report's grid shows each square's outcome, a refusal's line, a FALSE the scenario
    pins for that broker apart from one nobody expected."""
    import dataclasses

    from bench.matrix.report import broker_grid
    from bench.substrates.live import Live
    from bench.substrates.live.kinds import KINDS
    monkeypatch.setattr(Live, "brokers", lambda self, installed=False:
                        ("amqtt", "mosquitto", "rumqttd") if installed else
                        ("amqtt", "mosquitto", "rumqttd", "rabbitmq"))
    for name in ("amqtt", "mosquitto", "rumqttd"):   # installed as said above, here or not
        monkeypatch.setitem(KINDS, name, dataclasses.replace(KINDS[name],
                                                             find=lambda: "/bin/true"))
    m = load_matrix(write(tmp_path, "[[group]]\nscenarios=['partition', 'a2a_pool']\n"
                                    "modes=['live']\nbrokers=['@installed']"))
    assert [c.id for c in m.cells] == [
        "partition.reference.own.s1.live.amqtt", "partition.reference.own.s1.live.mosquitto",
        "partition.reference.own.s1.live.rumqttd", "a2a_pool.reference.own.s1.live.mosquitto",
        "a2a_pool.reference.own.s1.live.rumqttd"]
    assert [(c.id, "speaks MQTT 3.1.1 only" in why) for c, why in m.skipped] == [
        ("a2a_pool.reference.own.s1.live.amqtt", True)]
    with pytest.raises(SpecError, match=r"'rumqttd': sim cells take one of \['amqtt', "
                                        r"'mosquitto'\], or '@installed'"):
        load_matrix(write(tmp_path, "[[group]]\nscenarios=['partition']\nbrokers=['rumqttd']"))

    def record(cell_id: str, verdicts: dict[str, str], wrong: dict[str, str],
               **more: object) -> dict[str, object]:
        cell = next(c for c in m.cells if c.id == cell_id).to_json()
        return {"cell": cell, "verdicts": verdicts, "wrong": wrong,
                "expect": {k: "true" for k in wrong}, "passed": not wrong, **more}
    grid = broker_grid(m, [
        record(m.cells[0].id, {"deployment": "false"}, {}),      # pinned for amqtt
        record(m.cells[1].id, {"deployment": "true"}, {}),
        record(m.cells[2].id, {"deployment": "false"}, {"deployment": "false"}),
        record(m.cells[3].id, {"a2a_broker": "unknown"}, {"a2a_broker": "unknown"}),
        record(m.cells[4].id, {}, {}, refused="client-1: the broker closed its connection")])
    assert grid is not None and grid["places"] == [
        "live amqtt", "live mosquitto", "live rumqttd"]
    marks = {(row, p): (sq["mark"], sq["text"]) for row, sqs in grid["rows"].items()
             for p, sq in sqs.items()}
    assert marks == {
        ("partition", "live amqtt"): ("pinned", "deployment FALSE"),
        ("partition", "live mosquitto"): ("ok", "as expected"),
        ("partition", "live rumqttd"): ("false", "deployment FALSE"),
        ("a2a_pool", "live amqtt"): ("skip", "not run"),
        ("a2a_pool", "live mosquitto"): ("unknown", "a2a_broker UNKNOWN"),
        ("a2a_pool", "live rumqttd"): ("refused", "refused")}


def test_a_cell_whose_broker_refuses_the_run_is_recorded_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that says no at the start (a CONNACK refusal, a connection closed at each
    SUBSCRIBE) is the cell's finding: cell.json holds the line, no verdicts, not passed."""
    import bench.run
    from bench.matrix import finished, run_cell
    from bench.substrates import BrokerRefused

    def refuse(*_a: object, **_k: object) -> None:
        raise BrokerRefused("tax-1: the broker refused its CONNECT 2 time(s): CONNACK 0x90")
    monkeypatch.setattr(bench.run, "run_scenario", refuse)
    cell = load_matrix(write(tmp_path, "[[group]]\nscenarios=['quickstart']")).cells[0]
    got = run_cell(tmp_path / "out", cell)
    assert got["refused"].endswith("CONNACK 0x90") and not got["passed"] and not got["verdicts"]
    assert finished(tmp_path / "out", cell) == got


def test_a_matrix_runs_filters_writes_junit_and_does_not_redo_finished_cells(tmp_path: Path) -> None:
    path = write(tmp_path, SMALL)
    first = matrix_cli(tmp_path, str(path), "-j", "1", "-k", "quickstart",
                       "--junitxml", "junit.xml")
    assert first.returncode == 0, first.stdout + first.stderr
    cells = tmp_path / "results" / "small" / "cells"
    assert [p.name for p in cells.iterdir()] == ["quickstart.reference.own.s1.sim"]
    assert "<testcase" in (tmp_path / "junit.xml").read_text()
    done = cells / "quickstart.reference.own.s1.sim" / "cell.json"
    stamp = done.stat().st_mtime_ns
    second = matrix_cli(tmp_path, str(path), "-j", "2")
    assert second.returncode == 0, second.stdout + second.stderr
    assert done.stat().st_mtime_ns == stamp, "a finished cell was run again"
    assert "done before" in second.stdout
    assert len(list(cells.iterdir())) == 3
    record = json.loads((cells / "empty_directory.no_default_executor.own.s1.sim" / "cell.json").read_text())
    assert record["passed"] and record["verdicts"]["directory_liveness"] == "false"
    table = (tmp_path / "results" / "small" / "matrix.md").read_text()
    assert "3 of 3 cells finished; 3 as expected" in table
    assert (tmp_path / "results" / "small" / "matrix.html").read_text().count("<svg") >= 1


@pytest.mark.slow
def test_cells_run_on_other_hosts_come_back_into_one_results_folder(tmp_path: Path) -> None:
    """Two execnet gateways stand in for two machines: each starts in a folder of its own
    (its checkout), runs cells into its own results, and ships each back."""
    (tmp_path / "mx").mkdir()
    write(tmp_path / "mx", SMALL)
    hosts = [tmp_path / "host-a", tmp_path / "host-b"]
    tx = [f"--tx=popen//python={sys.executable}//chdir={h}" for h in hosts]
    for h in hosts:
        h.mkdir()
    first = matrix_cli(tmp_path, "mx/small.matrix.toml", *tx)
    assert first.returncode == 0, first.stdout + first.stderr
    here = tmp_path / "results" / "small" / "cells"
    assert len([p for p in here.iterdir() if (p / "cell.json").exists()]) == 3
    ran = {h.name: {p.parent.name for p in (h / "results" / "small" / "cells").glob("*/cell.json")}
           for h in hosts if (h / "results").exists()}
    assert sum(len(c) for c in ran.values()) == 3, ran
    record = json.loads((here / "empty_directory.no_default_executor.own.s1.sim" / "cell.json")
                        .read_text())
    assert record["passed"]
    assert "3 of 3 cells finished; 3 as expected" in \
        (tmp_path / "results" / "small" / "matrix.md").read_text()
    again = matrix_cli(tmp_path, "mx/small.matrix.toml", *tx)
    assert "3 cells finished before: left out" in again.stdout
    bad = matrix_cli(tmp_path, str(tmp_path / "mx" / "small.matrix.toml"), *tx)
    assert bad.returncode == 3 and "must be a file in a folder of the project" in bad.stderr


@pytest.mark.slow
def test_a_failing_cell_fails_the_matrix_and_lf_reruns_only_it(tmp_path: Path) -> None:
    body = SMALL + '\n[[group]]\nname = "wrong"\nvariants = ["no_default_executor"]\nscenarios = ["quickstart"]\n'
    path = write(tmp_path, body)
    run = matrix_cli(tmp_path, str(path), "-j", "2")
    assert run.returncode == 1 and "quickstart.no_default_executor" in run.stdout
    assert "directory_liveness true (expected false)" in run.stdout
    again = matrix_cli(tmp_path, str(path), "--lf")
    assert "1 failed" in again.stdout and "deselected" in again.stdout, again.stdout


@pytest.mark.slow
def test_sigkill_then_resume_completes_without_redoing_finished_cells(tmp_path: Path) -> None:
    body = "[[group]]\nscenarios = [\"quickstart\", \"latency\", \"loss\", \"restart\", \"streaming\", \"mesh_100\"]\n"
    path = write(tmp_path, body, "kill.matrix.toml")
    proc = matrix_cli(tmp_path, str(path), "-j", "1", wait=False)
    assert isinstance(proc, subprocess.Popen)
    cells = tmp_path / "results" / "kill" / "cells"
    assert proc.stdout is not None
    finished = 0
    for line in proc.stdout:   # the matrix's own progress line says a cell is finished
        finished += line.startswith("[") and " ok " in line
        if finished == 2:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p.parent.name: p.stat().st_mtime_ns for p in cells.glob("*/cell.json")}
    assert 2 <= len(before) < 6, before
    resumed = matrix_cli(tmp_path, str(path), "-j", "1")
    assert resumed.returncode == 0, resumed.stdout
    after = {p.parent.name: p.stat().st_mtime_ns for p in cells.glob("*/cell.json")}
    assert len(after) == 6
    assert all(after[k] == v for k, v in before.items()), "finished cells were redone"
    assert not list(cells.glob("*.partial-*")), "the killed cell's scratch folder was left behind"


@pytest.mark.slow
def test_compare_shows_topologies_of_one_matrix_side_by_side_and_matrices_cell_by_cell(tmp_path: Path) -> None:
    path = write(tmp_path, '[[group]]\nscenarios = ["quickstart"]\ntopologies = ["star", "host-local"]\n',
                 "topo.matrix.toml")
    assert matrix_cli(tmp_path, str(path)).returncode == 0
    # the second on two workers: its report's plots drawn two at a time, each format apart
    assert matrix_cli(tmp_path, str(path), "--id", "again", "-j", "2").returncode == 0
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    one = subprocess.run([sys.executable, "-m", "bench", "compare", "results/topo"], cwd=tmp_path,
                         env=env, text=True, capture_output=True)
    header = one.stdout.splitlines()[1]
    assert "star" in header and "host-local" in header and "messages per task" in one.stdout
    two = subprocess.run([sys.executable, "-m", "bench", "compare", "results/topo", "results/again"],
                         cwd=tmp_path, env=env, text=True, capture_output=True)
    assert "2 cells in common, 0 with different verdicts" in two.stdout, two.stdout
    plots = tmp_path / "results" / "topo" / "plots"
    assert (plots / "topologies_1.png").exists() and (plots / "verdicts.svg").exists()
    drawn = sorted(p.name for p in plots.iterdir())
    assert drawn == sorted(p.name for p in (tmp_path / "results" / "again" / "plots").iterdir())
    assert drawn == sorted(f"{n}.{f}" for n in ("duplicates", "topologies_1", "verdicts")
                           for f in ("png", "svg"))
    assert all(f"plots/{n}.png" in (tmp_path / "results" / "again" / "matrix.md").read_text()
               for n in ("duplicates", "topologies_1", "verdicts"))


def test_a_matrix_names_scenario_files_of_its_own_and_live_node_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine" / "my_quickstart.toml"
    mine.parent.mkdir()
    mine.write_text((SCENARIOS / "quickstart.toml").read_text().replace(
        'topology = "star"', f'topology = "{SCENARIOS.parent / "topologies" / "star.toml"}"'))
    path = tmp_path / "x.matrix.toml"
    path.write_text('[[group]]\nscenarios = ["mine/my_quickstart.toml", "quickstart"]\n'
                    'modes = ["live"]\nnodes = ["inproc", "process"]\n')
    cells = load_matrix(path).cells
    assert sorted(c.id for c in cells) == [
        "my_quickstart.reference.own.s1.live.amqtt",
        "my_quickstart.reference.own.s1.live.amqtt.process",
        "quickstart.reference.own.s1.live.amqtt",
        "quickstart.reference.own.s1.live.amqtt.process"]
    assert {str(c.source) for c in cells if c.scenario == "my_quickstart"} == {str(mine)}
    path.write_text('[[group]]\nscenarios = ["mine/nope.toml"]\n')
    with pytest.raises(SpecError, match="'mine/nope.toml': no such file"):
        load_matrix(path)
    path.write_text('[[group]]\nnodes = ["docker"]\n')
    with pytest.raises(SpecError, match="nodes: 'docker' must be one of"):
        load_matrix(path)


def test_the_matrix_report_merges_each_scenarios_histograms_into_one_p50_and_p99() -> None:
    """Two cells of one scenario (two seeds): the report's quantiles are those of all their
    completed requests together, as one histogram of them all gives, not a p50 per cell."""
    import random

    from bench.matrix.report import latency_groups, latency_md
    from bench.metrics import Histogram
    rng = random.Random(3)
    fast = [rng.lognormvariate(3, 0.3) for _ in range(200)]     # ~20 ms
    slow = [rng.lognormvariate(6, 0.3) for _ in range(50)]      # ~400 ms

    def record(seed: int, values: list[float]) -> dict[str, object]:
        h = Histogram()
        for v in values:
            h.add(v)
        return {"cell": {"scenario": "restart", "variant": "reference", "seed": seed,
                         "mode": "sim", "broker": "sim", "nodes": "inproc"},
                "metrics": {"latency_histogram": h.to_json()}}
    both = Histogram()
    for v in fast + slow:
        both.add(v)
    [g] = latency_groups([record(1, fast), record(2, slow)])
    assert g["cells"] == 2 and g["completed"] == 250 and g["without_histogram"] == 0
    assert g["p50"] == round(both.quantile(0.5), 1) and g["p99"] == round(both.quantile(0.99), 1)
    assert g["p50"] < 50 < 300 < g["p99"]     # neither cell's own p50 or p99 alone
    assert "| restart | reference | sim | 2 | 250 |" in latency_md([record(1, fast),
                                                                    record(2, slow)])


def test_the_brokers_a_scenario_may_name_are_those_the_bench_starts() -> None:
    """`[expect.<broker>]` takes the brokers started by name (spec layer), which the live
    substrate's KINDS define: one list, spelled twice because the spec layer sits below it."""
    from bench.spec.scenario import BROKERS_BY_NAME
    from bench.substrates.live.kinds import KINDS
    assert tuple(KINDS) == BROKERS_BY_NAME


def test_a_matrix_of_two_protocols_draws_a_verdict_grid_for_each(tmp_path: Path) -> None:
    """Each protocol's cells in a grid of their own, its own checkers as the columns (one
    grid for both greyed out half of it), drawn beside each other on two workers; the
    page and matrix.md show both."""
    path = write(tmp_path, '[[group]]\nscenarios = ["quickstart", "a2a_quickstart"]\n'
                           'modes = ["sim"]\n', "two.matrix.toml")
    done = matrix_cli(tmp_path, str(path), "-j", "2")
    assert done.returncode == 0, done.stdout[-2000:]
    out = tmp_path / "results" / "two"
    drawn = sorted(p.name for p in (out / "plots").iterdir())
    assert drawn == sorted(f"{n}.{f}" for n in ("duplicates", "verdicts_a2a_mqtt",
                                                 "verdicts_seed") for f in ("png", "svg"))
    md = (out / "matrix.md").read_text()
    assert "plots/verdicts_seed.png" in md and "plots/verdicts_a2a_mqtt.png" in md


def test_a_protocols_grid_is_begun_when_its_last_cell_is_done_and_used_only_if_unchanged(
        tmp_path: Path) -> None:
    """On several workers, the seed protocol's grid is drawn while the A2A cells still run
    (the report's tail was seconds of it); the report takes that drawing only for the very
    records it would draw, and the last protocol's grid is the report's own."""
    from bench.matrix import collect, run_cell
    from bench.matrix.report import EarlyGrids, _verdict_jobs, write_matrix_report
    path = write(tmp_path, '[[group]]\nscenarios = ["quickstart", "a2a_quickstart"]\n'
                           'modes = ["sim"]\n', "two.matrix.toml")
    matrix, out = load_matrix(path), tmp_path / "out"
    seed, a2a = matrix.cells
    early = EarlyGrids(out, matrix)
    run_cell(out, seed)
    early.finished(seed.id)
    assert list(early.started) == ["verdicts_seed"]
    early.finished(seed.id)                  # (reported again: begun once all the same)
    run_cell(out, a2a)
    early.finished(a2a.id)
    assert early.begun == ["seed"]                         # the last one: the report's
    assert list(early.started) == ["verdicts_seed"]
    jobs = {job[3]: job for job, _ in _verdict_jobs(out, matrix, collect(out, matrix))}
    assert early.drawn(jobs["verdicts_seed"]) is not None
    assert early.drawn(jobs["verdicts_a2a_mqtt"]) is None
    kind, (records, title), folder, name = jobs["verdicts_seed"]
    changed = [dict(records[0], passed=not records[0]["passed"])]
    assert early.drawn((kind, (changed, title), folder, name)) is None
    write_matrix_report(out, matrix, 2, early)
    drawn = sorted(p.name for p in (out / "plots").iterdir())
    assert drawn == sorted(f"{n}.{f}" for n in ("duplicates", "verdicts_a2a_mqtt",
                                                 "verdicts_seed") for f in ("png", "svg"))


def test_the_matrix_report_reads_its_cells_without_matplotlib() -> None:
    """The controller writes the report after the last cell; its plots are drawn in a fork
    server that imported matplotlib while the cells ran. Importing it in the controller
    then (a second on two cores) was the report's tail."""
    probe = ("import sys; import bench.matrix.report, bench.matrix.plugin, bench.report.readings; "
             "print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_a_topology_a_named_scenario_cannot_run_on_is_refused_when_the_matrix_loads(
        tmp_path: Path) -> None:
    """A group's `topologies` is read as `run --topology` reads it: the quickstart on a2a-pair
    (its processes and gates are the seed's) validated, and every such cell failed when it
    ran (2026-12-07). Named, it is refused at load; under "@all" the scenarios that cannot
    run there are left out, as a version they do not speak is."""
    from bench.matrix import load_matrix
    from bench.spec.distribution import SpecError
    path = tmp_path / "m.matrix.toml"
    path.write_text('[[group]]\nscenarios = ["quickstart"]\ntopologies = ["a2a-pair"]\n')
    with pytest.raises(SpecError, match=r"group\[0\]: .*quickstart.toml: workload\..*: a "
                                        "workload of the seed protocol; topology 'a2a-pair'"):
        load_matrix(path)
    path.write_text('[[group]]\ntopologies = ["a2a-pair"]\n')
    scenarios = {c.scenario for c in load_matrix(path).cells}
    assert {"a2a_quickstart", "broker_restart"} <= scenarios     # what runs there, kept
    assert not scenarios & {"quickstart", "gates", "streaming"}   # the seed's workloads, left out


def test_a_group_whose_nodes_no_cell_of_it_hosts_by_is_refused(tmp_path: Path) -> None:
    """`nodes = ["process"]` in a group of simulated (or docker) cells was dropped: each cell
    ran as it always does (2026-12-07). Given the default where it counts, it is taken."""
    from bench.matrix import load_matrix
    from bench.spec.distribution import SpecError
    path = tmp_path / "m.matrix.toml"
    for modes in ('["sim"]', '["docker"]'):
        path.write_text(f'[[group]]\nscenarios = ["quickstart"]\nmodes = {modes}\n'
                        'nodes = ["process"]\n')
        with pytest.raises(SpecError, match=r"group\[0\]\.nodes=\['process'\]: no cell of "
                                            "modes"):
            load_matrix(path)
    path.write_text('[[group]]\nscenarios = ["quickstart"]\nmodes = ["sim", "live"]\n'
                    'nodes = ["process"]\n')
    assert {c.nodes for c in load_matrix(path).cells} == {"inproc", "process"}
    path.write_text('[[group]]\nscenarios = ["quickstart"]\nmodes = ["live"]\nnodes = ["inproc"]\n')
    assert len(load_matrix(path).cells) == 1
