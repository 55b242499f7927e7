"""The checkers' reading of the network, from the journal alone: when each node (or the
broker) was out, the window each fault really had, what a link fault delayed, who held a
borrowed client id, and what may have become of a message the broker accepted (`Transit`).

Every checker that must tell a loss the network explains from one it does not reads it
here; none writes its own. Judges from the history only, like every checker.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from bench.checks.terms import GIVE_UP_BOUND_KEEPALIVES, IN_FLIGHT_AT_END_MS
from bench.core.events import (
    AttackSent,
    BrokerDown,
    BrokerUp,
    Event,
    ExecutorsRegistered,
    FaultAction,
    FaultFired,
    FaultHealed,
    FaultStart,
    GateDecisionSent,
    GateOpenSent,
    InboundAdmitted,
    MessageType,
    MqttConnected,
    MqttDisconnected,
    NodeCrashed,
    OutboundSettled,
    OutboundState,
    RelaySent,
    RequestSent,
    RequestSettled,
    RequestsRestored,
    TaskState,
    TaskStatus,
)
from bench.history import History

#: Every node: an outage of the broker reaches them all.
EVERY_NODE = "*"


@dataclass(frozen=True, slots=True)
class Outage:
    """A span during which a node (or every node) could lose requests: its process down,
    its link cut or slowed, the broker down, its client id taken over."""

    node: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One scheduled fault from its start to its heal (or the end of the history), with
    the nodes it names (`nodes`, `node`, `impostor`)."""

    fault: str
    start_ms: float
    end_ms: float
    nodes: tuple[str, ...]
    #: a partition's: "both", "to_broker" (the nodes' packets lost) or "from_broker"
    direction: str = "both"

    def acts_on(self, start_ms: float, end_ms: float, *nodes: str) -> bool:
        """It was in effect at some time of [start_ms, end_ms], on one of `nodes` (a fault
        that names no node acts on every one)."""
        return self.start_ms <= end_ms and self.end_ms >= start_ms \
            and (not self.nodes or any(n in self.nodes for n in nodes))


def fault_windows(h: History) -> list[FaultWindow]:
    """Every fault the journal started, with the window it really had."""
    healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
    out = []
    for f in h.of(FaultStart):
        direction = f.params.get("direction") if isinstance(f.params, dict) else None
        out.append(FaultWindow(f.fault, f.t_ms, healed.get(f.fault_index, h.end_ms),
                               nodes_named(f.params), str(direction or "both")))
    return out


def nodes_named(params: object) -> tuple[str, ...]:
    """The nodes a fault's parameters name (`nodes`, `node`, `impostor`)."""
    if not isinstance(params, dict):
        return ()
    many = params.get("nodes")
    return tuple(map(str, [*(many if isinstance(many, list) else []),
                           *(params[k] for k in ("node", "impostor")
                             if params.get(k) is not None)]))


@dataclass(frozen=True, slots=True)
class Clocks:
    """How far each node's clock was off the bench's at any time, from the clock_skew
    faults the journal started and healed."""

    skews: tuple[tuple[str, float, float, float], ...]   # (node, from, until, offset ms)

    def off(self, node: str, t_ms: float) -> float:
        return sum(s for n, a, b, s in self.skews if n == node and a <= t_ms < b)


def clocks(h: History) -> Clocks:
    healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
    skews = []
    for f in h.of(FaultStart):
        params = f.params if isinstance(f.params, dict) else {}
        skew = params.get("skew_ms")
        if f.fault == "clock_skew" and isinstance(skew, int | float):
            skews.append((str(params.get("node")), f.t_ms, healed.get(f.fault_index, h.end_ms),
                          float(skew)))
    return Clocks(tuple(skews))


def _outages(h: History) -> list[Outage]:
    """The real outages the journal shows, node by node — a crash or a lost connection
    until the node's client is connected again, a partition or a link fault for its
    window (and, if it cost the node its connection, on until it reconnected), the broker
    from its stop to its start and, for each node, on until that node's client has
    connected again — never "from the fault to the end of the run"."""
    out: list[Outage] = []
    connects: dict[str, list[float]] = defaultdict(list)
    for m in h.of(MqttConnected):
        connects[m.node].append(m.t_ms)
    drops: dict[str, list[float]] = defaultdict(list)
    for x in h.of(MqttDisconnected):
        drops[x.node].append(x.t_ms)

    def back_after(node: str, t_ms: float) -> float:
        return next((t for t in connects[node] if t >= t_ms), h.end_ms)

    for crash in h.of(NodeCrashed):
        out.append(Outage(crash.node, crash.t_ms, back_after(crash.node, crash.t_ms)))
    for node, times in drops.items():
        out.extend(Outage(node, t, back_after(node, t)) for t in times)

    for f in h.memo(fault_windows):
        if f.fault in LINK_FAULTS:
            for node in f.nodes:
                # a connection the fault killed is back only once the node reconnected
                lost = any(f.start_ms <= t <= f.end_ms for t in drops[node])
                end = back_after(node, f.end_ms) if lost else f.end_ms
                if f.fault == "loss":   # what it lost is sent again, and the rest waits
                    end = max(end, _drained(h, node, f.end_ms))
                out.append(Outage(node, f.start_ms, end))
        elif f.fault == "duplicate_client_id":
            out.extend(Outage(node, f.start_ms, f.end_ms) for node in f.nodes)
    stops = broker_stops(h)
    starts = [e.t_ms for e in h.of(FaultFired) if e.action == FaultAction.BROKER_STARTED]
    # the bench's watch of the broker, planned or not (live: its process, or a probe client)
    stops += [e.t_ms for e in h.of(BrokerDown)]
    starts = sorted([*starts, *(e.t_ms for e in h.of(BrokerUp))])
    for stop in stops:
        start = next((t for t in starts if t >= stop), h.end_ms)
        out.append(Outage(EVERY_NODE, stop, start))
        for node in connects:
            # a node's client is back only once it has reconnected, after its backoff
            out.append(Outage(node, stop, back_after(node, start)))
    return out


def _round_trips(h: History) -> dict[str, list[tuple[float, float]]]:
    """node -> (sent, acknowledged) of each message it published: a request, a relayed
    frame, a gate message (their sent events) or a task's response (sent when the task
    ended)."""
    acked = {o.message_id: o.t_ms for o in h.of(OutboundSettled)
             if o.state == OutboundState.PUBLISHED}
    answered = {(o.node, o.request_id): o.t_ms for o in h.of(OutboundSettled)
                if o.state == OutboundState.PUBLISHED
                and o.message_type == MessageType.TASK_RESPONSE}
    trips: dict[str, list[tuple[float, float]]] = defaultdict(list)
    sends: list[RequestSent | RelaySent | GateOpenSent | GateDecisionSent] = [
        *h.of(RequestSent), *h.of(RelaySent), *h.of(GateOpenSent), *h.of(GateDecisionSent)]
    for s in sends:
        if s.message_id in acked:
            trips[s.node].append((s.t_ms, acked[s.message_id]))
    for t in h.of(TaskState):
        if (t.node, t.task_id) in answered and t.state in (TaskStatus.COMPLETED, TaskStatus.FAILED):
            trips[t.node].append((t.t_ms, answered[(t.node, t.task_id)]))
    return trips


def _highest_ms(spec: object) -> float:
    """The most a latency fault's `latency_ms` (bench.spec.distribution) draws, near enough:
    a fixed value, a uniform's high, an exponential's 7 means or a lognormal's median times
    e^(3 sigma) (each past its 99.8th percentile)."""
    if isinstance(spec, int | float):
        return float(spec)
    if not isinstance(spec, dict):
        return 0.0
    p = {k: float(v) for k, v in spec.items() if isinstance(v, int | float)}
    match spec.get("dist"):
        case "fixed":
            return p.get("value", 0.0)
        case "uniform":
            return p.get("high", 0.0)
        case "exponential":
            return 7 * p.get("mean", 0.0)
        case "lognormal":
            return p.get("median", 0.0) * math.exp(3 * p.get("sigma", 0.0))
    return 0.0


def _drained(h: History, node: str, healed_ms: float) -> float:
    """When `node`'s connection had caught up after a loss ended at `healed_ms`: TCP
    retransmits what was lost in order, so what is sent later waits behind it — until
    the first message sent after the heal is acknowledged, or TCP gave up."""
    done = [acked for sent, acked in h.memo(_round_trips)[node] if sent >= healed_ms]
    return float(min([*done, healed_ms + TCP_GIVE_UP_MS, h.end_ms]))


def held_until(h: History, w: FaultWindow, node: str) -> float:
    """Until when fault `w` may hold back what `node` sends or is sent: its heal, or for a
    lossy link the moment its connection caught up with what it lost (_drained): TCP
    retransmits in order, so what is sent after the heal waits behind it."""
    return _drained(h, node, w.end_ms) if w.fault == "loss" else w.end_ms


#: Faults on the nodes' links (DESIGN §6): the nodes named lose or delay what crosses them.
#: Faults that silence or slow a node's traffic for their window (a frozen node too).
LINK_FAULTS = frozenset({"partition", "latency", "loss", "pause"})


#: What a fault that stopped, crashed or killed the broker says it did.
BROKER_DOWN = frozenset(a for a in FaultAction if a.broker_down)


def broker_stops(h: History) -> list[float]:
    """When a fault stopped, crashed or killed the broker."""
    return [e.t_ms for e in h.of(FaultFired) if e.action in BROKER_DOWN]


#: How long after the broker accepted a PUBLISH its PUBACK is back at the publisher, at
#: most, on a link no fault slows (a loopback or LAN round trip, with room for a busy host).
PUBACK_WITHIN_MS = 250.0
#: How long a segment can stay in TCP's retransmission loop before the connection is given
#: up: a timeout of 200 ms doubling up to 60 s (RFC 6298), 15 retransmissions (Linux's
#: tcp_retries2) — about 462 s. A connection delivers in order, so a message sent behind
#: such a segment, even after the loss ended, may arrive that late (head-of-line blocking).
TCP_GIVE_UP_MS = sum(min(200.0 * 2 ** k, 60_000.0) for k in range(15))


#: A broker discards an expired session when it next looks (Mosquitto: on the whole second).
SESSION_EXPIRY_SLACK_MS = 1_500.0


@dataclass(frozen=True, slots=True)
class Away:
    """A node's client between two connections under one client id on MQTT 5, the second
    asking to resume (clean start 0): the session the first asked to keep `expiry_ms`
    after its close, which the broker made at the earliest `closed_from_ms` and at the
    latest `closed_by_ms` — at once for a killed process (the kernel closes its socket),
    within the give-up bound of a silent one."""

    node: str
    before: MqttConnected
    back: MqttConnected
    expiry_ms: float
    closed_from_ms: float
    closed_by_ms: float

    @property
    def must_have_expired(self) -> bool:
        return self.back.t_ms - self.closed_by_ms > self.expiry_ms + SESSION_EXPIRY_SLACK_MS

    @property
    def may_have_expired(self) -> bool:
        return self.back.t_ms - self.closed_from_ms >= self.expiry_ms - SESSION_EXPIRY_SLACK_MS


def _aways(h: History, outages: list[Outage]) -> dict[str, list[Away]]:
    """node -> each time its MQTT 5 client was away and asked for its session back. Not
    counted: a broker down meanwhile (what it kept is its restart's business), and a
    reconnect with no loss recorded before it (the bench replaced the client)."""
    losses: dict[str, list[tuple[float, bool]]] = defaultdict(list)   # (t, killed)
    for x in h.of(NodeCrashed):
        losses[x.node].append((x.t_ms, True))
    for d in h.of(MqttDisconnected):
        losses[d.node].append((d.t_ms, False))
    broker = [o for o in outages if o.node == EVERY_NODE]
    last: dict[tuple[str, str], MqttConnected] = {}
    out: dict[str, list[Away]] = defaultdict(list)
    for m in sorted(h.of(MqttConnected), key=lambda e: e.seq):
        key = (m.node, m.client_id)
        before, last[key] = last.get(key), m
        if before is None or before.session_expiry_s is None or not m.session_expiry_s \
                or before.keepalive_s is None:
            continue     # 3.1.1, a clean start, or a keepalive not known
        lost = sorted(t for t in losses[m.node] if before.t_ms <= t[0] <= m.t_ms)
        if not lost or any(o.start_ms <= m.t_ms and o.end_ms >= before.t_ms for o in broker):
            continue
        t, killed = lost[0]
        silent = [f.start_ms for f in h.memo(fault_windows) if f.fault in LINK_FAULTS
                  and m.node in f.nodes and f.start_ms <= t <= f.end_ms]
        bound = GIVE_UP_BOUND_KEEPALIVES * before.keepalive_s * 1000.0
        if killed and not silent:
            closed = (t, t + PUBACK_WITHIN_MS)
        else:
            closed = (min([t - bound, *silent]) if not killed else min(silent), t + bound)
        out[m.node].append(Away(m.node, before, m, before.session_expiry_s * 1000.0,
                                max(closed[0], before.t_ms), closed[1]))
    return out


class Transit:
    """What the network may have done with a message the broker accepted, from the
    journal alone: lost it with a broker that forgot its sessions, handed it to another
    node holding the target's client id, or still be carrying it when the run ended (the
    target cut off, or its connection retransmitting what a lossy link lost — the message
    itself or, in order behind it, whatever was sent earlier)."""

    #: Reasons that leave the message's fate open (UNKNOWN), not explained.
    UNDECIDED = frozenset({"target_out_until_end", "retransmitting_over_a_lossy_link"})

    def __init__(self, h: History) -> None:
        self.h = h
        self.end_ms = h.end_ms
        # a restart that keeps nothing: one asked for (persistence = false), or a broker
        # that keeps no session over a restart (amqtt, rumqttd, ejabberd as the bench
        # configures them: its stop says so, `brokerPersistence`), or one whose keeping is
        # unknown (a broker by URL, restarted by the user's command)
        self.wipes = [0.0] + sorted(
            [f.t_ms for f in h.of(FaultStart) if f.fault == "broker_restart"
             and isinstance(f.params, dict) and not f.params.get("persistence", True)]
            + [f.t_ms for f in h.of(FaultFired) if f.action in BROKER_DOWN
               and isinstance(f.details, dict)
               and f.details.get("brokerPersistence") in ("none", "unknown")])
        self.subscribed: dict[str, list[float]] = defaultdict(list)   # SUBACKs of inboxes
        for r in h.of(ExecutorsRegistered):
            self.subscribed[r.node].append(r.t_ms)
        self.connects: dict[str, list[float]] = defaultdict(list)
        for m in h.of(MqttConnected):
            self.connects[m.node].append(m.t_ms)
        self.hijacked = taken_over(h)
        self.outages = _outages(h)
        self.aways = _aways(h, self.outages)
        self.published = {o.message_id: o.t_ms for o in h.of(OutboundSettled)
                          if o.state == OutboundState.PUBLISHED}
        self.crashes: dict[str, list[float]] = defaultdict(list)
        for x in h.of(NodeCrashed):
            self.crashes[x.node].append(x.t_ms)
        # the duplicate-client-id fault gives its impostor a new client (under the stolen
        # id) at its start, and another (its own again) at its heal
        self.replaced: dict[str, list[float]] = defaultdict(list)
        healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
        for start in h.of(FaultStart):
            impostor = start.params.get("impostor") if isinstance(start.params, dict) else None
            if start.fault == "duplicate_client_id" and isinstance(impostor, str):
                self.replaced[impostor] += [start.t_ms, *(
                    [healed[start.fault_index]] if start.fault_index in healed else [])]
        self.lossy: dict[str, list[tuple[float, float]]] = defaultdict(list)
        #: node -> (start, end) of each latency fault on its link, and how late it makes a
        #: PUBACK at most (there and back at the fault's highest latency)
        self.delayed: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        for f in h.memo(fault_windows):
            if f.fault == "loss":
                for node in f.nodes:
                    self.lossy[node].append((f.start_ms, f.end_ms))
        for start in h.of(FaultStart):
            params = start.params if isinstance(start.params, dict) else {}
            if start.fault == "latency":
                lag = 2 * _highest_ms(params.get("latency_ms"))
                named = params.get("nodes")
                for who in named if isinstance(named, list) else []:
                    self.delayed[str(who)].append(
                        (start.t_ms, healed.get(start.fault_index, h.end_ms), lag))

    def connected_throughout(self, node: str, start_ms: float, end_ms: float) -> list[str]:
        """The peers of `node` whose own client was connected from before `start_ms` and
        stayed so until `end_ms`: those a will published in between would have reached."""
        return [peer for peer, connects in self.connects.items()
                if peer != node and any(t <= start_ms for t in connects)
                and not any(o.node in (peer, EVERY_NODE) and o.start_ms <= end_ms
                            and o.end_ms >= start_ms for o in self.outages)]

    def died_with_sender(self, sender: str, t_ms: float, message_id: str) -> bool:
        """The message, sent at `t_ms`, never got its PUBACK and its sender crashed after
        sending it: what its client still held died with the process."""
        return message_id not in self.published and any(t >= t_ms for t in self.crashes[sender])

    def dropped_with_its_client(self, sender: str, t_ms: float, message_id: str) -> bool:
        """The message, sent at `t_ms`, never got its PUBACK and the bench replaced its
        sender's MQTT client after sending it: what the old client held went with it."""
        return message_id not in self.published and any(t >= t_ms for t in self.replaced[sender])

    def stuck_at_sender(self, sender: str, t_ms: float, message_id: str) -> bool:
        """The message, sent at `t_ms`, never got its PUBACK, and its sender's link was
        losing packets then (or had not caught up since): it may still be in the sender's
        TCP retransmission queue, or behind what is."""
        return message_id not in self.published and any(
            start <= t_ms <= _drained(self.h, sender, end) for start, end in self.lossy[sender])

    def out_between(self, node: str, from_ms: float, to_ms: float) -> bool:
        """`node` (or the broker) was out the whole time from `from_ms` to `to_ms`."""
        return any(o.node in (node, EVERY_NODE) and o.start_ms <= from_ms and o.end_ms >= to_ms
                   for o in self.outages)

    def out_until_end(self, node: str, t_ms: float) -> bool:
        """`node` (or the broker) went out around `t_ms` and was still out at the end: what
        it was sending or being sent then may still be on its way."""
        return any(o.node in (node, EVERY_NODE) and o.end_ms >= self.end_ms
                   and o.start_ms <= t_ms + IN_FLIGHT_AT_END_MS for o in self.outages)

    def cut_off_until_end(self, node: str, t_ms: float) -> bool:
        """From about `t_ms` to the end `node` may have heard nothing from the broker: it
        was out, or behind a lossy link its connection had not caught up from."""
        return self.out_until_end(node, t_ms) or any(
            start <= t_ms and _drained(self.h, node, end) >= self.end_ms - IN_FLIGHT_AT_END_MS
            for start, end in self.lossy[node])

    def lost(self, publisher: str, t_ms: float, target: str) -> str | None:
        """Why a message `publisher` had acknowledged at `t_ms` may never have reached
        `target` (a count key), or None: nothing in the journal explains a loss."""
        # the broker took it in at the earliest when the publisher's connection came up (and,
        # unless a lossy link slowed the PUBACK, at most PUBACK_WITHIN_MS before it); the
        # target's subscription took effect again at the latest at its SUBACK. A broker
        # starts with no subscription.
        connected = max([t for t in self.connects[publisher] if t <= t_ms], default=0.0)
        slowed_since = min([start for start, end in self.lossy[publisher]
                            if start <= t_ms <= _drained(self.h, publisher, end)],
                           default=t_ms)
        # a latency fault on its link held the PUBACK back up to its highest delay there and
        # back (explore, seed 29 run 2: acknowledged 1 s after the target subscribed again)
        lag = max([lag for start, end, lag in self.delayed[publisher]
                   if start <= t_ms <= end + lag], default=0.0)
        accepted_from = max(connected, min(slowed_since, t_ms - lag) - PUBACK_WITHIN_MS)
        # (a target that never subscribed again is not excused: that is a mute receiver)
        for w in self.wipes:
            resubscribed = next((s for s in self.subscribed[target] if s >= w), -math.inf)
            if (w and t_ms <= w) or accepted_from <= resubscribed:
                return "lost_with_non_persistent_broker" if w else "sent_before_the_target_subscribed"
        # MQTT 5: a session that expired while its node was away took what it queued and
        # held in flight with it, and nothing routes to the node until it subscribes again
        for a in self.aways[target]:
            if not a.back.session_present and a.may_have_expired:
                resubscribed = next((s for s in self.subscribed[target] if s >= a.back.t_ms),
                                    -math.inf)
                if a.closed_from_ms - IN_FLIGHT_AT_END_MS <= t_ms and accepted_from <= resubscribed:
                    return "lost_with_an_expired_session"
        # what the session still held unacknowledged when it was taken over goes to the
        # new holder too: a message accepted just before the takeover may be among it, and
        # so may one queued for a target that was out from then until the takeover
        if any(start <= t_ms + IN_FLIGHT_AT_END_MS and t_ms <= end + IN_FLIGHT_AT_END_MS
               or (start > t_ms and self.out_between(target, t_ms, start))
               for start, end in self.hijacked[target]):
            return "lost_to_client_id_takeover"
        if self.out_until_end(target, t_ms):
            return "target_out_until_end"
        if any(start <= t_ms and _drained(self.h, target, end) >= accepted_from
               for start, end in self.lossy[target]):
            return "retransmitting_over_a_lossy_link"   # or queued behind what is
        return None


def tampered(h: History) -> set[str]:
    """The requestIds whose replyNodeId a man in the middle rewrote (tamper_headers)."""
    return {a.request_id for a in h.of(AttackSent)
            if a.attack == "tamper_headers" and a.request_id}


def redirected(h: History) -> dict[tuple[str, str], float]:
    """(node, address) -> when the node first admitted a request whose replyNodeId a man in
    the middle had rewritten to that address, an address that is no node. Everything the
    node then sends for that request (its answer, its stream, its gate) goes there, as
    the request told it to: the attack's doing, not the node's."""
    rewritten = h.memo(tampered)
    nodes = h.nodes
    out: dict[tuple[str, str], float] = {}
    for i in h.of(InboundAdmitted):
        if i.request_id in rewritten and i.reply_node_id and i.reply_node_id not in nodes:
            out.setdefault((i.node, i.reply_node_id), i.t_ms)
    return out


def ghosts(h: History) -> set[str]:
    """The node ids a ghost_announcement fault announced: no node's, and nobody's inbox."""
    return {str(f.details["ghost"]) for f in h.of(FaultFired)
            if f.fault == "ghost_announcement" and isinstance(f.details, Mapping)
            and f.details.get("ghost")}


def sent_where_redirected(h: History, node: str, address: str | None, t_ms: float) -> bool:
    """Whether `node` sent to `address` at `t_ms` because a man in the middle had given it
    that address (see redirected)."""
    since = h.memo(redirected).get((node, address or ""))
    return since is not None and since <= t_ms


def taken_over(h: History) -> dict[str, list[tuple[float, float]]]:
    """node -> the spans during which another node was connected with its client id, or it
    with another's. MQTT delivers to a client id, not to a node: meanwhile what reaches
    either node may be consumed by the other — the takeover's doing, which the deployment
    checker flags as the cause. A span ends when the borrower's connection does; what is
    lost after that (a broker that mixed the sessions up for good) is not excused."""
    owners = {cid: n for n, cid in h.client_ids.items()}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    borrowing: dict[str, tuple[str, float]] = {}      # borrower -> (owner, since)

    def close(node: str, t_ms: float) -> None:
        if node in borrowing:
            owner, since = borrowing.pop(node)
            spans[owner].append((since, t_ms))
            spans[node].append((since, t_ms))

    events: list[Event] = sorted([*h.of(MqttConnected), *h.of(MqttDisconnected)],
                                 key=lambda e: e.seq)
    for e in events:
        close(e.node, e.t_ms)
        if isinstance(e, MqttConnected):
            owner = owners.get(e.client_id)
            if owner is not None and owner != e.node:
                borrowing[e.node] = (owner, e.t_ms)
    for node in list(borrowing):
        close(node, h.end_ms)
    return spans


def settled(h: History) -> dict[tuple[str, str], list[RequestSettled]]:
    """(node, request) -> every settlement its requester journaled."""
    found: dict[tuple[str, str], list[RequestSettled]] = defaultdict(list)
    for e in h.of(RequestSettled):
        found[(e.node, e.request_id)].append(e)
    return found


def restored_settled(h: History) -> dict[tuple[str, str], tuple[float, str]]:
    """(node, request) -> (when, outcome) for each settlement a restarted requester read
    back (requests_restored) that its journal never showed: written, then a kill cut the
    record, which follows the write."""
    journaled = settled(h)
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for r in h.of(RequestsRestored):
        for request_id, outcome in r.settled.items():
            key = (r.node, request_id)
            if key not in journaled:
                out.setdefault(key, (r.t_ms, outcome))
    return out
