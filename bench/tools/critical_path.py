"""`python -m bench.tools.critical_path`: where one sequential live round trip waits, step by step.

The live benchmark's "bench" row (an orchestrator node asks an executor node for a
zero-length task, on Mosquitto or amqtt, both nodes on one event loop) with a stamp at each
step of the path: a node's core handling an input, its group commit and the durable commit
inside it, paho's publish, write and read. A CPU profile says what the process is busy
with; this says what a round trip waits for in turn, including another node's work queued
ahead of it on the shared loop. The gaps between stamps are summed per round trip by what
ran in them (the category of the step each gap begins with), and printed as medians over
the round trips; the shares' medians need not add up to the whole's. The stamps cost some
microseconds each: the round trip is slower than the benchmark's, its shares are what to read.
A measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.core.inputs import TaskRequested
from bench.storage.files import FileTransaction
from bench.substrates.live import host, mqtt
from bench.substrates.live.brokers import make_broker
from bench.tools import Parser, machine
from bench.tools.benchmark import SETUPS, bench_round_trips

Stamp = tuple[float, str]


def _wrap(cls: type, name: str, label: Callable[[Any], str], out: list[Stamp],
          on: list[bool]) -> None:
    orig = getattr(cls, name)

    def stamped(self: Any, *args: Any, **kwargs: Any) -> Any:
        if on[0]:
            out.append((time.perf_counter(), label(self, *args) + ">"))
        try:
            return orig(self, *args, **kwargs)
        finally:
            if on[0]:
                out.append((time.perf_counter(), label(self, *args) + "<"))
    setattr(cls, name, stamped)


#: What ran in the gap that begins at a stamp (its label's end), as the table says it
def category(start: str) -> str:
    if start == "txn.commit>":
        return "durable commits (in the floor)"
    if ".feed:PublishSettled>" in start:
        return "a PUBACK's handling (queued ahead of the path)"
    if ".feed:" in start and start.endswith(">"):
        return "the cores' handling of an input"
    if start.endswith(".write>"):
        return "paho writing (the socket's send)"
    if start.endswith(".read>"):
        return "paho reading and parsing"
    if start.endswith(".publish>"):
        return "paho publish (the packet built and queued)"
    if start == "txn.commit<":
        return "carrying out a committed batch"
    return "the loop and the network between steps"


async def measure(broker_name: str, n: int, warmup: int) -> list[list[Stamp]]:
    stamps: list[Stamp] = []
    on = [False]
    _wrap(host.LiveHost, "_commit_group", lambda s, *_a: f"{s.node_id}.commit_group",
          stamps, on)
    _wrap(FileTransaction, "commit", lambda _s: "txn.commit", stamps, on)
    _wrap(mqtt.MqttLink, "_readable", lambda s: f"{s.client_id}.read", stamps, on)
    _wrap(mqtt.MqttLink, "_writable", lambda s: f"{s.client_id}.write", stamps, on)
    _wrap(mqtt.MqttLink, "publish", lambda s, *_a: f"{s.client_id}.publish", stamps, on)
    feed = host.LiveHost.feed
    asked = [0]

    def fed(self: host.LiveHost, event: Any) -> None:
        if isinstance(event, TaskRequested):       # each round trip begins here
            asked[0] += 1
            on[0] = warmup < asked[0] <= warmup + n
            if on[0]:
                stamps.append((time.perf_counter(), "START"))
        if on[0]:
            stamps.append((time.perf_counter(), f"{self.node_id}.feed:{type(event).__name__}>"))
        feed(self, event)
        if on[0]:
            stamps.append((time.perf_counter(), f"{self.node_id}.feed:{type(event).__name__}<"))
    host.LiveHost.feed = fed  # type: ignore[method-assign]
    work = Path(tempfile.mkdtemp(prefix="a2a-bench-path-"))
    broker = make_broker(broker_name, work / "broker")
    broker.start()
    try:
        await bench_round_trips(broker, work / "run", warmup + n, 1, 0.01, SETUPS[0])
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    trips: list[list[Stamp]] = []
    for t, label in stamps:
        if label == "START":
            trips.append([])
        if trips:
            trips[-1].append((t, label))
    return [cut for trip in trips[:-1] if (cut := _settled(trip))]


def _settled(trip: list[Stamp], asker: str = "orch-1") -> list[Stamp] | None:
    """The round trip up to the commit that settles it: the asker's group commit after it
    handled the answer (what follows — a PUBACK read, the next request — is off its path)."""
    answered = False
    for i, (_t, label) in enumerate(trip):
        answered = answered or label == f"{asker}.feed:MessageReceived<"
        if answered and label == f"{asker}.commit_group<":
            return trip[:i + 1]
    return None


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m bench.tools.critical_path", description=__doc__.split("\n\n")[1])
    ap.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto")
    ap.add_argument("--n", type=int, default=500, help="round trips stamped (default 500)")
    ap.add_argument("--warmup", type=int, default=300,
                    help="round trips run first, unstamped (a fresh store's log grows)")
    args = ap.parse_args(argv)
    if args.n < 10 or args.warmup < 0:
        ap.error("--n must be at least 10 and --warmup at least 0")
    if (line := machine.note("before")) is not None:
        print(line)
    trips = asyncio.run(measure(args.broker, args.n, args.warmup))
    spans = [trip[-1][0] - trip[0][0] for trip in trips]
    by: dict[str, list[float]] = defaultdict(list)
    for trip in trips:
        acc: dict[str, float] = defaultdict(float)
        for (t0, label), (t1, _next) in zip(trip, trip[1:], strict=False):
            acc[category(label)] += t1 - t0
        for k, v in acc.items():
            by[k].append(v)
    whole = statistics.median(spans) * 1e6
    print(f"{len(trips)} round trips on {args.broker}, the median of each share:")
    for k, v in sorted(by.items(), key=lambda kv: -statistics.median(kv[1])):
        m = statistics.median(v) * 1e6
        print(f"{m:8.0f} us {100 * m / whole:5.0f} %  {k}")
    print(f"{whole:8.0f} us        the round trip (its request handled to its settlement "
          "committed)")
    if (line := machine.note("after")) is not None:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
