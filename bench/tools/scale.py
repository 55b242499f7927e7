"""One row of `benchmark --scale`, in a process of its own. The simulator at scale: one mesh
of N nodes run in simulation, and raw simpy moving the same number of messages over the same
links, for `python -m bench.tools.benchmark --scale`.

A mesh of N nodes: 10 orchestrators (4 below 1,000 nodes) sending 1,000 requests per
second between them to executors in namespaces of 100 nodes, for `duration_s` with one
executor restarted a third of the way in. Each row runs in a process of its own
(`python -m bench.tools.scale N DIRECTORY DURATION`, printing one JSON line) so that its
peak memory is its own.

Raw simpy is the ceiling: per broker delivery, one simpy process that waits the link's
latency (the same lognormal) and hands the message to a node that counts it — what moving
a message costs before any protocol, store or history.
"""

from __future__ import annotations

import json
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import simpy

from bench.tools import Parser

#: nodes per executor namespace
NAMESPACE_NODES = 100
#: requests per second, all orchestrators together
RATE_PER_S = 1000
#: the topology's directory designs, as a topology names them (`directory = "..."`)
DIRECTORIES = ("global", "namespace")


def orchestrators_of(n: int) -> int:
    return 10 if n >= 1000 else 4


def topology_toml(n: int, directory: str) -> str:
    orchestrators = orchestrators_of(n)
    executors = n - orchestrators
    spaces = max(1, executors // NAMESPACE_NODES)
    blocks = [f'name = "scale-{n}"\ndirectory = "{directory}"\n[broker]\nmodel = "mosquitto"\n'
              '[link]\nlatency_ms = { dist = "lognormal", median = 2, sigma = 0.5 }\n'
              f'[[nodes]]\nid = "orch"\ncount = {orchestrators}\nrole = "orchestrator"\n'
              'namespace = "ops"\nagents = ["ops.planner{i}"]\n']
    for k in range(spaces):
        count = executors // spaces + (1 if k < executors % spaces else 0)
        blocks.append(f'[[nodes]]\nid = "x{k}"\ncount = {count}\nrole = "executor"\n'
                      f'namespace = "ns{k}"\nagents = ["ns{k}.cap{{i}}"]\n')
    return "\n".join(blocks)


def scenario_toml(topology: Path, n: int, duration_s: float) -> str:
    orchestrators = orchestrators_of(n)
    return (f'topology = "{topology}"\nseed = 1\nmode = "sim"\nduration_s = {duration_s:g}\n'
            f'[workload]\nrate_per_s = {RATE_PER_S / orchestrators:g}\n'
            'task_duration_ms = { dist = "lognormal", median = 200, sigma = 0.6 }\n'
            '[[faults]]\nkind = "restart"\nnode = "x0-1"\n'
            f'at_s = {duration_s / 3:g}\ndown_ms = 3000\n')


def bench_row(n: int, directory: str, duration_s: float) -> dict[str, Any]:
    from bench.run import run_scenario
    from bench.spec.scenario import load_scenario
    from bench.variants import variant
    work = Path(tempfile.mkdtemp(prefix=f"a2a-bench-scale-{n}-"))
    (work / "topology.toml").write_text(topology_toml(n, directory))
    (work / "scenario.toml").write_text(scenario_toml(work / "topology.toml", n, duration_s))
    scenario = load_scenario(work / "scenario.toml")
    t0 = time.perf_counter()
    result = run_scenario(scenario, variant("reference"), work / "run")
    wall = time.perf_counter() - t0
    s, m = result.summary, result.metrics
    delivered = s["stats"]["delivered"]
    d = m["directory"]
    row = {"nodes": n, "directory": directory, "simulated_s": s["simulated_s"],
           "run_wall_s": s["wall_s"], "wall_s": wall, "events": s["events"],
           "deliveries": delivered, "deliveries_per_s": delivered / s["wall_s"],
           "announcements": d["announcements"] if d else None,
           "full_after_ms": d["full_after_ms"]["max"] if d else None,
           "exit_code": s["exit_code"], "outcomes": m["outcomes"],
           "history_bytes": (work / "run" / "history.jsonl").stat().st_size}
    shutil.rmtree(work, ignore_errors=True)
    return row


def raw_row(n: int, deliveries: int, seed: int = 1) -> dict[str, Any]:
    """Raw simpy: `deliveries` messages, each a process waiting one link latency, spread over
    n nodes that count what reaches them; fanned out from one publisher at a time, as the
    broker does, at the bench run's pace (every message in flight within 1 simulated s)."""
    env = simpy.Environment()
    rng = random.Random(seed)
    got = [0] * n

    def deliver(node: int, delay: float) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(delay)
        got[node] += 1

    def publisher() -> Generator[simpy.Event, Any, None]:
        sent = 0
        while sent < deliveries:
            for node in range(min(n, deliveries - sent)):
                env.process(deliver(node, rng.lognormvariate(0.693, 0.5)))
                sent += 1
            yield env.timeout(1.0)
    env.process(publisher())
    t0 = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t0
    assert sum(got) == deliveries
    return {"nodes": n, "deliveries": deliveries, "wall_s": wall,
            "deliveries_per_s": deliveries / wall}


def main(argv: list[str]) -> int:
    import argparse
    parser = Parser(
        prog="python -m bench.tools.scale", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python -m bench.tools.scale 1000 global 10   (one JSON line)")
    parser.add_argument("nodes", type=int, help="how many nodes the mesh has")
    parser.add_argument("directory", choices=DIRECTORIES,
                        help="the topology's directory: every node's, or its namespace's")
    parser.add_argument("duration_s", type=float, help="simulated seconds to run")
    args = parser.parse_args(argv)
    if args.nodes < orchestrators_of(args.nodes) + 1 or args.duration_s <= 0:
        parser.error(f"nodes={args.nodes}, duration_s={args.duration_s:g}: expected more nodes "
                     f"than the {orchestrators_of(args.nodes)} orchestrators and a duration > 0")
    n, directory, duration_s = args.nodes, args.directory, args.duration_s
    row = bench_row(n, directory, duration_s)
    row["raw"] = raw_row(n, row["deliveries"])
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # the process that judged beside the run (`JudgeAside`), if the run was long enough
    row["judge_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
