"""Metrics from a history: request latency quantiles, throughput, messages per task,
duplicates delivered versus duplicates executed. Latency is kept in a mergeable
log-bucket histogram (so matrix cells and nodes can be merged) beside exact quantiles."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from bench.core import events as ev
from bench.history import Fold, History

QUANTILES = (0.5, 0.9, 0.99)


@dataclass
class Histogram:
    """Buckets of width 2^(1/8) (≈ 9 % relative error); merge by adding counts."""

    counts: Counter[int] = field(default_factory=Counter)
    total: int = 0
    max_value: float = 0.0

    def add(self, value: float) -> None:
        self.counts[self._bucket(value)] += 1
        self.total += 1
        self.max_value = max(self.max_value, value)

    @staticmethod
    def _bucket(value: float) -> int:
        return -1 if value <= 0 else int(math.floor(8 * math.log2(value)))

    def merge(self, other: Histogram) -> Histogram:
        out = Histogram(self.counts + other.counts, self.total + other.total,
                        max(self.max_value, other.max_value))
        return out

    def quantile(self, q: float) -> float:
        if not self.total:
            return math.nan
        rank = q * (self.total - 1)
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen > rank:
                return 0.0 if bucket < 0 else 2 ** ((bucket + 0.5) / 8)
        return self.max_value

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "max": self.max_value,
                "buckets": {str(k): v for k, v in sorted(self.counts.items())}}

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Histogram:
        """A histogram as `to_json` wrote it (a cell's metrics.json, a matrix record)."""
        return Histogram(Counter({int(k): int(v) for k, v in raw["buckets"].items()}),
                         int(raw["total"]), float(raw["max"]))

    @staticmethod
    def merged(histograms: list[Histogram]) -> Histogram:
        out = Histogram()
        for h in histograms:
            out = out.merge(h)
        return out


class Quantiles(TypedDict):
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None


class FillPerNode(TypedDict):
    mean: float
    max: int


class DirectoryMetrics(TypedDict):
    nodes: int
    announcements: int
    to_fill_per_node: FillPerNode
    full_after_ms: Quantiles


class RelayMetrics(TypedDict):
    frames: int
    deliveries: int
    gaps: int
    duplicates_dropped: int
    event_latency_ms: Quantiles
    time_to_first_token_ms: Quantiles


class GateMetrics(TypedDict):
    opened: int
    decided_by_human: int
    decided_by_timeout: int
    resumed: int
    already_decided: int
    rehydrated: int
    round_trip_ms: Quantiles
    think_ms: Quantiles


class BrokerOutage(TypedDict):
    downMs: float
    upMs: float | None
    how: str
    planned: bool


class WillAfterSilence(TypedDict):
    node: str
    partitionMs: float
    willAfterMs: float | None
    #: peers whose client stayed connected through the partition: who could see a will
    peersConnected: int
    #: a partition one way only: "to_broker" (the node's packets lost) or "from_broker"
    direction: NotRequired[str]


class Metrics(TypedDict):
    """metrics.json: what `compute` measures of a run (the keys are the file's)."""

    directory: DirectoryMetrics | None
    relay: RelayMetrics | None
    gates: GateMetrics | None
    wills_after_silence: list[WillAfterSilence] | None
    broker_outages: list[BrokerOutage] | None
    requests: int
    outcomes: dict[str, int]
    latency_ms: Quantiles
    overhead_ms: Quantiles
    latency_histogram: dict[str, Any]
    throughput_per_s: float | None
    tasks_executed: int
    messages_published: int
    messages_per_task: float | None
    duplicates_delivered: int
    duplicates_dropped_by_ledger: int
    duplicates_caught_by_task_table: int
    duplicates_executed: int
    inbound_drops: dict[str, int]
    faults_fired: int


def exact_quantiles(values: list[float]) -> Quantiles:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    s = sorted(values)

    def q(p: float) -> float:
        return s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))]
    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": s[-1]}


def compute(h: History, duration_ms: float) -> Metrics:
    settled = h.of(ev.RequestSettled)
    outcomes = Counter(e.outcome for e in settled)
    # settled, as the restarted requester read back, though a kill cut the journal's record
    from bench.checks.network import restored_settled
    outcomes.update(ev.RequestOutcome(outcome)
                    for _t, outcome in h.memo(restored_settled).values())
    completed = [float(e.latency_ms) for e in settled if e.outcome == ev.RequestOutcome.COMPLETED]
    hist = Histogram()
    for v in completed:
        hist.add(v)
    executed = Counter(e.task_id for e in h.of(ev.TaskExecuted))
    published = sum(1 for e in h.of(ev.OutboundSettled) if e.state == ev.OutboundState.PUBLISHED)
    dup_drops = sum(1 for e in h.of(ev.InboundDropped) if e.reason == ev.DropReason.DUPLICATE)
    dup_requests = len(h.of(ev.TaskDuplicate))
    drops = Counter(e.reason for e in h.of(ev.InboundDropped))
    return {
        "directory": directory_metrics(h),
        "relay": relay_metrics(h),
        "gates": gate_metrics(h),
        "wills_after_silence": will_metrics(h),
        "broker_outages": broker_outages(h),
        "requests": len(h.of(ev.RequestSent)),
        "outcomes": dict(sorted(outcomes.items())),
        "latency_ms": exact_quantiles(completed),
        "overhead_ms": exact_quantiles(overhead(h)),
        "latency_histogram": hist.to_json(),
        "throughput_per_s":
        round(outcomes.get(ev.RequestOutcome.COMPLETED, 0) / (duration_ms / 1000), 3)
        if duration_ms else None,
        "tasks_executed": sum(executed.values()),
        "messages_published": published,
        "messages_per_task": round(published / len(executed), 3) if executed else None,
        "duplicates_delivered": dup_drops + dup_requests,
        "duplicates_dropped_by_ledger": dup_drops,
        "duplicates_caught_by_task_table": dup_requests,
        "duplicates_executed": sum(n - 1 for n in executed.values() if n > 1),
        "inbound_drops": dict(sorted(drops.items())),
        "faults_fired": len(h.of(ev.FaultFired)),
    }


class DirectoryFill(Fold):
    """For each node's first boot: announcements taken in, the most nodes known, and how
    many announcements and how long after its start it took to first know that many."""

    kinds = (ev.NodeStarted, ev.DirectoryUpdated)

    def __init__(self) -> None:
        self.started: dict[str, list[float]] = {}      # node -> [boots so far, first at]
        # node -> [messages so far, most known, messages when it first got there, at t]
        self.fill: dict[str, list[float]] = {}

    def step(self, e: ev.Event) -> None:
        if isinstance(e, ev.NodeStarted):
            self.started.setdefault(e.node, [0, e.t_ms])[0] += 1
            return
        assert isinstance(e, ev.DirectoryUpdated)
        boot = self.started.get(e.node)
        if boot is None or boot[0] > 1:
            return       # not the first boot
        f = self.fill.setdefault(e.node, [0, -1, 0, 0.0])
        f[0] += 1
        if e.known > f[1]:
            f[1], f[2], f[3] = e.known, f[0], e.t_ms - boot[1]


class Offline(Fold):
    """When a peer took in an announcement of a node offline: node -> [t]."""

    kinds = (ev.DirectoryUpdated,)

    def __init__(self) -> None:
        self.seen: dict[str, list[float]] = defaultdict(list)

    def step(self, e: ev.Event) -> None:
        assert isinstance(e, ev.DirectoryUpdated)
        if not e.online and e.node != e.node_id:
            self.seen[e.node_id].append(e.t_ms)


#: what the metrics read of the lines a judging pass streams (`History.read`)
FOLDS = (DirectoryFill, Offline)


def directory_metrics(h: History) -> DirectoryMetrics | None:
    """How the mesh's directories filled as it started: for each node's first boot, the
    announcements it took in until it knew as many nodes as it ever would in that boot, and
    how long after its start that was. A global directory costs every node one message per
    node (N² in all); a scoped one, one per node of the namespaces it reads."""
    fill = h.fold(DirectoryFill).fill
    if not fill:
        return None
    taken = [f[2] for f in fill.values()]
    return {"nodes": len(fill), "announcements": sum(int(f[0]) for f in fill.values()),
            "to_fill_per_node": {"mean": round(sum(taken) / len(taken), 1),
                                 "max": int(max(taken))},
            "full_after_ms": exact_quantiles([f[3] for f in fill.values()])}


def overhead(h: History) -> list[float]:
    """What the system adds to each completed request: its latency less the time its task
    ran (first executed -> first COMPLETED on the executor), so transport, queues,
    retries and restarts are compared without the workload's own task times."""
    started: dict[str, float] = {}
    for e in h.of(ev.TaskExecuted):
        started.setdefault(e.task_id, e.t_ms)
    ran: dict[str, float] = {}
    for s in h.of(ev.TaskState):
        if s.state == ev.TaskStatus.COMPLETED and s.task_id in started and s.task_id not in ran:
            ran[s.task_id] = s.t_ms - started[s.task_id]
    return [max(0.0, e.latency_ms - ran[e.request_id]) for e in h.of(ev.RequestSettled)
            if e.outcome == ev.RequestOutcome.COMPLETED and e.request_id in ran]


def broker_outages(h: History) -> list[BrokerOutage] | None:
    """When the bench's watch saw the broker go and come back (live), planned or not."""
    ups = sorted(u.t_ms for u in h.of(ev.BrokerUp))
    out = [BrokerOutage(downMs=d.t_ms, upMs=next((u for u in ups if u >= d.t_ms), None),
                        how=d.how, planned=d.planned) for d in h.of(ev.BrokerDown)]
    return out or None


def will_metrics(h: History) -> list[WillAfterSilence] | None:
    """The broker's keepalive, as the run saw it: for each node a partition silenced, how
    long after the partition began its will (the offline announcement) reached a peer —
    or that none did before the heal. MQTT 3.1.1 wants the broker to give a silent client
    up after 1.5 x its keepalive; a broker that never does keeps routing to a dead link."""
    from bench.checks.network import Transit, fault_windows
    out: list[WillAfterSilence] = []
    offline = h.fold(Offline).seen
    transit = h.memo(Transit)
    for f in h.memo(fault_windows):
        if f.fault != "partition":
            continue
        for node in f.nodes:
            will = min((t for t in offline.get(node, ()) if f.start_ms <= t < f.end_ms),
                       default=None)
            w = WillAfterSilence(
                node=node, partitionMs=round(f.end_ms - f.start_ms, 1),
                willAfterMs=None if will is None else round(will - f.start_ms, 1),
                peersConnected=len(transit.connected_throughout(node, f.start_ms, f.end_ms)))
            if f.direction != "both":
                w["direction"] = f.direction
            out.append(w)
    return out or None


def relay_metrics(h: History) -> RelayMetrics | None:
    """FLOW-RELAY: frame-to-tab latency (frame made on the executor -> pushed to a tab),
    and time to first token (request sent -> first frame of its task on any tab)."""
    frames = {(e.stream, e.stream_seq): e for e in h.of(ev.RelayFrame)}
    if not frames:
        return None
    sent = {e.request_id: e.t_ms for e in h.of(ev.RequestSent)}
    latency: list[float] = []
    first: dict[str, float] = {}
    for e in h.of(ev.RelayDelivered):
        frame = frames.get((e.stream, e.stream_seq))
        if frame is None:
            continue
        latency.append(e.t_ms - frame.t_ms)
        task = frame.task_id
        if task in sent and task not in first:
            first[task] = e.t_ms - sent[task]
    return {"frames": len(frames), "deliveries": len(h.of(ev.RelayDelivered)),
            "gaps": len(h.of(ev.RelayGap)), "duplicates_dropped": len(h.of(ev.RelayDuplicate)),
            "event_latency_ms": exact_quantiles(latency),
            "time_to_first_token_ms": exact_quantiles(list(first.values()))}


def gate_metrics(h: History) -> GateMetrics | None:
    """Human gates: the round trip the system adds — GATE_OPEN sent on the executor ->
    gate opened in the store, plus decision -> instance resumed — without the person's
    think time (opened -> decided), which is reported on its own."""
    sent = {e.gate_id: e.t_ms for e in h.of(ev.GateOpenSent)}
    if not sent:
        return None
    opened = {e.gate_id: e.t_ms for e in h.of(ev.GateOpened)}
    decided = {e.gate_id: (e.t_ms, e.decided_by) for e in h.of(ev.GateDecided)}
    resumed: dict[str, float] = {}
    for e in h.of(ev.GateResumed):
        resumed.setdefault(e.gate_id, e.t_ms)
    round_trip, think = [], []
    for gate, t0 in sent.items():
        if gate in opened and gate in decided and gate in resumed:
            t_dec, _by = decided[gate]
            round_trip.append((opened[gate] - t0) + (resumed[gate] - t_dec))
            think.append(t_dec - opened[gate])
    by = Counter(b for _t, b in decided.values())
    return {"opened": len(sent), "decided_by_human": by.get(ev.DecidedBy.HUMAN, 0),
            "decided_by_timeout": by.get(ev.DecidedBy.TIMEOUT, 0), "resumed": len(resumed),
            "already_decided": len(h.of(ev.GateAlreadyDecided)),
            "rehydrated": len(h.of(ev.InstanceRehydrated)),
            "round_trip_ms": exact_quantiles(round_trip), "think_ms": exact_quantiles(think)}
