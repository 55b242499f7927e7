"""A simpy model of an MQTT 3.1.1 broker, with the semantics the seeds' failures need:
QoS0/QoS1, persistent and clean sessions (on MQTT 5 ending with their expiry interval),
in-flight redelivery with DUP on reconnect,
retained messages, Last Will, overlapping subscriptions, session takeover on a duplicate
client id, keepalive enforcement, and a stop that keeps sessions only with persistence.

Where brokers differ, it does what its row of `bench.spec.brokers.BEHAVIOURS` says (a
copy per filter or per client; whose will a takeover publishes; wills on a graceful
stop; when a silent client is closed; whether a resumed session gets its in-flight
messages again; whether anything survives a restart), so a simulation predicts a broker.

The broker never looks inside payloads: duplicates are counted by the nodes, by
messageId, never by the DUP flag (DESIGN §10).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bench.core import events as ev
from bench.core.frozen import quick_init_module, replace
from bench.core.properties import Props
from bench.spec.brokers import CLIENT, RUN_AFTER_BROKER_MS, BrokerBehaviour, TakeoverWill
from bench.spec.distribution import Distribution
from bench.substrates.filters import FilterTree, matches
from bench.substrates.sim.link import Link
from bench.substrates.sim.timers import Lane, SimEnvironment


@dataclass(frozen=True, slots=True)
class Message:
    topic: str
    payload: bytes
    qos: int
    retain: bool = False
    #: MQTT 5 PUBLISH properties, forwarded unchanged (None: none, or MQTT 3.1.1)
    props: Props | None = None
    #: the broker's own: when the Message Expiry Interval it came with runs out
    expires_at_ms: float | None = None


class Client(Protocol):
    """The host side of a connection: what the broker calls."""

    def on_deliver(self, conn: Connection, msg: Message, pid: int, dup: bool) -> None: ...
    def on_connection_lost(self, conn: Connection, reason: str) -> None: ...


@dataclass(eq=False)
class Connection:
    client_id: str
    client: Client
    link: Link
    clean_session: bool
    will: Message | None
    label: str = ""          # which of the host's connections ("primary", "second", ...)
    owner: str = ""          # the node that opened it
    alive: bool = True
    established: bool = False   # the broker accepted it (CONNACK): publishing may begin
    #: a graceful close at this time: what the broker wrote before it still arrives (FIN)
    flushed_at: float | None = None
    #: the client's keepalive clock: its last packet in from, and out to, the broker
    last_in_ms: float = 0.0
    last_out_ms: float = 0.0
    watched: bool = False      # the client is already timing its silence
    #: when the last packet sent each way ("up" to the broker, "down" to the client)
    #: arrives: TCP delivers in order, so no packet overtakes one sent before it
    last_up_ms: float | None = None
    last_down_ms: float | None = None
    #: the packets in flight each way, in their order (`Lane`: the simulator's queue holds
    #: the first of each)
    up_lane: Lane = field(default_factory=Lane)
    down_lane: Lane = field(default_factory=Lane)
    #: MQTT 5: the CONNECT's Session Expiry Interval (s); None: MQTT 3.1.1, where a
    #: persistent session never expires
    session_expiry_s: int | None = None
    #: MQTT 5: the will's Will Delay Interval (s)
    will_delay_s: int = 0

    def transit_ms(self, now: float, direction: str) -> float | None:
        """Delay of a packet sent now in `direction`, or None if it is lost with the link:
        the link's latency, but never arriving before a packet sent earlier the same way
        (head-of-line blocking: a retransmitted segment holds back those behind it)."""
        delay = self.link.transit_ms(direction)
        if delay is None:
            return None
        at = now + delay
        if direction == "up":
            last = self.last_up_ms
            if last is not None and last > at:
                at = last
            self.last_up_ms = at
        else:
            last = self.last_down_ms
            if last is not None and last > at:
                at = last
            self.last_down_ms = at
        return at - now


@dataclass(eq=False)
class Session:
    client_id: str
    clean: bool
    subscriptions: dict[str, int] = field(default_factory=dict)
    inflight: dict[int, Message] = field(default_factory=dict)
    queued: list[Message] = field(default_factory=list)
    conn: Connection | None = None
    #: its place in the broker's sessions (their dict order, which routing follows)
    order: int = 0
    #: MQTT 5: when the session ends unless a connection resumes it (None: never)
    expires_at_ms: float | None = None
    #: packet ids of the copies the qos1_redelivery fault sent: their PUBACK ends them (a
    #: copy re-sent again and again would be a storm: with probability 1, forever)
    fault_copies: set[int] = field(default_factory=set)


@dataclass
class Redelivery:
    """The qos1_redelivery fault: after a PUBACK, re-send the message with DUP anyway
    (EMQX-style delayed redelivery), with a probability, after a delay. A delivery is
    re-sent once at most: the copy's own PUBACK ends it."""

    probability: float
    delay_ms: Distribution
    rng: random.Random
    index: int
    only_client: str | None = None
    fired: int = 0


class SimBroker:
    def __init__(self, env: SimEnvironment, *, behaviour: BrokerBehaviour,
                 record: Callable[[ev.Event], None]) -> None:
        self.env = env
        self.behaviour = behaviour
        self.record = record
        self.sessions: dict[str, Session] = {}
        self.retained: dict[str, Message] = {}
        self.up = True
        # a broker's periodic sweeps count from its start, which precedes the nodes' and
        # the workload's (at 0) as live
        self.started_ms = self._start_second(env.now - RUN_AFTER_BROKER_MS)
        self.redelivery: Redelivery | None = None
        #: Observers of every accepted PUBLISH (an attacker subscribed to everything).
        self.taps: list[Callable[[Message], None]] = []
        #: A man in the middle on a host's link (the node's side, as the live proxy sits):
        #: rewrites what reaches that host, whatever client id it connected with.
        self.mitm: dict[Client, Callable[[Message], Message]] = {}
        self._pids = itertools.count(1)
        # topic -> [(session, granted qos of each matching filter)]; cleared on any change
        # of subscriptions, which happens at connect time, not per message.
        self._routes: dict[str, list[tuple[Session, list[int]]]] = {}
        # filter -> the sessions subscribed to it: a route looks at the filters that can
        # match, not at every session (at 10,000 nodes a scan per publish was the run)
        self._exact: dict[str, dict[Session, None]] = {}
        self._wild: dict[str, dict[Session, None]] = {}
        self._wild_tree = FilterTree()     # `_wild`'s filters, by level
        self._orders = itertools.count(1)
        # MQTT 5 shared subscriptions: (group, filter) -> its members in subscription order,
        # and whose turn is next ($share/{group}/{filter}: each message to one member)
        self._shared: dict[tuple[str, str], dict[Session, None]] = {}
        self._turns: dict[tuple[str, str], int] = {}
        # retained topics by their parent (`a/b` for `a/b/c`): a `a/b/+` filter finds its own
        self._retained_under: dict[str, set[str]] = {}
        self.stats = {"published": 0, "delivered": 0, "redelivered": 0, "queued": 0,
                      "dropped_offline_qos0": 0, "takeovers": 0, "wills": 0,
                      "lost_on_resume": 0, "sessions_expired": 0, "expired_undelivered": 0,
                      "wills_delayed": 0}

    # -- connections ------------------------------------------------------------------------
    def connect(self, conn: Connection) -> bool:
        """Accept a connection; returns session_present. Raises nothing: a down broker is
        reported to the client as a lost connection."""
        if not self.up:
            conn.alive = False
            conn.client.on_connection_lost(conn, "broker down")
            return False
        session = self.sessions.get(conn.client_id)
        if session is not None and session.conn is not None and session.conn is not conn:
            old = session.conn
            self.stats["takeovers"] += 1
            self.record(ev.SessionTakeover(conn.client_id, old.owner, conn.owner))
            self._drop(old, "session taken over by a new connection with the same client id",
                       publish_will=False)
            whose = self.behaviour.takeover_will
            will = {TakeoverWill.OLD: old.will, TakeoverWill.NEW: conn.will}.get(whose)
            if will is not None:
                self.stats["wills"] += 1
                self.publish(will)
            self.record(ev.TakeoverWill(conn.client_id, old.owner, conn.owner,
                                        ev.TakeoverWillOf(whose.value) if will is not None
                                        else ev.TakeoverWillOf.NONE))
        if conn.clean_session or session is None or session.clean:
            present = session is not None and not conn.clean_session and not session.clean
            session = Session(conn.client_id, conn.clean_session)
            self._put_session(session)
        else:
            present = True
        session.conn = conn
        conn.established = True
        if present:  # MQTT 3.1.1 §4.4: resend unacknowledged QoS1 with DUP, then the queue
            if not self.behaviour.resends_on_resume:
                self.stats["lost_on_resume"] += len(session.inflight)
                session.inflight.clear()
                session.fault_copies.clear()
            for pid, msg in sorted(session.inflight.items()):
                self.stats["redelivered"] += 1
                if self.behaviour.resends_under_new_ids:   # a seeded defect
                    del session.inflight[pid]
                    old, pid = pid, next(self._pids)
                    session.inflight[pid] = msg
                    if old in session.fault_copies:  # the mark follows the copy's new id
                        session.fault_copies.discard(old)
                        session.fault_copies.add(pid)
                self._transmit(session, conn, msg, pid,
                               dup=not self.behaviour.resends_under_new_ids)
            queued, session.queued = session.queued, []
            for msg in queued:
                self._deliver(session, msg)
        return present

    def disconnect(self, conn: Connection, graceful: bool) -> None:
        self._drop(conn, "client disconnected" if graceful else "connection lost",
                   publish_will=not graceful, notify=False)

    def _drop(self, conn: Connection, reason: str, *, publish_will: bool, notify: bool = True) -> None:
        if not conn.alive:
            return
        conn.alive = False
        session = self.sessions.get(conn.client_id)
        if session is not None and session.conn is conn:
            session.conn = None
            if session.clean or conn.session_expiry_s == 0:
                self._remove_session(session)
            elif conn.session_expiry_s is not None:
                session.expires_at_ms = self.env.now + conn.session_expiry_s * 1000.0
                if not self.behaviour.resumes_expired_sessions:     # else a seeded defect
                    self.env.later(conn.session_expiry_s * 1000.0, self._expire, session)
        if publish_will and conn.will is not None and self.up:
            v5 = self.behaviour.v5
            if conn.will_delay_s and v5 is not None and v5.will_delay:
                self._will_later(conn)
            else:
                self.stats["wills"] += 1
                self.publish(conn.will)
        if notify:
            conn.client.on_connection_lost(conn, reason)

    def _will_later(self, conn: Connection) -> None:
        """MQTT 5 §3.1.3.2.2: the will waits its Will Delay Interval (or the end of the
        session, if sooner), and is not sent if the client connected again meanwhile."""
        delay_s = conn.will_delay_s if conn.session_expiry_s is None \
            else min(conn.will_delay_s, conn.session_expiry_s)
        self.stats["wills_delayed"] += 1

        def due() -> None:
            session = self.sessions.get(conn.client_id)
            back = session is not None and session.conn is not None and session.conn.alive
            if not back and self.up and conn.will is not None:
                self.stats["wills"] += 1
                self.publish(conn.will)
        self.env.later(delay_s * 1000.0, due)

    def _expire(self, session: Session) -> None:
        """MQTT 5 §4.1: a session whose connection closed its Session Expiry Interval ago
        is discarded, with its subscriptions and what it queued (unless a connection
        resumed it meanwhile)."""
        if self.sessions.get(session.client_id) is session and session.conn is None \
                and session.expires_at_ms is not None and self.env.now >= session.expires_at_ms:
            self.stats["sessions_expired"] += 1
            self._remove_session(session)

    def subscribe(self, conn: Connection, filters: tuple[str, ...], qos: int) -> None:
        session = self.sessions.get(conn.client_id)
        if session is None or session.conn is not conn or not self.up:
            return  # the connection died before its SUBSCRIBE arrived; it re-subscribes
        plain = []
        for f in filters:
            session.subscriptions[f] = qos
            shared = _shared_key(f)
            if shared is not None:    # no retained message on a shared subscription (§4.8.2)
                self._shared.setdefault(shared, {})[session] = None
            else:
                index = self._index(f)
                if f not in index and index is self._wild:
                    self._wild_tree.add(f)
                index.setdefault(f, {})[session] = None
                plain.append(f)
        self._routes.clear()
        for topic in self._retained_matching(tuple(plain)):
            msg = self.retained[topic]
            self._deliver(session, Message(topic, msg.payload, min(msg.qos, qos), True,
                                           msg.props, msg.expires_at_ms))

    def unsubscribe(self, conn: Connection, filters: tuple[str, ...]) -> None:
        session = self.sessions.get(conn.client_id)
        if session is None or session.conn is not conn or not self.up:
            return
        for f in filters:
            if session.subscriptions.pop(f, None) is not None:
                self._unindex(session, f)
        self._routes.clear()

    # -- the indexes routing reads ----------------------------------------------------------
    def _put_session(self, session: Session) -> None:
        """A new session under its client id: in the old one's place in the order (a dict
        keeps a replaced key where it was), else last."""
        old = self.sessions.get(session.client_id)
        if old is not None:
            for f in old.subscriptions:
                self._unindex(old, f)
        session.order = old.order if old is not None else next(self._orders)
        self.sessions[session.client_id] = session
        self._routes.clear()

    def _remove_session(self, session: Session) -> None:
        for f in session.subscriptions:
            self._unindex(session, f)
        del self.sessions[session.client_id]
        self._routes.clear()

    def _index(self, topic_filter: str) -> dict[str, dict[Session, None]]:
        return self._wild if "+" in topic_filter or "#" in topic_filter else self._exact

    def _unindex(self, session: Session, topic_filter: str) -> None:
        shared = _shared_key(topic_filter)
        if shared is not None:
            members = self._shared.get(shared)
            if members is not None:
                members.pop(session, None)
                if not members:
                    del self._shared[shared]
            return
        index = self._index(topic_filter)
        subscribed = index.get(topic_filter)
        if subscribed is not None:
            subscribed.pop(session, None)
            if not subscribed:
                del index[topic_filter]
                if index is self._wild:
                    self._wild_tree.discard(topic_filter)

    def _retain(self, msg: Message) -> None:
        parent = msg.topic.rpartition("/")[0]
        if msg.payload:
            self.retained[msg.topic] = msg
            self._retained_under.setdefault(parent, set()).add(msg.topic)
        elif self.retained.pop(msg.topic, None) is not None:
            self._retained_under[parent].discard(msg.topic)

    def _retained_matching(self, filters: tuple[str, ...]) -> list[str]:
        """The retained topics any of `filters` matches, sorted."""
        found: set[str] = set()
        for f in filters:
            parent, _, last = f.rpartition("/")
            if "+" not in f and "#" not in f:
                if f in self.retained:
                    found.add(f)
            elif last == "+" and parent and "+" not in parent and "#" not in parent:
                found |= self._retained_under.get(parent, set())
            else:
                found |= {t for t in self.retained if matches(f, t)}
        return sorted(found)

    # -- messages ---------------------------------------------------------------------------
    def refusal(self, msg: Message) -> int | None:
        """The MQTT 5 PUBACK reason code this broker refuses a client's QoS 1 PUBLISH with
        (not routing it), or None: it takes it."""
        v5 = self.behaviour.v5
        if v5 is not None and v5.refuses_dollar_publishes and msg.topic.startswith("$"):
            return 0x87     # Not authorized: a seeded defect for the profile
        return None

    def publish(self, msg: Message) -> int:
        """Route one accepted PUBLISH; returns how many sessions it matched (on MQTT 5 a
        PUBACK says 0x10 "no matching subscribers" when none did)."""
        if not self.up:
            return 0
        self.stats["published"] += 1
        v5 = self.behaviour.v5
        if msg.props is not None and v5 is not None and not v5.properties_kept:
            # a seeded defect: the reply path lost on the way ([MQTT-3.3.2-15], -16)
            msg = replace(msg, props=replace(msg.props, response_topic=None,
                                             correlation_data=None))
        if msg.props is not None and msg.props.message_expiry_s is not None \
                and v5 is not None and v5.message_expiry:
            msg = Message(msg.topic, msg.payload, msg.qos, msg.retain, msg.props,
                          self.env.now + msg.props.message_expiry_s * 1000.0)
        for tap in list(self.taps):
            tap(msg)
        if msg.retain:
            self._retain(msg)
        route = self._route(msg.topic)
        # one copy per QoS it goes out with, shared by the sessions (a Message is frozen):
        # an announcement goes to every node of a global directory
        copy_at: dict[int, Message] = {}
        for session, granted in route:
            copies = granted if self.behaviour.copy_per_filter else [max(granted)]
            for q in copies:
                qos = min(msg.qos, q)
                copy = copy_at.get(qos)
                if copy is None:
                    copy = copy_at[qos] = Message(msg.topic, msg.payload, qos, False, msg.props,
                                                  msg.expires_at_ms)
                self._deliver(session, copy)
        return len(route) + (self._share(msg) if self._shared else 0)

    def _share(self, msg: Message) -> int:
        """MQTT 5 §4.8.2: to one member of each shared group whose filter matches, members
        in turn, a connected one before one that is away (whose session queues it). Returns
        how many groups took it."""
        v5 = self.behaviour.v5
        if v5 is None or not v5.shared or (msg.topic.startswith("$")
                                           and not v5.shared_on_dollar_topics):
            return 0
        took = 0
        for key, members in self._shared.items():
            if not matches(key[1], msg.topic):
                continue
            ring = list(members)
            if v5.shared_to_every_member:       # the seeded defect: a copy each
                for m in ring:
                    self._deliver(m, Message(msg.topic, msg.payload, min(
                        msg.qos, m.subscriptions[f"$share/{key[0]}/{key[1]}"]), False,
                        msg.props, msg.expires_at_ms))
                took += 1
                continue
            start = self._turns.get(key, 0) % len(ring)
            order = ring[start:] + ring[:start]
            chosen = next((m for m in order if m.conn is not None and m.conn.alive), order[0])
            self._turns[key] = ring.index(chosen) + 1
            granted = chosen.subscriptions[f"$share/{key[0]}/{key[1]}"]
            self._deliver(chosen, Message(msg.topic, msg.payload, min(msg.qos, granted), False,
                                          msg.props, msg.expires_at_ms))
            took += 1
        return took

    def _route(self, topic: str) -> list[tuple[Session, list[int]]]:
        route = self._routes.get(topic)
        if route is None:
            candidates = dict(self._exact.get(topic, {}))
            matched = {topic} if candidates else set()    # the filters that match it
            for f in self._wild_tree.matching(topic):
                candidates.update(self._wild[f])
                matched.add(f)
            route = []
            for session in sorted(candidates, key=lambda s: s.order):
                granted = [q for f, q in session.subscriptions.items() if f in matched]
                if granted:
                    route.append((session, granted))
            self._routes[topic] = route
        return route

    def _deliver(self, session: Session, msg: Message) -> None:
        if msg.expires_at_ms is not None and msg.props is not None:
            left_ms = msg.expires_at_ms - self.env.now
            if left_ms <= 0:     # [MQTT-3.3.2-5]: past its expiry, not sent on
                self.stats["expired_undelivered"] += 1
                return
            msg = Message(msg.topic, msg.payload, msg.qos, msg.retain,
                          msg.props.expiring_in(-int(-left_ms // 1000)), msg.expires_at_ms)
        conn = session.conn
        if conn is None or not conn.alive:
            if msg.qos >= 1 and not session.clean:
                session.queued.append(msg)
                self.stats["queued"] += 1
            else:
                self.stats["dropped_offline_qos0"] += 1
            return
        pid = next(self._pids)
        if msg.qos >= 1:
            session.inflight[pid] = msg
        self._transmit(session, conn, msg, pid, dup=False)

    def _transmit(self, session: Session, conn: Connection, msg: Message, pid: int, dup: bool) -> None:
        delay = conn.transit_ms(self.env.now, "down")
        if delay is None:
            # lost; still in flight, resent when the client reconnects. A link that is up
            # lost it only because TCP gave up retransmitting: that connection is dead.
            if conn.link.up:
                self._drop(conn, "connection lost: TCP gave up retransmitting",
                           publish_will=True)
            return
        self.stats["delivered"] += 1
        sent_at = self.env.now
        self.env.later_in(conn.down_lane, delay, self._arrive, conn, msg, pid, dup, sent_at)

    def _arrive(self, conn: Connection, msg: Message, pid: int, dup: bool, sent_at: float) -> None:
        if conn.alive and self.up or (conn.flushed_at is not None and sent_at <= conn.flushed_at):
            mitm = self.mitm.get(conn.client)
            conn.client.on_deliver(conn, mitm(msg) if mitm else msg, pid, dup)

    def puback(self, conn: Connection, pid: int) -> None:
        session = self.sessions.get(conn.client_id)
        if session is None or session.conn is not conn or not self.up:
            return  # acknowledges a delivery of a dead connection: it stays in flight
        msg = session.inflight.pop(pid, None)
        if pid in session.fault_copies:    # the fault's own copy: delivered once, at most
            session.fault_copies.discard(pid)
            return
        r = self.redelivery
        if msg is not None and r is not None and (r.only_client in (None, conn.client_id)) \
                and r.rng.random() < r.probability:
            r.fired += 1
            delay = r.delay_ms.sample(r.rng)
            self.record(ev.FaultFired("qos1_redelivery", r.index, "redelivered", {
                "clientId": conn.client_id, "topic": msg.topic, "delayMs": round(delay, 3)}))
            self.env.later(delay, lambda: self._redeliver(session, msg))

    def _redeliver(self, session: Session, msg: Message) -> None:
        pid = next(self._pids)
        session.inflight[pid] = msg
        session.fault_copies.add(pid)
        conn = session.conn
        if conn is not None and conn.alive and self.up:
            self.stats["redelivered"] += 1
            self._transmit(session, conn, msg, pid, dup=True)

    def _start_second(self, now_ms: float) -> float:
        check = self.behaviour.keepalive_close
        return now_ms if check is None else check.started_ms(now_ms)

    def silent(self, conn: Connection, still: Callable[[], bool], *, notify: bool) -> None:
        """The client of `conn` went silent (its link cut, or its process frozen): while
        `still()` holds, the broker closes the connection, and publishes its will, when its
        keepalive enforcement says — or never. The client hears of it (`notify`) unless
        the close cannot reach it (a partition: no FIN crosses)."""
        check = self.behaviour.keepalive_close
        if check is None:
            return
        # the broker times the silence from the last packet it got: the client's last
        # publish, or the PINGREQ an idle client sends every keepalive after it
        ka, now = CLIENT.keepalive_s * 1000.0, self.env.now
        last = conn.last_out_ms + max(0.0, (now - conn.last_out_ms) // ka) * ka
        after = max(0.0, check.close_at_ms(last, CLIENT.keepalive_s, self.started_ms) - now)

        def expire() -> None:
            if conn.alive and still():
                self._drop(conn, "keepalive expired at the broker", publish_will=True,
                           notify=notify)
        self.env.later(after, expire)

    def cut(self, client: Client) -> int:
        """Every connection of `client` reset (the fault proxy's heal): wills published,
        the client told by its own side. Returns how many the broker still had."""
        conns = [s.conn for s in self.sessions.values()
                 if s.conn is not None and s.conn.client is client and s.conn.alive]
        for conn in conns:
            self._drop(conn, "connection reset", publish_will=True, notify=False)
        return len(conns)

    # -- broker faults ----------------------------------------------------------------------
    def crash(self, persistence: bool, graceful: bool = False) -> None:
        """The broker stops: killed, every connection is gone (no wills: the broker is
        dead); stopped gracefully, it first publishes the wills of every connection if its
        row says so, and what it wrote before closing a connection still reaches the client."""
        if graceful and self.behaviour.wills_on_shutdown:
            for session in list(self.sessions.values()):
                conn = session.conn
                if conn is not None and conn.will is not None:
                    self.stats["wills"] += 1
                    self.publish(conn.will)
        for session in list(self.sessions.values()):
            conn = session.conn
            if conn is not None:
                if graceful:
                    conn.flushed_at = self.env.now
                self._drop(conn, "broker stopped" if graceful else "broker crashed",
                           publish_will=False)
        self.up = False
        if not (persistence and self.behaviour.persistent):
            self.sessions.clear()
            self._exact.clear()
            self._wild.clear()
            self._wild_tree = FilterTree()
            self.retained.clear()
            self._retained_under.clear()
        self._routes.clear()

    def start(self) -> None:
        self.up = True
        self.started_ms = self._start_second(self.env.now)


def _shared_key(topic_filter: str) -> tuple[str, str] | None:
    """(group, filter) of a shared subscription `$share/{group}/{filter}`, else None."""
    if not topic_filter.startswith("$share/"):
        return None
    _, group, inner = topic_filter.split("/", 2)
    return group, inner


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
