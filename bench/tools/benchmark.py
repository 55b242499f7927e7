"""`python -m bench.tools.benchmark`: the live round trip next to raw MQTT; `--scale`; `--matrix`.

The live round trip next to raw MQTT and its floor; `--scale`, the simulator at 100, 1,000
and 10,000 nodes; `--matrix`, a matrix on one worker and on two. A benchmark, not a test: it
prints figures, ratios measured side by side in one run, and asserts nothing.

Live: request-to-response latency and throughput of the bench's reference nodes on amqtt
and Mosquitto, next to a raw MQTT round trip measured in the same run with the same client
library (paho-mqtt), so the bench's own overhead reads as a ratio — and next to the floor,
what one exchange cannot do without: the raw round trip plus the durable commits the
protocol's promises put on its path, each timed on this disk in the same run. Raw, the
commit probe and every row run in blocks, interleaved (`--blocks`: raw, probe, each row,
then again), their samples pooled: a machine whose raw round trip drifts between minutes
(0.56 to 0.91 ms, 2026-12-07) moves every row alike instead of one ratio.

Raw: client A publishes a QoS1 request; client B answers each with a QoS1 response.
Bench: an orchestrator node sends TASK_REQUEST to an executor node (zero-length task);
the round trip ends when the TASK_RESPONSE settles the request. Both sides do the same
two QoS1 publishes per round trip; the bench also signs nothing (loose mode), but dedups,
routes, and commits every batch to SQLite (synchronous=FULL) before publishing. Further
rows take it apart (without fsync; with history lines; behind the fault proxy) and run the
A2A-over-MQTT profile's requester and responder the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from bench.core.commands import Table
from bench.core.config import NodeConfig
from bench.core.inputs import TaskRequested
from bench.protocols.seed.node import Node
from bench.spec.distribution import fixed
from bench.spec.scenario import MAX_NODES_GLOBAL_DIRECTORY
from bench.storage.files import FileStore
from bench.substrates.live import version_refusal
from bench.substrates.live.brokers import Broker, make_broker
from bench.substrates.live.host import Clock, LiveHost
from bench.tools import Parser, machine
from bench.workload import Behaviour, WorkloadSpec


def quantiles(samples_s: list[float]) -> tuple[float, float]:
    s = sorted(samples_s)
    return s[len(s) // 2] * 1000, s[min(len(s) - 1, int(len(s) * 0.99))] * 1000


# -- raw paho round trip ---------------------------------------------------------------------

def _client(cid: str, broker: Broker) -> paho.Client:
    c = paho.Client(CallbackAPIVersion.VERSION2, client_id=cid, clean_session=True,
                    protocol=paho.MQTTv311)
    c.username_pw_set(cid)
    c.max_inflight_messages_set(1000)
    def nodelay(_c: Any, _u: Any, sock: Any) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.on_socket_open = nodelay
    connected = threading.Event()
    c.on_connect = lambda *_a: connected.set()
    c.connect(broker.host, broker.port)
    c.loop_start()
    if not connected.wait(10):
        raise RuntimeError(f"{cid} could not connect to {broker.url}")
    return c


def raw_round_trips(broker: Broker, n: int, window: int, seconds: float) -> dict[str, Any]:
    a, b = _client("bench-raw-a", broker), _client("bench-raw-b", broker)
    done: dict[bytes, threading.Event] = {}
    def answer(_c: Any, _u: Any, m: Any) -> None:
        b.publish("bench/resp", m.payload, qos=1)

    def arrived(_c: Any, _u: Any, m: Any) -> None:
        done[bytes(m.payload)].set()
    b.on_message = answer
    a.on_message = arrived
    for c, t in ((b, "bench/req"), (a, "bench/resp")):
        sub = threading.Event()
        c.on_subscribe = lambda *_a, ev=sub: ev.set()
        c.subscribe(t, qos=1)
        sub.wait(10)
    lat: list[float] = []
    for i in range(-RAW_WARMUP, n):
        key = f"s{i}".encode()
        done[key] = threading.Event()
        t0 = time.perf_counter()
        a.publish("bench/req", key, qos=1)
        if not done[key].wait(10):
            raise RuntimeError("raw round trip timed out")
        if i >= 0:
            lat.append(time.perf_counter() - t0)
    # throughput: keep `window` round trips outstanding for `seconds`
    sem = threading.Semaphore(window)
    count = [0]

    def finished(_c: Any, _u: Any, m: Any) -> None:
        count[0] += 1
        sem.release()
    a.on_message = finished
    end = time.perf_counter() + seconds
    i = 0
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        if sem.acquire(timeout=1):
            a.publish("bench/req", f"t{i}".encode(), qos=1)
            i += 1
    for _ in range(window):
        sem.acquire(timeout=5)
    elapsed = time.perf_counter() - t0
    for c in (a, b):
        c.disconnect()
        c.loop_stop()
    p50, p99 = quantiles(lat)
    return {"p50_ms": p50, "p99_ms": p99, "per_s": count[0] / elapsed,
            "samples": lat, "count": count[0], "elapsed": elapsed}


# -- the floor: what one exchange must wait for on this disk ------------------------------------

def commit_samples(workdir: Path, n: int = 200) -> list[float]:
    """`n` durable commits of the nodes' store on this disk, each timed (s): a small record
    written to SQLite (WAL, synchronous=FULL) and committed, as a node commits a batch —
    after `WARMUP_COMMITS` untimed, as a running node's store is past its first checkpoint."""
    store = FileStore(workdir / f"commit-probe-{time.monotonic_ns()}")
    took = []
    try:
        for i in range(-WARMUP_COMMITS, n):
            txn = store.begin()
            txn.put_record(Table.MESSAGES, f"m{i}", {"n": i, "state": "PUBLISHED"})
            t0 = time.perf_counter()
            txn.commit()
            if i >= 0:
                took.append(time.perf_counter() - t0)
    finally:
        store.close()
    return took


class _UnsyncedStore(FileStore):
    """The nodes' store without its fsyncs (SQLite synchronous=OFF): what durability costs
    a round trip, read off the difference. The benchmark's only; no node runs so."""

    def __init__(self, data_dir: str | Path) -> None:
        super().__init__(data_dir)
        self._db.execute("PRAGMA synchronous=OFF")


class _UnsyncedHost(LiveHost):
    store_class = _UnsyncedStore


@dataclass(frozen=True, slots=True)
class Setup:
    """One way of running the bench's round trip: which protocol's reference nodes, whether
    they keep their promises of durability, and what of the harness sits on the path."""

    name: str
    protocol: str = "seed"        # "seed": orchestrator -> executor; "a2a": requester -> responder
    durable: bool = True          # False: the store's fsyncs off (what durability costs)
    history: bool = False         # every event a history line in a file, as a run writes it
    proxy: bool = False           # each node behind the fault proxy, as a live run's are


#: The durable commits one round trip waits for in turn, in either protocol: the request,
#: before it leaves the asker (W-MQTT-5: its outbox entry); its receipt, before the answerer
#: runs the task and acknowledges it (the task table: a redelivery after a crash must not
#: run it again); the result, before the answer leaves; the settlement, before the asker
#: acknowledges the answer and tells its caller. (The PUBACKs' own records — the outbox
#: marking a message ACCEPTED — join the next of these commits: `QUIET_COMMIT_S`.)
COMMITS_IN_TURN = 4

#: The rows `python -m bench.tools.benchmark` prints per broker, in order.
SETUPS = (Setup("bench"), Setup("no fsync", durable=False),
          Setup("+ history", history=True), Setup("+ history + proxy", history=True, proxy=True),
          Setup("a2a", protocol="a2a"))


def _a2a_scenario() -> Any:
    """The profile's quickstart, whose requester and responder the a2a row runs."""
    from bench.spec.scenario import SCENARIOS, load_scenario
    return load_scenario(SCENARIOS / "a2a_quickstart.toml")


def _pair(setup: Setup) -> tuple[NodeConfig, NodeConfig, Any, str]:
    """The two nodes of a round trip (asking, answering), the core each runs, and the agent
    asked."""
    if setup.protocol == "seed":
        ask, answer = (NodeConfig("orch-1", "fin", ("fin.orchestrator",)),
                       NodeConfig("exec-1", "llm", ("llm.tax",)))
        return ask, answer, lambda _cfg: Node, "llm.tax"
    from bench.substrates import node_configs
    from bench.variants import REFERENCE
    configs = node_configs(_a2a_scenario())
    return configs["client-1"], configs["tax-1"], REFERENCE.core_for, "billing.tax1"


async def bench_round_trips(broker: Broker, workdir: Path, n: int, window: int, seconds: float,
                            setup: Setup = SETUPS[0]) -> dict[str, Any]:
    """The bench's round trip: one node asks, the other runs a zero-length task and
    answers; it ends when the answer settles the request."""
    from bench.history import Recorder
    from bench.spec.topology import MqttVersion
    from bench.substrates.live.proxy import FaultProxy
    from bench.substrates.log import RunLog
    clock = Clock(time.time())
    events: list[tuple[str, str]] = []
    workdir.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(workdir / "history.jsonl") if setup.history else None
    log = RunLog(recorder, clock.now_ms) if recorder is not None else None

    def sink(node: str, event: Any, t_ms: float | None = None) -> None:
        events.append((node, event.KIND.value))
        if log is not None:
            log.record(node, event, t_ms)
    ask, answer, core_for, agent = _pair(setup)
    host_class = LiveHost if setup.durable else _UnsyncedHost
    version = MqttVersion.V5 if setup.protocol == "a2a" else MqttVersion.V311
    hosts, proxies = {}, []
    for cfg in (ask, answer):
        where = (broker.host, broker.port)
        if setup.proxy:
            proxy = FaultProxy(where, random.Random(cfg.node_id))
            await proxy.start()
            proxies.append(proxy)
            where = (proxy.host, proxy.port)
        hosts[cfg.node_id] = host_class(
            cfg, core_for(cfg), workdir / cfg.node_id, where, sink, clock,
            Behaviour(WorkloadSpec(task_duration_ms=fixed(0.0)), 0), version=version)
    waiting: dict[str, asyncio.Future[str]] = {}

    def settled(rid: str, outcome: str) -> None:
        fut = waiting.pop(rid, None)
        if fut is not None and not fut.done():
            fut.set_result(outcome)
    asker = hosts[ask.node_id]
    asker.on_settle = settled
    for h in hosts.values():
        h.boot()
    deadline = time.time() + 15
    while sum(1 for _n, k in events if k == "executors_registered") < 2 and time.time() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    seq = [0]

    async def one() -> str:
        seq[0] += 1
        rid = f"b{seq[0]}"
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        waiting[rid] = fut
        asker.feed(TaskRequested(asker.now_ms(), rid, f"m-{rid}", ask.agents[0], agent,
                                 {"n": seq[0]}, target_node_id=None if setup.protocol == "a2a"
                                 else answer.node_id, timeout_ms=10_000))
        return await asyncio.wait_for(fut, 15)

    lat = []
    for _ in range(WARMUP):
        await one()
    commits0 = sum(h.commits for h in hosts.values())
    for _ in range(n):
        t0 = time.perf_counter()
        outcome = await one()
        if outcome != "COMPLETED":
            raise RuntimeError(f"bench round trip ended {outcome}")
        lat.append(time.perf_counter() - t0)
    commits = (sum(h.commits for h in hosts.values()) - commits0) / n
    count = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < end:
            await one()
            count += 1
    await asyncio.gather(*(worker() for _ in range(window)))
    elapsed = time.perf_counter() - t0
    for h in hosts.values():
        await h.stop()
    for proxy in proxies:
        await proxy.close()
    if proxies:
        await asyncio.sleep(0.1)    # the proxied connections' tasks end before the loop does
    if recorder is not None:
        recorder.close()
    p50, p99 = quantiles(lat)
    batches = sum(h.batches for h in hosts.values())
    groups = sum(h.groups for h in hosts.values())
    return {"p50_ms": p50, "p99_ms": p99, "per_s": count / elapsed,
            "commits_per_round_trip": commits,
            "batches_per_commit": batches / max(1, groups),
            "samples": lat, "count": count, "elapsed": elapsed, "batches": batches,
            "groups": groups}


#: Round trips run and not timed before each block's sequential ones, and commits before
#: the probe's: a fresh store's write-ahead log grows with every commit until its first
#: checkpoint (SQLite's: 1,000 pages), and each commit that grows the file costs its fsync
#: more — a node's first 200 round trips had a p50 of 3.3 then 2.3 ms (2026-12-07). A block
#: of `--blocks` starts its nodes and the probe afresh.
WARMUP = 200
WARMUP_COMMITS = 1_200
RAW_WARMUP = 30           # raw's clients keep no store


def pooled(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from its blocks (`--blocks`): quantiles of every block's samples together,
    throughput as all round trips over all the time, commits weighted by round trips."""
    lat = [x for b in blocks for x in b["samples"]]
    p50, p99 = quantiles(lat)
    row = {"p50_ms": p50, "p99_ms": p99,
           "per_s": sum(b["count"] for b in blocks) / sum(b["elapsed"] for b in blocks)}
    if "commits_per_round_trip" in blocks[0]:
        n = [len(b["samples"]) for b in blocks]
        row["commits_per_round_trip"] = sum(b["commits_per_round_trip"] * k
                                            for b, k in zip(blocks, n, strict=True)) / sum(n)
        row["batches_per_commit"] = sum(b["batches"] for b in blocks) / max(
            1, sum(b["groups"] for b in blocks))
    return row


def scale_table(sizes: list[int], directories: list[str], global_limit: int) -> int:
    """The simulator's scaling table: each row a process of its own (its own peak RSS)."""
    print("sim at scale: 10 orchestrators (4 below 1,000 nodes), 1,000 requests/s in all, "
          "executors in namespaces of 100, one restart; 30 simulated s + drain (60 s at "
          "10,000 nodes); raw simpy moves the same number of deliveries in the same run")
    print(f"{'nodes':>6} {'directory':<10} {'events':>9} {'deliveries':>10} {'announce':>9} "
          f"{'wall s':>7} {'sim-s/wall-s':>12} {'deliv/s':>8} {'µs/deliv':>8} "
          f"{'raw deliv/s':>11} {'raw µs':>6} {'judge s':>7} {'RSS MB':>7}")
    for n in sizes:
        for directory in directories:
            if directory == "global" and n > global_limit:
                more = (f"--global-limit {n} runs it" if n <= MAX_NODES_GLOBAL_DIRECTORY else
                        f"a global directory is refused above {MAX_NODES_GLOBAL_DIRECTORY:,} "
                        "nodes")
                print(f"{n:>6} {directory:<10} not run: {n * n / 1e6:g} M announcements as it "
                      f"starts (N²); {more}")
                continue
            duration = 60 if n >= 10_000 else 30
            out = subprocess.run([sys.executable, "-m", "bench.tools.scale", str(n), directory,
                                  str(duration)], capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{n:>6} {directory:<10} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            raw = r["raw"]
            print(f"{n:>6} {directory:<10} {r['events']:>9} {r['deliveries']:>10} "
                  f"{r['announcements'] or 0:>9} {r['run_wall_s']:>7.1f} "
                  f"{r['simulated_s'] / r['run_wall_s']:>12.2f} {r['deliveries_per_s']:>8.0f} "
                  f"{1e6 / r['deliveries_per_s']:>8.1f} {raw['deliveries_per_s']:>11.0f} "
                  f"{1e6 / raw['deliveries_per_s']:>6.1f} {r['wall_s'] - r['run_wall_s']:>7.1f} "
                  f"{r['peak_rss_mb']:>7.0f}", flush=True)
    print("wall s: the run (judging apart; judge s: reading the history and every checker and "
          "metric, RSS: the peak of both); µs/deliv: run wall per broker delivery, the whole "
          "node core, store and history included; announce: directory messages taken in as "
          "the mesh starts")
    return 0


# -- responders of the A2A-over-MQTT profile under load -----------------------------------------

#: what `--agents` holds the reference responder beside: the EMQX SDK's, behind its adapter
SDK_RESPONDER = (sys.executable, str(Path(__file__).resolve().parents[2] / "examples"
                                     / "emqx-sdk" / "responder.py"))


def agent_load_table(rates: list[float], seconds: float) -> int:
    """Offered load against each responder, through the bench (a2a_quickstart live on
    Mosquitto, its one requester offering `rate` requests per second to two responders,
    tasks of 5 ms): what was answered, and how fast. A rate a responder sustains answers
    every request at a flat latency; past it, latency climbs or requests go unanswered."""
    import dataclasses

    from bench.run import run_scenario
    from bench.spec.scenario import SCENARIOS, load_scenario
    from bench.substrates import Options
    from bench.variants import REFERENCE
    base = load_scenario(SCENARIOS / "a2a_quickstart.toml")
    who = [("reference", None)]
    try:
        import a2a_over_mqtt  # noqa: F401 - the SDK is a test extra
        who.append(("EMQX SDK 0.1.0", SDK_RESPONDER))
    except ImportError:
        print("the EMQX SDK is not installed (pip install -e '.[sdk]'): its rows skipped")
    print(f"a2a_quickstart live on Mosquitto, {seconds:g} s per rate, 1 requester, "
          f"2 responders, 5 ms tasks")
    print(f"{'responder':<16} {'offered/s':>9} {'answered':>9} {'unanswered':>10} "
          f"{'p50 ms':>8} {'p99 ms':>8}")
    for name, command in who:
        for rate in rates:
            scenario = dataclasses.replace(
                base, duration_ms=seconds * 1000, workload=dataclasses.replace(
                    base.workload, rate_per_s=rate, task_duration_ms=fixed(5.0)))
            if command is not None:
                scenario = scenario.with_node_command("responder", command)
            with tempfile.TemporaryDirectory(prefix="a2a-bench-load-") as out:
                result = run_scenario(scenario, REFERENCE, Path(out) / "run", mode="live",
                                      options=Options(broker="mosquitto"))
            outcomes = result.metrics["outcomes"]
            done = outcomes.get("COMPLETED", 0)
            asked = sum(outcomes.values())
            lat = result.metrics["latency_ms"]
            print(f"{name:<16} {rate:9.0f} {done:9d} {asked - done:10d} "
                  f"{lat['p50'] or 0:8.1f} {lat['p99'] or 0:8.1f}")
    return 0


# -- a matrix on one core and on two ---------------------------------------------------------

def matrix_once(matrix: Path, n: int) -> tuple[float, int] | str:
    """One matrix run with `n` workers, as a user runs it (`a2a-bench matrix FILE -j N
    --fresh`): its wall time and cells, or why it failed."""
    name = f"benchmark-j{n}-{time.strftime('%Y%m%d-%H%M%S')}"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bench", "matrix", str(matrix), "-j",
                           str(n), "--id", name, "--fresh"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    out = Path("results") / name
    cells = len(list((out / "cells").glob("*/cell.json"))) if out.exists() else 0
    shutil.rmtree(out, ignore_errors=True)
    if done.returncode not in (0, 1):
        return f"exit {done.returncode}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    return wall, cells


def matrix_table(matrix: Path, jobs: tuple[int, int], repeat: int) -> int:
    """The matrix with each of `jobs` workers, `repeat` times, the two interleaved and their
    order swapped every round (1 2, 2 1, 1 2, ...) so that the machine's drift falls on both
    alike: each run's wall time, each round's speed-up, and the median of those — one pair
    of runs moves by some 7 % from one minute to the next, which is most of what a second
    worker buys."""
    print(f"{matrix}: a2a-bench matrix -j N --fresh, -j {jobs[0]} and -j {jobs[1]} "
          f"interleaved, {repeat} round{'s' if repeat > 1 else ''}")
    print(f"{'round':>5} {'jobs':>4} {'cells':>6} {'wall s':>8} {'speed-up':>8}")
    ratios: list[float] = []
    walls: dict[int, list[float]] = {n: [] for n in jobs}
    for r in range(repeat):
        order = jobs if r % 2 == 0 else jobs[::-1]
        got: dict[int, float] = {}
        for n in order:
            once = matrix_once(matrix, n)
            if isinstance(once, str):
                print(f"{r + 1:>5} {n:>4} failed ({once})", flush=True)
                continue
            got[n], cells = once
            ratio = f"{got[jobs[0]] / got[n]:7.2f}x" if jobs[0] in got and n != jobs[0] else ""
            print(f"{r + 1:>5} {n:>4} {cells:>6} {got[n]:8.1f} {ratio:>8}", flush=True)
        if len(got) == 2:     # the medians are of whole rounds only
            if order[0] != jobs[0]:   # the second of the round was -j 1: its ratio now
                print(f"{'':>5} {'':>4} {'':>6} {'':>8} {got[jobs[0]] / got[jobs[1]]:7.2f}x")
            ratios.append(got[jobs[0]] / got[jobs[1]])
            for n in jobs:
                walls[n].append(got[n])
    if not ratios:
        return 2     # no round ran whole: nothing measured
    print(f"median of {len(ratios)}: -j {jobs[0]} {statistics.median(walls[jobs[0]]):.1f} s, "
          f"-j {jobs[1]} {statistics.median(walls[jobs[1]]):.1f} s, speed-up "
          f"{statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}x)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m bench.tools.benchmark", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="amqtt,mosquitto")
    ap.add_argument("--n", type=int, default=300, help="sequential round trips for latency")
    ap.add_argument("--window", type=int, default=16, help="outstanding round trips for throughput")
    ap.add_argument("--seconds", type=float, default=5.0, help="throughput measurement time")
    ap.add_argument("--blocks", type=int, default=3,
                    help="live: raw, the commit probe and every row measured in this many "
                         "interleaved blocks (each a share of --n and --seconds), pooled: the "
                         "machine's drift between rows falls on all of them alike")
    ap.add_argument("--scale", action="store_true",
                    help="the simulator's scaling table instead (100 / 1,000 / 10,000 nodes, "
                         "global and namespace-scoped directory, next to raw simpy)")
    ap.add_argument("--sizes", default="100,1000,10000", help="--scale: mesh sizes")
    ap.add_argument("--directories", default="global,namespace",
                    help="--scale: directory designs (global, namespace)")
    ap.add_argument("--global-limit", type=int, default=1000,
                    help="--scale: the largest mesh run with a global directory (N² at start)")
    ap.add_argument("--agents", action="store_true",
                    help="A2A-over-MQTT responders under load instead: the reference and the "
                         "EMQX SDK's, through the bench, at rising offered rates")
    ap.add_argument("--rates", default="10,50,100,200", help="--agents: offered requests/s")
    ap.add_argument("--matrix", nargs="?", const="scenarios/default.matrix.toml",
                    metavar="FILE", help="a matrix (default: scenarios/default.matrix.toml) "
                                         "with -j 1 and -j 2, wall time side by side")
    ap.add_argument("--repeat", type=int, metavar="R",
                    help="--matrix: rounds of -j 1 and -j 2, interleaved, their order "
                         "swapped each round; the median speed-up printed (default 3)")
    ap.add_argument("--setups", default="all", metavar="NAMES",
                    help="the bench rows to run, by name: " + ", ".join(s.name for s in SETUPS)
                         + " (default all)")
    args = ap.parse_args(argv)
    if args.blocks < 1 or args.n < args.blocks:
        ap.error(f"--blocks={args.blocks}, --n={args.n}: expected 1 block or more, and at "
                 "least one sequential round trip per block")
    if args.repeat is not None and (args.repeat < 1 or not args.matrix):
        ap.error(f"--repeat={args.repeat}: expected 1 round or more, with --matrix")
    # what else ran, before and after: a niced build beside it took a tenth off a matrix's
    # speed-up once, and nothing in the figures said so
    if (line := machine.note("before")) is not None:
        print(line, flush=True)
    try:
        return _measure(args)
    finally:
        if (line := machine.note("after")) is not None:
            print(line, flush=True)


def _measure(args: argparse.Namespace) -> int:
    if args.matrix:
        return matrix_table(Path(args.matrix), (1, 2), args.repeat or 3)
    if args.agents:
        return agent_load_table([float(r) for r in args.rates.split(",")], args.seconds * 2)
    if args.scale:
        return scale_table([int(s) for s in args.sizes.split(",")],
                           args.directories.split(","), args.global_limit)
    setups = [s for s in SETUPS if args.setups == "all" or s.name in args.setups.split(",")]
    rows = []
    for name in args.brokers.split(","):
        if name == "mosquitto" and not (shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").exists()):
            print(f"{name}: not installed, skipped")
            continue
        work = Path(tempfile.mkdtemp(prefix=f"a2a-bench-{name}-"))
        broker = make_broker(name, work / "broker")
        broker.start()
        # the profile speaks MQTT 5: where the broker does not, the row is not run (the
        # substrate's own check, as a live run of the profile's scenario makes it)
        a2a_refused = version_refusal(_a2a_scenario(), name) is not None
        run = [s for s in setups if not (a2a_refused and s.protocol == "a2a")]
        k = args.blocks
        n, seconds = args.n // k, args.seconds / k
        raws: list[dict[str, Any]] = []
        commits: list[float] = []
        benches: list[list[dict[str, Any]]] = [[] for _ in run]
        try:
            for b in range(k):     # interleaved: raw, the probe, each row; then again
                raws.append(raw_round_trips(broker, n, args.window, seconds))
                commits += commit_samples(work, max(20, 200 // k))
                for i, setup in enumerate(run):
                    benches[i].append(asyncio.run(bench_round_trips(
                        broker, work / f"run{i}-{b}", n, args.window, seconds, setup)))
            raw = pooled(raws)
            commit = sorted(commits)[len(commits) // 2] * 1000
            nodes = [(setup, pooled(blocks)) for setup, blocks in zip(run, benches, strict=True)]
        finally:
            broker.stop()
            shutil.rmtree(work, ignore_errors=True)
        rows.append((name, raw, commit, nodes, a2a_refused))
    print(f"round trips: {args.n} sequential for latency; {args.window} outstanding for "
          f"{args.seconds:g} s for throughput; paho-mqtt on both sides; each row in "
          f"{args.blocks} blocks interleaved with the others'")
    print(f"floor: the raw round trip plus the {COMMITS_IN_TURN} durable commits one exchange "
          "waits for in turn, each at this disk's p50 commit (request, receipt, result, "
          "settlement)")
    print(f"{'broker':<10} {'':<18} {'p50 ms':>8} {'p99 ms':>8} {'per s':>7} "
          f"{'p50/floor':>9} {'per s/raw':>9}  commits (all, per round trip), batches per commit")
    for name, raw, commit, nodes, a2a_refused in rows:
        floor = raw["p50_ms"] + COMMITS_IN_TURN * commit
        print(f"{name:<10} {'raw':<18} {raw['p50_ms']:8.2f} {raw['p99_ms']:8.2f} "
              f"{raw['per_s']:7.0f}")
        print(f"{'':<10} {'floor':<18} {floor:8.2f} {'':>8} {'':>7}  "
              f"(raw + {COMMITS_IN_TURN} x {commit:.2f} ms commit)")
        if a2a_refused and any(s.protocol == "a2a" for s in setups):
            print(f"{'':<10} {'a2a':<18} not run: {name} speaks MQTT 3.1.1 only")
        for setup, node in nodes:
            print(f"{'':<10} {setup.name:<18} {node['p50_ms']:8.2f} {node['p99_ms']:8.2f} "
                  f"{node['per_s']:7.0f} {node['p50_ms'] / floor:8.2f}x "
                  f"{node['per_s'] / raw['per_s']:8.0%}  {node['commits_per_round_trip']:.1f}, "
                  f"{node['batches_per_commit']:.1f}")
    print("bench: the reference nodes as a run has them, fsyncs and all, events kept in "
          "memory; no fsync: the same without the store's fsyncs (durability's share); "
          "+ history: every event a history line in a file, as a run writes it; + proxy: "
          "each node behind the fault proxy, as in a live run (the harness's share); a2a: "
          "the A2A-over-MQTT profile's requester and responder (MQTT 5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
