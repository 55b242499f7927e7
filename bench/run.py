"""One run of one scenario: build the deployment on a substrate, feed it the workload,
let the nemesis act, record the history, judge it, and write `results/<run-id>/`.

The history is streamed to disk as it is recorded; verdicts, metrics and the report are
written after. Nothing here decides protocol behaviour: that is the core's.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import simpy

from bench.checks import History, Value, Verdict, fault_firings, judge
from bench.core.auth import AuthConfig, KeyRing, Secret
from bench.core.config import NodeConfig
from bench.core.inputs import (
    GroupEventRequested,
    SubscriberAttached,
    SubscriberDetached,
    TaskRequested,
)
from bench.faults.sim import SimNemesis
from bench.history import Recorder, read_jsonl
from bench.metrics import compute
from bench.report.markdown import render
from bench.spec.distribution import rng_for
from bench.spec.scenario import Scenario
from bench.spec.topology import BrokerModel, NodeSpec, Topology
from bench.substrates.sim.cluster import SimCluster
from bench.variants import Variant
from bench.workload import Behaviour, EventOp, RequestOp, TabOp, plan

EXIT_OK, EXIT_FALSE, EXIT_UNKNOWN, EXIT_INVALID = 0, 1, 2, 3


@dataclass
class RunResult:
    out_dir: Path
    verdicts: list[Verdict]
    metrics: dict[str, Any]
    summary: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdicts, self.summary["expect"])


def exit_code(verdicts: list[Verdict], expect: dict[str, str]) -> int:
    """0 every verdict as expected (true unless the scenario says otherwise), 1 some
    verdict contradicts its expectation, 2 some verdict is unknown."""
    worst = EXIT_OK
    for v in verdicts:
        wanted = expect.get(v.name, "true")
        if v.value.value == wanted:
            continue
        if v.value is Value.UNKNOWN:
            worst = max(worst, EXIT_UNKNOWN) if worst != EXIT_FALSE else worst
        else:
            worst = EXIT_FALSE
    return worst


def keyring(scenario: Scenario) -> KeyRing:
    """Keys derived from the seed (so a replay signs alike); never written anywhere."""
    mode = scenario.auth.keys
    if mode == "none":
        return KeyRing()
    rng = rng_for(scenario.seed, "keys")
    flat = Secret(rng.randbytes(24).hex())
    if mode == "flat":
        return KeyRing(flat_token=flat)
    agents = sorted({a for n in scenario.topology.nodes for a in n.agents})
    return KeyRing(flat_token=flat, agent_keys={a: Secret(rng.randbytes(24).hex()) for a in agents})


def node_config(node: NodeSpec, scenario: Scenario, keys: KeyRing) -> NodeConfig:
    return NodeConfig(node.id, node.namespace, node.agents, node.scene_groups, node.client_id,
                      auth=AuthConfig(scenario.auth.mode, keys,
                                      scenario.auth.signature_of(node.id)),
                      request_timeout_ms=scenario.workload.request_timeout_ms)


def replay_command(scenario: Scenario, variant: Variant, topology_overridden: bool,
                   mode: str = "sim", broker: str = "amqtt", nodes: str = "inproc") -> str:
    argv = ["a2a-bench", "run", scenario.source, "--mode", mode, "--seed", str(scenario.seed)]
    if mode == "live":
        argv += ["--broker", broker, "--nodes", nodes]
    if topology_overridden:
        argv += ["--topology", scenario.topology.source]
    if variant.name != "reference":
        argv += ["--variant", variant.name]
    return shlex.join(argv)


def run_sim(scenario: Scenario, variant: Variant, recorder: Recorder,
            progress: Callable[[float, float], None] | None = None) -> dict[str, Any]:
    """Simulate the scenario; every event goes to `recorder`. Returns simulator stats."""
    topo: Topology = scenario.topology
    wl = scenario.workload
    cluster = SimCluster(scenario.seed, recorder,
                         per_filter_copies=topo.broker is BrokerModel.AMQTT,
                         behaviour=Behaviour(wl, scenario.seed))
    keys = keyring(scenario)
    for n in topo.nodes:
        cluster.add(node_config(n, scenario, keys), variant.node_class, topo.link_of(n))
    cluster.record("bench", "run_started", {"scenario": scenario.name, "variant": variant.name,
                                            "seed": scenario.seed, "topology": topo.name,
                                            "nodes": len(topo.nodes), "mode": "sim"})
    for host in cluster.hosts.values():
        host.boot()
    env = cluster.env
    ops = plan(topo, wl, scenario.seed, scenario.duration_ms)

    def drive() -> Generator[simpy.Event, Any, None]:
        for op in ops:
            if op.at_ms > env.now:
                yield env.timeout(op.at_ms - env.now)
            host = cluster.hosts[op.node_id]
            if host.node is None:
                cluster.record(op.node_id, "op_not_issued", {
                    "op": type(op).__name__,
                    "id": op.message_id, "reason": "node is down"})
                continue
            now = host.now_ms
            if isinstance(op, TabOp):
                host.feed(SubscriberAttached(now, op.subscriber_id, op.conversation_id)
                          if op.attach else SubscriberDetached(now, op.subscriber_id))
            elif isinstance(op, RequestOp):
                host.feed(TaskRequested(now, op.request_id, op.message_id, op.from_agent_id,
                                        op.to_agent_id, op.payload, op.conversation_id, None,
                                        op.target_node_id, op.timeout_ms))
            elif isinstance(op, EventOp):
                host.feed(GroupEventRequested(now, op.message_id, op.from_agent_id,
                                              op.scene_group_id, {"event": op.message_id},
                                              op.conversation_id))

    env.process(drive())
    end_ms = scenario.duration_ms + scenario.drain_ms
    SimNemesis(cluster, topo, scenario.seed, scenario.duration_ms).schedule(scenario.faults)
    step = max(1000.0, end_ms / 50)
    t = 0.0
    while t < end_ms:
        t = min(end_ms, t + step)
        cluster.run(t)
        if progress is not None:
            progress(t, end_ms)
    stats = {"simulated_ms": end_ms, "operations": len(ops), **cluster.broker.stats}
    cluster.record("bench", "run_finished", stats)
    return stats


def run_live(scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path, *,
             broker_spec: str = "amqtt", nodes_mode: str = "inproc",
             restart_command: str | None = None,
             progress: Callable[[float, float], None] | None = None,
             say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Run the scenario against a real broker and real nodes; events go to `recorder`."""
    return asyncio.run(_run_live(scenario, variant, recorder, workdir, broker_spec, nodes_mode,
                                 restart_command, progress, say))


async def _run_live(scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
                    broker_spec: str, nodes_mode: str, restart_command: str | None,
                    progress: Callable[[float, float], None] | None,
                    say: Callable[[str], None]) -> dict[str, Any]:
    from bench.faults.live import LiveNemesis
    from bench.substrates.live.brokers import make_broker
    from bench.substrates.live.host import Clock
    from bench.substrates.live.runner import LiveRun, launch_specs, op_json, start_nodes

    topo, wl = scenario.topology, scenario.workload
    broker = make_broker(broker_spec, workdir / "broker", restart_command=restart_command)
    await asyncio.get_running_loop().run_in_executor(None, broker.start)
    clock = Clock(time.time())
    run = LiveRun(recorder, broker, clock)
    nemesis: LiveNemesis | None = None
    try:   # from here on, whatever happens, nodes, proxies and the broker are stopped
        run.record("bench", "run_started", {"scenario": scenario.name, "variant": variant.name,
                                            "seed": scenario.seed, "topology": topo.name,
                                            "nodes": len(topo.nodes), "mode": "live",
                                            "broker": broker.kind, "brokerUrl": broker.url,
                                            "nodeHosting": nodes_mode})
        keys = keyring(scenario)
        specs = launch_specs([node_config(n, scenario, keys) for n in topo.nodes], variant,
                             workdir, broker, clock.t0, scenario.seed, wl.to_json())
        if needs_proxy(scenario):
            specs = await start_proxies(run, specs, scenario.seed)
        for line in await start_nodes(run, specs, nodes_mode):
            say(line)
        start_ms = clock.now_ms()     # the workload's clock starts once every node is up
        ops = plan(topo, wl, scenario.seed, scenario.duration_ms)
        nemesis = LiveNemesis(run, scenario.seed, start_ms + scenario.duration_ms, topo)
        nemesis.schedule(tuple(replace(f, at_ms=f.at_ms + start_ms) for f in scenario.faults))
        for op in ops:
            await run.until(start_ms + op.at_ms)
            run.nodes[op.node_id].send(op_json(op))
            if progress is not None:
                progress(op.at_ms, scenario.duration_ms + scenario.drain_ms)
        await run.until(start_ms + scenario.duration_ms)
        await asyncio.gather(*nemesis.tasks, return_exceptions=False)
        deadline = start_ms + scenario.duration_ms + scenario.drain_ms
        while not run.quiet and clock.now_ms() < deadline:
            await asyncio.sleep(0.05)   # drain until quiescent: settled, finished, delivered
        simulated_ms = clock.now_ms()
    finally:
        if nemesis is not None:
            nemesis.close()
        for node in run.nodes.values():
            await node.stop()
        for proxy in run.proxies.values():
            await proxy.close()
        await asyncio.get_running_loop().run_in_executor(None, broker.stop)
    stats = {"simulated_ms": simulated_ms, "operations": len(ops), "broker": broker.kind,
             "outstanding_at_end": len(run.outstanding), "running_at_end": len(run.running),
             "undelivered_at_end": len(run.undelivered)}
    run.record("bench", "run_finished", stats)
    return stats


PROXY_FAULTS = {"partition", "latency", "loss", "tamper_payload", "tamper_routing"}


def needs_proxy(scenario: Scenario) -> bool:
    return any(f.kind in PROXY_FAULTS or (f.kind == "qos1_redelivery" and
                                          f.params.get("live_method") in ("withhold_puback",
                                                                          "duplicate_publish"))
               for f in scenario.faults)


async def start_proxies(run: Any, specs: list[Any], seed: int) -> list[Any]:
    """A fault proxy in front of every node; each node connects to its proxy."""
    from bench.substrates.live.proxy import FaultProxy
    out = []
    for spec in specs:
        proxy = FaultProxy((run.broker.host, run.broker.port),
                           rng_for(seed, f"proxy/{spec.config.node_id}"))
        await proxy.start()
        run.proxies[spec.config.node_id] = proxy
        run.record(spec.config.node_id, "fault_proxy", {"listen": f"{proxy.host}:{proxy.port}",
                                                        "upstream": run.broker.url})
        out.append(replace(spec, broker=(proxy.host, proxy.port)))
    return out


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=False) + "\n")


def run_scenario(scenario: Scenario, variant: Variant, out_dir: Path, *,
                 topology_overridden: bool = False, mode: str | None = None,
                 broker: str = "amqtt", nodes: str = "inproc",
                 restart_command: str | None = None,
                 progress: Callable[[float, float], None] | None = None,
                 say: Callable[[str], None] = lambda line: None) -> RunResult:
    mode = mode or scenario.mode
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = scenario.to_json() | {"variant": variant.name, "mode": mode}
    if mode == "live":
        resolved |= {"broker": broker, "nodes": nodes}
    write_json(out_dir / "scenario.json", resolved)
    write_json(out_dir / "topology.json", scenario.topology.to_json())
    recorder = Recorder(out_dir / "history.jsonl")
    wall0 = time.perf_counter()
    try:
        if mode == "live":
            stats = run_live(scenario, variant, recorder, out_dir, broker_spec=broker,
                             nodes_mode=nodes, restart_command=restart_command,
                             progress=progress, say=say)
        else:
            stats = run_sim(scenario, variant, recorder, progress)
    finally:
        recorder.close()  # whatever happened, the history recorded so far is on disk
    wall = time.perf_counter() - wall0
    run_s = stats["simulated_ms"] / 1000
    summary = {"scenario": scenario.name, "variant": variant.name, "seed": scenario.seed,
               "topology": scenario.topology.name, "mode": mode,
               "broker": broker if mode == "live" else "sim",
               "nodes": nodes if mode == "live" else "sim",
               "simulated_s": run_s, "wall_s": wall,
               "sim_s_per_wall_s": run_s / wall if wall > 0 else float("inf"),
               "events": len(recorder.events), "expect": dict(scenario.expect),
               "replay": replay_command(scenario, variant, topology_overridden, mode, broker, nodes),
               "stats": stats}
    return judge_run(out_dir, summary, scenario.duration_ms)


def judge_run(out_dir: Path, summary: dict[str, Any], duration_ms: float) -> RunResult:
    history = History(read_jsonl(out_dir / "history.jsonl"))
    verdicts = judge(history)
    metrics = compute(history, duration_ms)
    faults = fault_firings(history)
    summary = summary | {"exit_code": exit_code(verdicts, summary["expect"])}
    write_json(out_dir / "verdicts.json", {"verdicts": [v.to_json() for v in verdicts],
                                           "faults": faults})
    write_json(out_dir / "metrics.json", metrics)
    write_json(out_dir / "summary.json", summary)
    (out_dir / "report.md").write_text(render(summary, verdicts, metrics, faults))
    return RunResult(out_dir, verdicts, metrics, summary)


def rejudge(out_dir: Path) -> RunResult:
    """`a2a-bench check`: judge a stored history again (checkers may have changed)."""
    summary = json.loads((out_dir / "summary.json").read_text())
    scenario = json.loads((out_dir / "scenario.json").read_text())
    return judge_run(out_dir, summary, float(scenario["duration_s"]) * 1000)


def print_progress(stream: Any = sys.stderr) -> Callable[[float, float], None]:
    """Progress lines at most every 2 wall seconds on long runs."""
    state = {"last": time.perf_counter(), "start": time.perf_counter()}

    def show(t_ms: float, end_ms: float) -> None:
        now = time.perf_counter()
        if now - state["last"] >= 2.0 or (t_ms >= end_ms and now - state["start"] >= 2.0):
            state["last"] = now
            rate = (t_ms / 1000) / max(now - state["start"], 1e-9)
            print(f"  simulated {t_ms / 1000:7.1f} / {end_ms / 1000:.1f} s "
                  f"({rate:.1f} sim-s per wall-s)", file=stream, flush=True)
    return show
