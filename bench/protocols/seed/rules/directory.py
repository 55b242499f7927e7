"""Directory liveness and deployment red lines (DESIGN §3 Directory and roster; seed 000 §3.3,
seed 002 §3.1, §11.1)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from bench.checks import Checker, Collector, rule
from bench.checks.network import Transit, fault_windows
from bench.checks.terms import DEFAULT_EXECUTOR, GIVE_UP_BOUND_KEEPALIVES
from bench.core.events import (
    AttackSent,
    Connected,
    DirectoryUpdated,
    Event,
    ExecutorsRegistered,
    FaultFired,
    FaultStart,
    InboundAdmitted,
    InboundDropped,
    MessageType,
    MqttConnected,
    MqttDisconnected,
    NodeCrashed,
    NodeStarted,
    NodeWarning,
    OutboundSettled,
    OutboundState,
    RequestSent,
    RosterLoaded,
    RunStarted,
    SessionTakeover,
    TakeoverWill,
    TakeoverWillOf,
    WarningKind,
)
from bench.history import Fold, History
from bench.protocols.seed.rules.inbound import drops


@rule("DESIGN §3: an empty roster still registers a default executor; seed 000 §3.3 (C3)")
def no_mute_receiver(h: History, c: Collector) -> None:
    """Every node that connects registers at least one executor: none is online but
    handling nothing."""
    c.count("boots", len(h.of(NodeStarted)))
    for e in h.of(ExecutorsRegistered):
        c.count("registrations")
        if e.registered < 1:
            c.violation(f"{e.node} is connected with {e.registered} executors: a mute "
                        "receiver", e)


@rule("seed 002 §11.3: executors registered: N / N")
def registers_all_expected(h: History, c: Collector) -> None:
    """A node registers every executor it expected to."""
    for e in h.of(ExecutorsRegistered):
        if e.registered >= 1 and e.registered != e.expected:
            c.violation(f"{e.node} registered {e.registered} of {e.expected} executors", e)


@rule("DESIGN §3: a namespace switch rotates the roster file; seed 000 §2.3")
def roster_of_own_namespace(h: History, c: Collector) -> None:
    """A roster holds only agents of the node's own namespace (a switch that kept the old
    roster announces two sets of executors)."""
    for e in h.of(RosterLoaded):
        ns = h.namespace_at(e.node, e.seq)
        foreign = [a for a in e.agents if a != DEFAULT_EXECUTOR and a.split(".", 1)[0] != ns]
        if foreign:
            c.violation(f"{e.node} (namespace {ns!r}) registered foreign executors {foreign}", e)


class Directories(Fold):
    """Every node's directory, rebuilt from the announcements it recorded receiving and its
    own roster since it last started, and what the rules need of it: what it held at each
    UNDELIVERABLE and at each clear, and each node's last online announcement. (A global
    directory's announcements are N² lines: judging streams them through here.)"""

    kinds = (NodeStarted, RosterLoaded, ExecutorsRegistered, DirectoryUpdated, NodeWarning,
             RequestSent, OutboundSettled)

    def __init__(self) -> None:
        self.view: dict[str, dict[str, tuple[str, ...]]] = defaultdict(dict)
        #: node -> agent -> the entries of its directory that list the agent (the view,
        #: indexed: a 100,000-node history asked it a scan of the whole view per request)
        self._listing: dict[str, dict[str, set[str]]] = defaultdict(dict)
        self._agents: dict[tuple[str, ...], tuple[str, ...]] = {}   # one copy of each list
        #: every clear, and whether that node's directory had the entry then
        self.clears: list[tuple[DirectoryUpdated, bool]] = []
        #: every UNDELIVERABLE naming an agent, and the entries that listed it then
        self.undeliverable: list[tuple[NodeWarning, list[str]]] = []
        #: the UNDELIVERABLEs where only offline entries of nodes never announced online to
        #: anyone listed the agent (a gone node's retained announcement: W-DIR-5)
        self.ghosts_only: set[int] = set()
        #: node -> agent -> the holder it saw online that then announced itself offline
        self.went_offline: dict[str, dict[str, str]] = defaultdict(dict)
        #: node -> the line of the latest announcement of it online
        self.last_online: dict[str, int] = {}
        #: every request published to a node, and the entries that listed its agent when
        #: it was asked for and when it went out
        self.routed: list[tuple[OutboundSettled, set[str], set[str]]] = []
        self._asked: dict[str, tuple[set[str], set[str]]] = {}
        self._queueable: dict[str, set[str]] = {}   # request -> offline entries, when asked
        #: node -> the entries of its directory announced offline
        self.offline: dict[str, set[str]] = defaultdict(set)
        #: node -> when a peer took in an offline announcement of it the broker published
        #: as it happened (its will, or its own), not a retained one
        self.wills: dict[str, list[float]] = defaultdict(list)
        #: the messages published to an entry the sender's directory listed their agent on
        #: only offline, while it had not seen the agent's holder go offline: queued as
        #: W-DIR-5 says (the entry may be a ghost the sender cannot tell from a node away)
        self.queued_offline: set[int] = set()

    def _shared(self, agents: Iterable[str]) -> tuple[str, ...]:
        key = tuple(agents)
        return self._agents.setdefault(key, key)

    def step(self, e: Event) -> None:
        match e:
            case NodeStarted():
                self.view[e.node].clear()
                self._listing[e.node].clear()
                self.offline[e.node].clear()
                self.went_offline[e.node].clear()
            case RosterLoaded() | ExecutorsRegistered():
                self._put(e.node, e.node, self._shared(e.agents))
            case DirectoryUpdated() if e.cleared:
                self.clears.append((e, e.node_id in self.view[e.node]))
                self.offline[e.node].discard(e.node_id)
                own = self._pop(e.node, e.node_id)
                if e.node_id == e.node and own is not None:
                    # its own entry cleared: it announces itself again at once, and knows
                    # itself from then as it did from its start (its roster)
                    self._put(e.node, e.node, own)
            case DirectoryUpdated():
                was = self.view[e.node].get(e.node_id)
                if not e.online and was and e.node_id not in self.offline[e.node]:
                    for agent in was:        # a holder this node saw online went offline
                        self.went_offline[e.node][agent] = e.node_id
                elif e.online and self.went_offline[e.node]:
                    for agent in e.agents:
                        self.went_offline[e.node].pop(agent, None)
                self._put(e.node, e.node_id, self._shared(e.agents))
                if e.online:
                    self.last_online[e.node_id] = e.seq
                    self.offline[e.node].discard(e.node_id)
                else:
                    self.offline[e.node].add(e.node_id)
                    if e.node != e.node_id and not e.retain:
                        self.wills[e.node_id].append(e.t_ms)
            case NodeWarning() if e.what is WarningKind.UNDELIVERABLE and e.to_agent_id:
                held = self._holders(e.node, e.to_agent_id)
                self.undeliverable.append((e, sorted(held)))
                if held and e.to_agent_id in self.went_offline[e.node] \
                        and all(n in self.offline[e.node] and n not in self.last_online
                                for n in held):
                    self.ghosts_only.add(e.seq)
            case RequestSent() if not e.target_node_id:   # a node named: not the directory's
                held = self._holders(e.node, e.to_agent_id)
                self._asked[e.message_id] = (held, held - self.offline[e.node])
                if e.to_agent_id not in self.went_offline[e.node]:   # resolved now, sent soon
                    self._queueable[e.message_id] = held & self.offline[e.node]
            case OutboundSettled() if e.state == OutboundState.PUBLISHED and e.to_agent_id:
                if e.target_node_id in self._queueable.pop(e.message_id, ()) or (
                        e.target_node_id in self.offline[e.node]
                        and e.to_agent_id in self.view[e.node].get(e.target_node_id, ())
                        and e.to_agent_id not in self.went_offline[e.node]):
                    self.queued_offline.add(e.seq)
                if e.message_type == MessageType.TASK_REQUEST and e.message_id in self._asked:
                    held, online = self._asked.pop(e.message_id)
                    now = self._holders(e.node, e.to_agent_id)
                    self.routed.append((e, held | now, online | (now - self.offline[e.node])))

    def _holders(self, node: str, agent: str) -> set[str]:
        """The entries of `node`'s directory that list `agent` (a set of its own)."""
        return set(self._listing[node].get(agent, ()))

    def _put(self, node: str, holder: str, agents: tuple[str, ...]) -> None:
        self._pop(node, holder)
        self.view[node][holder] = agents
        listing = self._listing[node]
        for agent in agents:
            listing.setdefault(agent, set()).add(holder)

    def _pop(self, node: str, holder: str) -> tuple[str, ...] | None:
        agents = self.view[node].pop(holder, None)
        if agents is not None:
            listing = self._listing[node]
            for agent in agents:
                holders = listing.get(agent)
                if holders is not None:
                    holders.discard(holder)
                    if not holders:
                        del listing[agent]
        return agents


@rule("DESIGN §3 Outbound: UNDELIVERABLE only when the directory has no entry for the agent")
def undeliverable_only_when_unknown(h: History, c: Collector) -> None:
    """A node calls a message for an agent undeliverable only when no entry of its
    directory — rebuilt here from the announcements it recorded receiving, and its own
    roster, since it last started — lists the agent (an offline entry still resolves:
    the broker queues for it), or the node it saw hosting the agent online has gone
    offline and only offline entries of nodes nobody ever saw online list it (W-DIR-5: a
    gone node's retained announcement, a ghost, whose inbox nobody reads). Otherwise it
    had the address and did not use it. (A
    response, and a task's relayed stream, go only where its request's replyNodeId says:
    never resolved through the directory.)
    A cleared entry's record says truly whether that directory had it. A node whose own
    entry is cleared knows itself again at once: it announces itself anew."""
    by_reply_node = {o.message_id for o in h.of(OutboundSettled)
                 if o.message_type in (MessageType.TASK_RESPONSE, MessageType.FLOW_EVENT)}
    seen = h.fold(Directories)
    cases: list[tuple[Event, bool | list[str]]] = sorted(
        [*seen.clears, *seen.undeliverable], key=lambda case: case[0].seq)
    for e, had in cases:
        match e:
            case DirectoryUpdated():
                c.count("clears")
                if e.was_known is not None and e.was_known != had:
                    c.violation(f"{e.node} recorded the clear of {e.node_id}'s entry as "
                                f"was_known={e.was_known}, but its directory "
                                f"{'had' if had else 'had no such'} entry", e)
            case NodeWarning() if e.message_id not in by_reply_node:
                c.count("undeliverable")
                if had and e.seq in seen.ghosts_only:
                    c.count("only_entries_never_seen_online_listed_it")
                elif had:
                    c.violation(f"{e.node} called {e.message_id} for {e.to_agent_id} "
                                f"undeliverable, but its directory had it on {had}", e)


@rule("DESIGN §3 Outbound; docs/PROTOCOL.md W-DIR-4, W-DIR-5: a request goes to an entry "
      "listing its agent, an online one over an offline one")
def routed_to_a_listed_entry(h: History, c: Collector) -> None:
    """A request resolved through the directory goes to a node whose entry, in the
    requester's directory when it asked or when it sent, lists the agent — never to one
    whose entry was cleared or withdrawn (a directory that forgets a node but keeps its
    agents resolvable sends to where nobody announced them), never to a node that never
    announced it; and where an entry online lists it, to an online one (W-DIR-5: online
    announcers win), not to a gone node's offline entry that sorts later. A request the
    workload addressed explicitly (targetNodeId) is its own."""
    for o, holders, online in h.fold(Directories).routed:
        if o.target_node_id is None:
            continue
        c.count("routed")
        if o.target_node_id not in holders:
            c.violation(f"{o.node} sent {o.message_id} for {o.to_agent_id} to "
                        f"{o.target_node_id}, which no entry of its directory listed it under "
                        f"({', '.join(sorted(holders)) or 'none did'})", o)
        elif online and o.target_node_id not in online:
            c.violation(f"{o.node} sent {o.message_id} for {o.to_agent_id} to "
                        f"{o.target_node_id}, announced offline, while {', '.join(sorted(online))} "
                        "listed it online", o)


@rule("DESIGN §3 Directory: a node online is announced; seed 000 §3.3 (the mute receiver)")
def announced_again_after_a_clear(h: History, c: Collector) -> None:
    """When someone clears a running node's retained announcement, the node announces
    itself again: otherwise it is online, subscribed and unknown to every peer for the rest
    of the run. Judged when a peer or the node itself recorded the clear; a node down from
    then to the end, or a clear in the last seconds, is not; one cut off from the broker
    from then to the end (it may never have heard of the clear) is undecided."""
    late = h.end_ms - 3_000
    transit = h.memo(Transit)
    crashes = transit.crashes
    seen = h.fold(Directories)
    refusing = [f for f in h.memo(fault_windows) if f.fault == "puback_refused"]
    judged: set[tuple[str, float]] = set()
    cleared_before: set[tuple[str, str]] = set()     # (peer, node) a clear reached
    for e, _ in seen.clears:
        again = e.dup and (e.node, e.node_id) in cleared_before
        cleared_before.add((e.node, e.node_id))
        if again:
            # a QoS1 redelivery of a clear already recorded (the broker's re-send, maybe
            # delayed past the node's new announcement): the same clear, judged at its first
            # copy; a peer may be left with a stale directory, not the node unannounced
            c.count("clear_redelivered")
            continue
        if not h.boots(e.node_id):
            continue                   # no node of the run: a gone node's entry, cleared
        if e.t_ms > late:
            continue
        crash = min((t for t in crashes[e.node_id] if t >= e.t_ms - 1_000), default=None)
        if crash is not None and not any(b.t_ms > crash for b in h.boots(e.node_id)):
            continue                   # down from about then to the end
        key = (e.node_id, round(e.t_ms / 1_000))
        if key in judged:
            continue
        judged.add(key)
        c.count("cleared")
        if seen.last_online.get(e.node_id, 0) > e.seq:
            continue
        if transit.cut_off_until_end(e.node_id, e.t_ms):
            c.unknown("cleared_while_cut_off_until_the_end")
        elif any(e.node_id in f.nodes and f.start_ms <= e.t_ms <= f.end_ms for f in refusing):
            # the broker may have refused the new announcement (a PUBACK failure the node
            # does not track: it announces once); whether it tried is not in the journal
            c.unknown("cleared_while_a_fault_refused_its_publishes")
        else:
            c.violation(f"{e.node_id}'s announcement was cleared (seen by {e.node}) and "
                        "never announced again: online, unknown to its peers", e)


@rule("seed 002 §11.1 red line 1: node ids and MQTT client ids unique per node")
def unique_client_ids(h: History, c: Collector) -> None:
    """No MQTT client id is used by two nodes."""
    users: dict[str, set[str]] = defaultdict(set)
    first: dict[tuple[str, str], Event] = {}
    for s in h.of(NodeStarted):
        users[s.client_id].add(s.node)
        first.setdefault((s.client_id, s.node), s)
    for m in h.of(MqttConnected):
        users[m.client_id].add(m.node)
        first.setdefault((m.client_id, m.node), m)
    for client_id, nodes in sorted(users.items()):
        c.count("client_ids")
        if len(nodes) > 1:
            evidence = [first[(client_id, n)] for n in sorted(nodes)]
            takeovers = [e for e in h.of(SessionTakeover) if e.client_id == client_id]
            c.violation(f"client id {client_id!r} used by {sorted(nodes)} "
                        f"({len(takeovers)} session takeovers)", *evidence, *takeovers[:3])


@rule("seed 002 §11.1 red line 1: a node connects under the client id it was given")
def connects_under_its_client_id(h: History, c: Collector) -> None:
    """Each node says it runs, and connects, under the MQTT client id its deployment gave
    it (a topology's client_id, an isolated run's suffix; else its node id): one that
    falls back to its node id meets the session of another run on a shared broker, or of
    another deployment's node of the same name. Judged from the run's first event (the
    bench's record of what it configured), not from the node's."""
    started = h.of(RunStarted)
    if not started or started[0].client_ids is None:
        return
    given = started[0].client_ids
    events: list[NodeStarted | Connected] = [*h.of(NodeStarted), *h.of(Connected)]
    for e in events:
        want = given.get(e.node, e.node)
        c.count("connections" if isinstance(e, Connected) else "boots")
        if e.client_id != want:
            c.violation(f"{e.node} {'connected' if isinstance(e, Connected) else 'started'} "
                        f"as client id {e.client_id!r}; its deployment gave it {want!r}", e)


@rule("MQTT 3.1.1 §3.1.2.10 [MQTT-3.1.2-24]: a client silent 1.5 x its keepalive is given up")
def gives_up_a_silent_client(h: History, c: Collector) -> None:
    """A node a partition silenced (its connection open, no byte reaching the broker) is
    given up by the broker — it closes the connection as if the network had failed and
    publishes the node's will, which its peers take in as it happens — within 1.5 x the
    keepalive the node's CONNECT asked for (allowed: up to twice that, for a broker that
    checks in sweeps). A broker that never does keeps routing to a dead link: requests
    queue for a node that cannot take them, and nobody is told it is gone. A will that
    comes only after the bound is no give-up: the heal resets the connection, and the will
    a broker publishes then was seen live in the same millisecond the heal was journaled,
    inside the fault's window (amqtt 0.12, which never times a client out). Undecided
    where the silence was shorter than the bound, the keepalive is not recorded, or no
    peer stayed connected through the bound to see a will (all of them cut off too). Not
    judged: a node down when the partition began (no connection to give up), and a
    partition that cut only the broker's way (`from_broker`: the node is heard, and no
    broker need give up a client it hears)."""
    seen = h.fold(Directories)
    transit = h.memo(Transit)
    for f in h.memo(fault_windows):
        if f.fault != "partition":
            continue
        if f.direction == "from_broker":
            c.count("still_heard")
            continue
        for node in f.nodes:
            connects = [m for m in h.of(MqttConnected) if m.node == node and m.t_ms <= f.start_ms]
            keepalive = connects[-1].keepalive_s if connects else None
            if not keepalive:
                c.unknown("keepalive_not_recorded")
                continue
            if any(f.start_ms <= t <= f.end_ms for t in transit.crashes[node]):
                continue                   # the node itself went; its will says nothing here
            if max((t for t in transit.crashes[node] if t <= f.start_ms), default=-1.0) \
                    >= connects[-1].t_ms:
                # down when the partition began (its connection, and its will, went with the
                # crash): no connection for the broker to give up (explore, seed 24 run 1812)
                c.count("down_when_silenced")
                continue
            bound = GIVE_UP_BOUND_KEEPALIVES * keepalive * 1000.0
            wills = [t for t in seen.wills.get(node, ()) if f.start_ms <= t <= f.end_ms]
            if any(t <= f.start_ms + bound for t in wills):
                c.count("given_up")
                continue
            if f.end_ms - f.start_ms < bound:
                c.unknown("silence_shorter_than_the_give_up_bound")
                continue
            if not transit.connected_throughout(node, f.start_ms, f.start_ms + bound):
                c.unknown("no_peer_connected_to_see_the_will")   # all cut off, or down
                continue
            late = (f" (its will came only {(min(wills) - f.start_ms) / 1000:.1f} s in)"
                    if wills else ": no will reached a peer")
            c.violation(f"{node} was silent for {(f.end_ms - f.start_ms) / 1000:.1f} s (a "
                        f"partition) and the broker did not give it up within "
                        f"{bound / 1000:g} s{late} ([MQTT-3.1.2-24]: after 1.5 x its "
                        f"keepalive of {keepalive} s)",
                        *[e for e in h.of(FaultStart) if e.t_ms == f.start_ms][:1])


@rule("MQTT 3.1.1 §4.4 [MQTT-4.4.0-1], §3.3.1.1 [MQTT-3.3.1-1]: a re-delivery is the same "
      "packet, with DUP")
def redelivers_the_same_packet(h: History, c: Collector) -> None:
    """A message a node got on one connection and gets again on a later one that resumed
    the same session is the broker re-sending what was unacknowledged: it MUST come under
    the original packet identifier, with DUP=1. Recognised by the message itself (its
    sender published it once), whatever its packet id: a broker that re-sends under new
    ids with DUP=0 hands the client ten "new" messages, and a rule keyed on the packet id
    never sees a re-delivery at all. Not judged: copies of a second connection, the
    bench's replays, a sender's own re-send (it lost its connection before its PUBACK),
    and nodes a qos1_redelivery fault re-sends to after their PUBACK."""
    second = {f.node for f in h.of(FaultFired) if f.fault == "double_subscription"}
    resent: set[str] = set()
    everyone = False
    for f in h.of(FaultStart):
        params = f.params if isinstance(f.params, dict) else {}
        if f.fault == "qos1_redelivery" and params.get("method", "redeliver") == "redeliver":
            node = params.get("node")
            everyone |= node is None
            resent.add(str(node))
    attacked = {a.message_id for a in h.of(AttackSent)}
    settled: dict[str, OutboundSettled] = {}
    for o in h.of(OutboundSettled):
        settled.setdefault(o.message_id, o)
    losses: dict[str, list[float]] = defaultdict(list)
    for x in [*h.of(MqttDisconnected), *h.of(NodeCrashed)]:
        losses[x.node].append(x.t_ms)
    connection: dict[str, tuple[int, str, bool]] = {}
    first: dict[tuple[str, str], tuple[int, str, InboundAdmitted | InboundDropped]] = {}
    timeline: list[MqttConnected | InboundAdmitted | InboundDropped] = sorted(
        [*h.of(MqttConnected), *h.of(InboundAdmitted), *drops(h)],
        key=lambda e: e.seq)
    for e in timeline:
        if isinstance(e, MqttConnected):
            number = connection.get(e.node, (0, "", False))[0] + 1
            connection[e.node] = (number, e.client_id, e.session_present)
            continue
        if e.packet_id is None or not e.qos or e.message_id is None or e.node in second \
                or e.message_id in attacked:
            continue
        number, client_id, present = connection.get(e.node, (0, "", False))
        was = first.setdefault((e.node, e.message_id), (number, client_id, e))
        if was[0] == number or was[1] != client_id or not present:
            continue   # the same connection, another client id, or a session begun anew
        if was[2].packet_id == e.packet_id:
            c.count("redelivered_as_the_same_packet")    # its DUP: qos1_delivery judges it
            continue
        sent = settled.get(e.message_id)
        # its sender lost its connection before the broker's PUBACK reached it (settled
        # later, or never: it crashed first — explore, seed 27 run 153) and sent it again
        sender = sent.node if sent is not None else next(
            (x.origin_node_id for x in (was[2], e)
             if isinstance(x, InboundAdmitted) and x.origin_node_id), None)
        until = sent.t_ms if sent is not None else e.t_ms
        if sender is not None and any(was[2].t_ms - 5_000 <= t <= until
                                      for t in losses[sender]):
            c.count("sender_resent")
            continue
        if everyone or e.node in resent:
            c.count("resent_by_a_redelivery_fault")
            continue
        c.violation(f"{e.node} got {e.message_id} again on its resumed session ({client_id}, "
                    f"connection {number}) as packet {e.packet_id} with DUP={int(bool(e.dup))}; "
                    f"it came as packet {was[2].packet_id} on connection {was[0]}: a re-delivery "
                    "reuses the packet id, with DUP=1", was[2], e)


@rule("MQTT 5 §4.1 [MQTT-4.1.0-2], §3.1.2.11.2: a session past its Session Expiry Interval "
      "is discarded")
def expired_session_not_resumed(h: History, c: Collector) -> None:
    """A node away from the broker longer than the Session Expiry Interval its CONNECT
    asked for finds no session when it comes back (sessionPresent=0): the broker MUST have
    discarded it, with its subscriptions and what it queued. A broker that resumes it
    anyway (MQTTnet 4.2 did: dotnet/MQTTnet#1756) hands the node messages past their
    session's end, and tells it that subscriptions it never renewed still hold. Away is
    counted from the latest the broker can have closed the connection: at once for a
    killed process, within the give-up bound (3 x keepalive) of a silent one; a broker
    down meanwhile, and MQTT 3.1.1 (no expiry), are not judged."""
    for a in (a for away in h.memo(Transit).aways.values() for a in away):
        if not a.must_have_expired:
            c.count("resumed_within_expiry" if a.back.session_present else "away_within_expiry")
            continue
        c.count("away_past_expiry")
        if a.back.session_present:
            c.violation(f"{a.node} came back as {a.back.client_id} at {a.back.t_ms:.0f} ms, "
                        f"{(a.back.t_ms - a.closed_by_ms) / 1000:.1f} s after the broker had "
                        f"closed its connection (by {a.closed_by_ms:.0f} ms), and found its "
                        f"session (sessionPresent=1): it expired after "
                        f"{a.expiry_ms / 1000:.0f} s", a.before, a.back)


@rule("MQTT 3.1.1 §3.1.2.5, [MQTT-3.1.2-8] (a will is published when its connection closes)")
def takeover_publishes_no_live_will(h: History, c: Collector) -> None:
    """At a session takeover only the old connection closes; a broker that publishes the
    new connection's will announces a node that is connected offline, and its peers stop
    sending to it (UNDELIVERABLE) while it runs. What the broker published at each
    takeover is the bench's record (takeover_will)."""
    for w in h.of(TakeoverWill):
        c.count(f"takeover_will_{w.will.value}")
        if w.will in (TakeoverWillOf.NEW, TakeoverWillOf.BOTH):
            c.violation(f"at the takeover of client id {w.client_id!r} ({w.old_label} -> "
                        f"{w.new_label}) the broker published the will of {w.new_label}, "
                        f"whose connection was open", w)


def _no_node(h: History) -> str | None:
    return None if h.of(NodeStarted) else "no node started in this run"


DIRECTORY_LIVENESS = Checker(
    "directory_liveness", "No mute receiver: every connected node registers at least one "
    "executor, all it expected; a roster holds only agents of the node's namespace; a node "
    "calls an agent undeliverable only when its directory has no entry for it, and sends a "
    "request only to an entry that lists its agent (an online one first); a node whose "
    "announcement is cleared announces itself again.",
    (no_mute_receiver, registers_all_expected, roster_of_own_namespace,
     undeliverable_only_when_unknown, routed_to_a_listed_entry, announced_again_after_a_clear),
    _no_node)
DEPLOYMENT = Checker(
    "deployment", "Seed 002 §11.1 red line 1: node ids and MQTT client ids are unique per "
    "node and each connects under the one it was given; and the broker keeps its MUSTs: a "
    "takeover publishes no will of a connection still open, a silent client is given up, a "
    "re-delivery reuses its packet id with DUP, an expired session is not resumed (MQTT 5).",
    (unique_client_ids, connects_under_its_client_id, takeover_publishes_no_live_will,
     gives_up_a_silent_client, redelivers_the_same_packet, expired_session_not_resumed),
    _no_node)
