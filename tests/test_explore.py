"""`a2a-bench explore`: drafts are valid scenarios, seeded; shrinking keeps the failure and
only ever makes a draft smaller; a failure found is written as a scenario that replays it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.checks import judging
from bench.cli import EXIT_FALSE, EXIT_INVALID, EXIT_OK, EXIT_UNKNOWN, main
from bench.explore import explore, trial, write_draft
from bench.explore.draw import Draft, draw
from bench.explore.shrink import candidates
from bench.spec.distribution import rng_for
from bench.spec.scenario import load_scenario
from bench.workload import file_value, idle_keys

#: A scenario explore drew and shrank against memory_dedup_60s (seed 1, run 334): a replay
#: of a request to a node that restarts forgets it has seen it and runs it again.
FOUND = Draft(
    {"name": "found", "description": "drawn by a2a-bench explore", "topology": "t.toml",
     "mode": "sim", "seed": 19754, "duration_s": 8, "workload": {"rate_per_s": 2.0},
     "faults": [{"kind": "replay", "at_s": 3.6},
                {"kind": "empty_directory", "at_s": 7.0, "node": "exec-3"}]},
    {"name": "t", "description": "", "broker": {"model": "amqtt"},
     "nodes": [{"id": "orch-1", "role": "orchestrator", "namespace": "ops",
                "agents": ["ops.orchestrator1"], "scene_groups": ["g1"]},
               {"id": "exec-3", "role": "executor", "namespace": "llm",
                "agents": ["llm.tax3", "llm.invoice3"], "scene_groups": ["g1"]}]})


def test_drafts_are_seeded_and_load_as_any_scenario_does(tmp_path: Path) -> None:
    kinds: set[str] = set()
    for i in range(60):
        d = draw(rng_for(7, f"explore/{i}"), f"d{i}")
        assert d == draw(rng_for(7, f"explore/{i}"), f"d{i}")
        path = write_draft(d, tmp_path / str(i), "scenario")
        scenario = load_scenario(path, known_checks=judging())
        kinds.update(f.kind for f in scenario.faults)
    assert len(kinds) >= 12, kinds        # the schedule reaches across the catalogue


def test_every_shrink_step_is_smaller_and_still_a_scenario(tmp_path: Path) -> None:
    d = draw(rng_for(3, "explore/1"), "d")
    while len(d.scenario.get("faults", [])) < 2:     # a draft with something to take away
        d = draw(rng_for(3, f"explore/{len(str(d))}"), "d")

    def weight(x: Draft) -> tuple[int, ...]:
        s = x.size()
        return (s["faults"], s["nodes"], s["duration_s"], int(s["rate_per_s"] * 10),
                s["workload_keys"], int(s["auth"]),
                sum(len(f) for f in x.scenario.get("faults", [])), len(x.topology))

    steps = list(candidates(d))
    assert steps
    for i, (what, smaller) in enumerate(steps):
        assert sum(weight(smaller)) < sum(weight(d)), what
        write_draft(smaller, tmp_path / str(i), "scenario")


def test_a_shrink_step_takes_away_what_only_its_key_made_read(tmp_path: Path) -> None:
    """Without process_fraction a gate's keys go too, and a tab's habits without tabs: left
    alone they would be read by nothing, and the scenario would refuse them (`NEEDS`)."""
    d = FOUND.copy()
    d.scenario["workload"] |= {"process_fraction": 0.5, "gate_fraction": 0.5,
                               "humans": {"never": 1}, "tabs_per_conversation": 1,
                               "watched_fraction": 0.5}
    steps = dict(candidates(d))
    assert steps["workload without process_fraction"].scenario["workload"] == {
        "rate_per_s": 2.0, "tabs_per_conversation": 1, "watched_fraction": 0.5}
    assert "watched_fraction" not in steps[
        "workload without tabs_per_conversation"].scenario["workload"]
    for i, (what, smaller) in enumerate(steps.items()):
        if what.startswith("workload without"):
            load_scenario(write_draft(smaller, tmp_path / str(i), "scenario"))


def test_a_draft_carries_no_key_its_workload_never_reads() -> None:
    """The seed's drafts draw a gate's people with no gate and tabs' habits with no tabs
    (every draw kept, so that the rest of a seed's draft stays what it was); the drawer
    takes them out."""
    dropped = 0
    for i in range(60):
        rng = rng_for(7, f"explore/{i}")
        d = draw(rng, f"d{i}")
        workload = d.scenario.get("workload", {})
        assert not set(idle_keys(file_value(workload))) & set(workload), workload
        dropped += "process_fraction" in workload and "humans" not in workload
    assert dropped, "no draft of the 60 drew processes without a gate"


def test_a_found_failure_shrinks_and_replays(tmp_path: Path) -> None:
    failing = trial(1, FOUND, tmp_path / "found", "memory_dedup_60s")
    assert "duplicate_execution" in failing.failing
    assert not trial(2, FOUND, tmp_path / "ref", "reference").failing


def test_explore_cli_on_the_reference_finds_nothing_in_a_few_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--runs", "4", "-j", "1", "--seed", "5", "--out",
                 str(tmp_path)]) == EXIT_OK
    report = json.loads((tmp_path / "explore.json").read_text())
    assert report["scenarios"] == 4 and report["found"] is None
    assert "no verdict failed" in capsys.readouterr().out
    assert not list((tmp_path / "runs").glob("*"))      # passing runs are not kept


def test_explore_stops_at_a_failure_and_writes_the_minimal_scenario(tmp_path: Path) -> None:
    e = explore(variant="memory_dedup_60s", seed=1, runs=None, minutes=None, jobs=1,
                out=tmp_path, drafts=iter([(1, FOUND)]))
    assert e.found is not None and e.minimal is not None
    assert "duplicate_execution" in e.found.failing
    assert e.shrunk is not None and e.shrunk.size()["faults"] <= 2
    assert main(["run", str(e.minimal), "--mode", "sim", "--variant", "memory_dedup_60s",
                 "--no-plots", "--out", str(tmp_path / "replay")]) == EXIT_FALSE
    assert main(["run", str(e.minimal), "--mode", "sim", "--no-plots",
                 "--out", str(tmp_path / "reference")]) == EXIT_OK


def test_explore_on_two_hosts_finds_and_shrinks_what_it_finds_at_home(tmp_path: Path) -> None:
    """Two execnet gateways, each in a folder of its own, stand in for two machines: the
    failing run comes back, and the same draft shrinks to the same minimal scenario."""
    import sys
    hosts = [tmp_path / "host-a", tmp_path / "host-b"]
    for h in hosts:
        h.mkdir()
    tx = [f"popen//python={sys.executable}//chdir={h}" for h in hosts]
    away = explore(variant="memory_dedup_60s", seed=1, runs=None, minutes=None, jobs=1,
                   out=tmp_path / "away", drafts=iter([(1, FOUND)]), tx=tx)
    assert away.found is not None and "duplicate_execution" in away.found.failing
    assert (Path(away.found.folder) / "run" / "history.jsonl").exists()
    assert Path(away.found.folder).is_relative_to(tmp_path / "away")
    home = explore(variant="memory_dedup_60s", seed=1, runs=None, minutes=None, jobs=2,
                   out=tmp_path / "home", drafts=iter([(1, FOUND)]))
    assert away.shrunk == home.shrunk
    assert not list(hosts[0].rglob("history.jsonl")) and not list(hosts[1].rglob("history.jsonl"))


@pytest.mark.parametrize("argv", [["explore", "--variant", "nope"], ["explore", "-j", "0"],
                                  ["explore", "--runs", "0"],
                                  ["explore", "--runs", "3", "--minutes", "1"]])
def test_bad_explore_arguments_exit_3(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == EXIT_INVALID


EXPLORED = Path(__file__).parent / "data" / "explored"


@pytest.mark.parametrize("path", [p for p in sorted(EXPLORED.glob("*.toml"))
                                  if not p.stem.endswith("-topology")], ids=lambda p: p.stem)
def test_what_explore_found_on_the_reference_stays_fixed(tmp_path: Path, path: Path) -> None:
    """Minimal scenarios explore shrank from false verdicts on the reference node (a bug in
    the node, the simulator, an attack's oracle or a checker, each fixed): no verdict is
    FALSE again (a shrunk run may end with a request still in flight: UNKNOWN is fine)."""
    assert main(["run", str(path), "--mode", "sim", "--no-plots", "--out",
                 str(tmp_path)]) in (EXIT_OK, EXIT_UNKNOWN)
