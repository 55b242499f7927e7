"""A topology's `directory = "namespace"`: an executor reads its own namespace's
announcements, an orchestrator every namespace's; the mesh still completes every request,
and its start costs fewer messages than the global directory's N²."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from bench.core import events as ev
from bench.history import History
from bench.run import run_scenario
from bench.spec.scenario import SpecError, load_scenario, load_topology
from bench.variants import variant

TOPOLOGY = """name = "scoped"
directory = "{directory}"
[[nodes]]
id = "orch"
count = 2
role = "orchestrator"
namespace = "ops"
agents = ["ops.planner{{i}}"]
[[nodes]]
id = "fin"
count = 3
role = "executor"
namespace = "fin"
agents = ["fin.cap{{i}}"]
[[nodes]]
id = "llm"
count = 3
role = "executor"
namespace = "llm"
agents = ["llm.cap{{i}}"]
"""


def run(tmp: Path, directory: str) -> tuple[History, dict[str, object]]:
    (tmp / "t.toml").write_text(TOPOLOGY.format(directory=directory))
    (tmp / "s.toml").write_text(f'topology = "{tmp}/t.toml"\nseed = 3\nduration_s = 5\n'
                                'mode = "sim"\n[workload]\nrate_per_s = 4\n')
    result = run_scenario(load_scenario(tmp / "s.toml"), variant("reference"), tmp / directory)
    return History.read(tmp / directory / "history.jsonl"), result.metrics


def test_each_node_reads_the_namespaces_of_its_scope(tmp_path: Path) -> None:
    h, metrics = run(tmp_path, "namespace")
    heard: dict[str, set[str]] = defaultdict(set)
    for e in h.of(ev.DirectoryUpdated):
        heard[e.node].add(h.namespace[e.node_id])
    for node, namespaces in heard.items():
        if node.startswith("orch"):
            assert namespaces == {"ops", "fin", "llm"}, node
        else:
            assert namespaces == {h.namespace[node]}, node
    outcomes = metrics["outcomes"]
    assert isinstance(outcomes, dict) and set(outcomes) == {"COMPLETED"}
    _, global_metrics = run(tmp_path, "global")
    scoped, everyone = metrics["directory"], global_metrics["directory"]
    assert isinstance(scoped, dict) and isinstance(everyone, dict)
    assert everyone["announcements"] == 8 * 8
    assert scoped["announcements"] == 2 * 8 + 6 * 3
    assert everyone["to_fill_per_node"]["max"] == 8 >= scoped["to_fill_per_node"]["max"]


def test_an_unknown_directory_design_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text(TOPOLOGY.format(directory="per-node"))
    with pytest.raises(SpecError, match=r"t.toml: directory='per-node' must be one of"):
        load_topology(tmp_path / "t.toml")
