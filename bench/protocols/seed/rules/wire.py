"""Wire evidence (DESIGN §11, PROTOCOL.md Part 1): what a tapped node did on MQTT, judged
from the packets that crossed the proxy in front of it (`wire` events), never from what
the node says about itself — and the node's account held against them.

A node is tapped when a command of its own starts it (anyone's node) or the run asked for
`--wire-tap`. The rules read only `wire` events and the bench's own journal (faults,
crashes, the run's id); `reports_match_the_wire` then compares the node's events with
the wire, so a node that reports deliveries it never had, or takes messages it never
accounts for, is caught however honest its report looks.
"""

from __future__ import annotations

from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.checks.network import fault_windows
from bench.checks.terms import ADMITTED
from bench.core.events import (
    AttackSent,
    AuthMode,
    InboundAdmitted,
    MessageType,
    NodeCrashed,
    OutboundSettled,
    OutboundState,
    RunStarted,
    Via,
    Wire,
)
from bench.history import History
from bench.protocols.seed.rules.inbound import drops


def _expected_client_id(h: History, node: str) -> str:
    runs = h.of(RunStarted)
    run_id = runs[0].run_id if runs else None
    return f"{node}-{run_id}" if run_id else node


# Topics are read here segment by segment, by this module's own few lines, never with the
# reference's bench.core.topics: a checker does not reuse the code it judges.
def _inbox_node(topic: str) -> str | None:
    """X of a topic `<prefix>/node/X/inbox`, or None for any other topic."""
    parts = topic.split("/")
    if len(parts) >= 3 and parts[-1] == "inbox" and parts[-3] == "node":
        return parts[-2]
    return None


def _inbox_of(flt: str, node: str) -> list[str]:
    """The segments of `node`'s inbox under the prefix `flt` lives under."""
    parts = flt.split("/")
    cut = next((i for i, p in enumerate(parts) if i > 0 and p in ("node", "directory", "event")),
               1)
    return [*parts[:cut], "node", node, "inbox"]


def _matches(flt: str, t: list[str]) -> bool:
    """MQTT 3.1.1 topic filter matching (+ one level, # the rest) against topic segments."""
    f = flt.split("/")
    for i, part in enumerate(f):
        if part == "#":
            return True
        if i >= len(t) or (part != "+" and part != t[i]):
            return False
    return len(f) == len(t)


def _by_connection(h: History) -> dict[str, list[list[Wire]]]:
    """Each tapped node's wire events, one list per connection (each starts at a CONNECT
    out), in one pass over the history (several rules walk them node by node)."""
    out: dict[str, list[list[Wire]]] = defaultdict(list)
    for e in h.of(Wire):
        conns = out[e.node]
        if not conns or (e.packet == "CONNECT" and conns[-1]):
            conns.append([])
        conns[-1].append(e)
    return dict(out)


def _connections(h: History, node: str) -> list[list[Wire]]:
    return h.memo(_by_connection).get(node, [])


def _tapped(h: History) -> list[str]:
    return sorted(h.memo(_by_connection))


@rule("W-MQTT-2, W-MQTT-3: a persistent session, and a will on the node's own directory topic")
def connects_with_its_session_and_will(h: History, c: Collector) -> None:
    """Every CONNECT a tapped node sends under its own client id asks for a persistent
    session (clean session 0) and leaves its will on `…/directory/{nodeId}`. (A CONNECT
    under another client id is a fault the bench made: judged by deployment.)"""
    for e in h.of(Wire):
        if e.packet != "CONNECT" or e.direction != "out" or \
                e.client_id != _expected_client_id(h, e.node):
            continue
        c.count("connects")
        if e.clean_session:
            c.violation(f"{e.node} connected with a clean session: what the broker queued "
                        "for it while it was away is discarded", e)
        will = (e.will_topic or "").split("/")
        # `…/directory/{nodeId}`, or `…/directory/{namespace}/{nodeId}` in a scoped directory
        if will[-2:] != ["directory", e.node] and (will[-3:-2] != ["directory"]
                                                   or will[-1] != e.node):
            c.violation(f"{e.node} connected with will topic {e.will_topic!r}, not its own "
                        "directory topic: its peers never learn it went away", e)


@rule("W-TOP-4: a node subscribes to its own inbox, never to another node's")
def subscribes_to_its_own_inbox(h: History, c: Collector) -> None:
    """The first SUBSCRIBE of every connection of a tapped node includes its own inbox, and
    no filter it ever subscribes matches another node's inbox."""
    nodes = h.nodes | set(_tapped(h))
    for node in _tapped(h):
        for conn in _connections(h, node):
            subs = [e for e in conn if e.packet == "SUBSCRIBE" and e.direction == "out"]
            if not subs:
                continue
            c.count("subscriptions")
            if not any(_inbox_node(f) == node for f in subs[0].filters or []):
                c.violation(f"{node} subscribed {subs[0].filters} without its own inbox", subs[0])
            for s in subs:
                for f in s.filters or []:
                    others = sorted(n for n in nodes - {node} if _matches(f, _inbox_of(f, n)))
                    if others:
                        c.violation(f"{node} subscribed {f!r}, which takes the inbox of "
                                    f"{', '.join(others)}", s)


@rule("W-TOP-1, W-OUT-2, W-OUT-3: targeted messages go to the inbox of the node they name")
def publishes_to_the_inbox_it_names(h: History, c: Collector) -> None:
    """Every message a tapped node publishes to an inbox names that inbox's node as its
    targetNodeId, that node is a node of the run, and it is not the sender itself (a
    message to itself is consumed locally and never published). Never a fallback to
    another inbox, never an agentId used as a nodeId."""
    nodes = h.nodes | set(_tapped(h))
    for e in h.of(Wire):
        if e.packet != "PUBLISH" or e.direction != "out" or e.message_id is None:
            continue
        target = _inbox_node(e.topic or "")
        if target is None:
            continue
        c.count("targeted")
        if target not in nodes:
            c.violation(f"{e.node} published {e.message_id} to {e.topic}: {target!r} is no "
                        "node of this run, and nobody reads that inbox", e)
        elif e.target_node_id != target:
            c.violation(f"{e.node} published {e.message_id} to {target}'s inbox, but it names "
                        f"targetNodeId {e.target_node_id!r}", e)
        elif target == e.node:
            c.violation(f"{e.node} published {e.message_id} to its own inbox (a message to "
                        "itself is consumed locally)", e)


@rule("W-TASK-4, W-TASK-5: a response goes to the request's replyNodeId, and only there")
def responses_return_to_the_requester(h: History, c: Collector) -> None:
    """Every TASK_RESPONSE a tapped node publishes goes to the inbox of the replyNodeId of
    the request it answers (the TASK_REQUEST with that requestId that came to it over the
    wire); a request without a replyNodeId gets no published response at all."""
    asked: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    for e in h.of(Wire):
        if e.packet == "PUBLISH" and e.direction == "in" \
                and e.message_type == MessageType.TASK_REQUEST:
            asked[(e.node, e.request_id or e.message_id or "")].add(
                (e.reply_node_id or "").strip() or None)
    for e in h.of(Wire):
        if e.packet != "PUBLISH" or e.direction != "out" \
                or e.message_type != MessageType.TASK_RESPONSE:
            continue
        replies = asked.get((e.node, e.request_id or ""))
        if replies is None:
            c.unknown("response_to_a_request_not_seen_on_the_wire")
            continue
        c.count("responses")
        target = _inbox_node(e.topic or "")
        if target not in replies:
            want = " or ".join(sorted(f"{r}'s inbox" if r else "nowhere (no replyNodeId)"
                                      for r in replies))
            c.violation(f"{e.node} answered {e.request_id} on {e.topic}; the request said "
                        f"{want}", e)


@rule("W-REL-2: each frame of a stream gets the next seq, never one it already used")
def frames_never_repeat_a_seq(h: History, c: Collector) -> None:
    """The FLOW_EVENTs a tapped node publishes for one stream carry seqs that only ever go
    up, across restarts too (a resent copy of one message, same messageId, is the same
    frame). Gaps are allowed: a frame delivered to a tab on the node itself never crosses
    the wire."""
    last: dict[tuple[str, str], tuple[int, Wire]] = {}
    seen: set[tuple[str, str]] = set()
    for e in h.of(Wire):
        if e.packet != "PUBLISH" or e.direction != "out" \
                or e.message_type != MessageType.FLOW_EVENT \
                or e.stream is None or e.stream_seq is None or e.message_id is None:
            continue
        if (e.node, e.message_id) in seen:
            continue
        seen.add((e.node, e.message_id))
        c.count("frames")
        key = (e.node, e.stream)
        before = last.get(key)
        if before is not None and e.stream_seq <= before[0]:
            c.violation(f"{e.node} sent seq {e.stream_seq} of {e.stream} after seq "
                        f"{before[0]}", before[1], e)
        last[key] = (e.stream_seq, e)


@rule("W-MQTT-5: every QoS1 message a node takes is acknowledged")
def acknowledges_what_it_takes(h: History, c: Collector) -> None:
    """On each connection of a tapped node, a QoS1 PUBLISH that reached it is PUBACKed,
    unless the connection ended before the node got to it: one left unacknowledged while a
    later one on the same connection was acknowledged, with no fault acting on the node
    or the broker meanwhile, is a message the node skipped (the broker holds it in flight
    until the session ends)."""
    windows = fault_windows(h)
    for node in _tapped(h):
        for conn in _connections(h, node):
            acked: dict[int, Wire] = {}
            for e in conn:
                if e.packet == "PUBACK" and e.direction == "out" and e.packet_id is not None:
                    acked.setdefault(e.packet_id, e)
            taken = [e for e in conn if e.packet == "PUBLISH" and e.direction == "in"
                     and e.qos == 1 and e.packet_id is not None]
            c.count("deliveries", len(taken))
            for i, e in enumerate(taken):
                if e.packet_id in acked:
                    continue
                later = next((x for x in taken[i + 1:] if x.packet_id in acked), None)
                if later is None:
                    continue   # the connection ended before the node got to it
                ack = acked[later.packet_id]   # type: ignore[index]
                if any(w.acts_on(e.t_ms, ack.t_ms, node) for w in windows):
                    continue
                c.violation(f"{node} never acknowledged packet {e.packet_id} "
                            f"({e.message_id or e.topic}) but acknowledged a later one", e, ack)


#: What each admission mode lets through (W-AUTH-1); audit admits every verdict.
#: The modes that refuse something: under audit every message is admitted, nothing to judge.
_REFUSING = {m: ADMITTED[m] for m in (AuthMode.STRICT, AuthMode.LOOSE)}


@rule("W-AUTH-1, W-SIG-6: a request the mode must refuse is never answered")
def refused_requests_get_no_answer(h: History, c: Collector) -> None:
    """An attack request (forged, tampered on the way, replayed) whose honest verdict the
    run's admission mode refuses gets no TASK_RESPONSE out of the tapped node it reached:
    an answer on the wire shows it was admitted, whatever the node reports. Judged where
    the attack is the only request with its requestId that reached the node (a replay of
    a real request shares the original's answer)."""
    runs = h.of(RunStarted)
    mode = runs[0].auth_mode if runs else None
    if mode not in _REFUSING:
        return
    tapped = set(_tapped(h))
    reached: dict[tuple[str, str], set[str]] = defaultdict(set)
    answers: dict[tuple[str, str], list[Wire]] = defaultdict(list)
    for e in h.of(Wire):
        if e.packet != "PUBLISH" or e.request_id is None:
            continue
        if e.direction == "in" and e.message_type == MessageType.TASK_REQUEST and e.message_id:
            reached[(e.node, e.request_id)].add(e.message_id)
        elif e.direction == "out" and e.message_type == MessageType.TASK_RESPONSE:
            answers[(e.node, e.request_id)].append(e)
    for a in h.of(AttackSent):
        if a.request_id is None or a.target_node_id not in tapped:
            continue
        key = (a.target_node_id, a.request_id)
        if a.honest_verdict in _REFUSING[mode]:
            c.count("admissible")
        elif a.message_id not in reached[key]:
            c.count("never_reached")
        elif reached[key] - {a.message_id}:
            c.count("shares_its_request_id")
        else:
            c.count("refusable")
            for r in answers[key][:1]:
                c.violation(f"{a.target_node_id} ({mode} mode) answered {a.request_id}, an "
                            f"attack ({a.attack}: {a.how}) an honest verifier calls "
                            f"{a.honest_verdict}: it was admitted", a, r)


@rule("DESIGN §11: what a node reports of its own traffic is what crossed its wire")
def reports_match_the_wire(h: History, c: Collector) -> None:
    """For every tapped node: each message it reports PUBLISHED went out over its wire,
    each message it reports admitted from MQTT came in over its wire, and each message
    that came in and that it acknowledged is one it reports admitted or dropped (it took
    the message off the broker: it must say what became of it). A node that crashed after
    a PUBACK may have lost its report with it; that case is not judged."""
    tapped = set(_tapped(h))
    out_ids: dict[str, set[str]] = defaultdict(set)
    in_ids: dict[str, set[str]] = defaultdict(set)
    for e in h.of(Wire):
        if e.packet == "PUBLISH" and e.message_id is not None:
            (out_ids if e.direction == "out" else in_ids)[e.node].add(e.message_id)
    for s in h.of(OutboundSettled):
        if s.node in tapped and s.state == OutboundState.PUBLISHED:
            c.count("published")
            if s.message_id not in out_ids[s.node]:
                c.violation(f"{s.node} reports {s.message_id} PUBLISHED, but it never crossed "
                            "its wire", s)
    accounted: dict[str, set[str]] = defaultdict(set)
    for a in h.of(InboundAdmitted):
        accounted[a.node].add(a.message_id)
        if a.node in tapped and a.via == Via.MQTT:
            c.count("admitted")
            if a.message_id not in in_ids[a.node]:
                c.violation(f"{a.node} reports {a.message_id} admitted from MQTT, but it never "
                            "came over its wire", a)
    for d in drops(h):
        if d.message_id is not None:
            accounted[d.node].add(d.message_id)
    crashed = {e.node for e in h.of(NodeCrashed)}
    for node in sorted(tapped):
        for conn in _connections(h, node):
            acked = {e.packet_id for e in conn if e.packet == "PUBACK" and e.direction == "out"}
            for e in conn:
                if e.packet == "PUBLISH" and e.direction == "in" and e.qos == 1 \
                        and e.message_id is not None and e.packet_id in acked \
                        and e.message_id not in accounted[node]:
                    if node in crashed:
                        c.unknown("acked_then_crashed")
                        continue
                    c.violation(f"{node} acknowledged {e.message_id} and never said what "
                                "became of it", e)


def _untapped(h: History) -> str | None:
    return None if h.of(Wire) else (
        "no node was behind a wire tap (nodes started by --node-command are; --wire-tap "
        "taps every node)")


WIRE_EVIDENCE = Checker(
    "wire_evidence", "Judged from the packets that crossed each tapped node's connection, not "
    "from what the node says: a persistent session and its own will, its own inbox only, "
    "targeted messages to the inbox they name, responses to the replyNodeId, stream seqs "
    "that never repeat, every message taken acknowledged, no answer to what its mode must "
    "refuse — and the node's own account of its traffic true to the wire.",
    (connects_with_its_session_and_will, subscribes_to_its_own_inbox,
     publishes_to_the_inbox_it_names, responses_return_to_the_requester,
     frames_never_repeat_a_seq, acknowledges_what_it_takes, refused_requests_get_no_answer,
     reports_match_the_wire),
    _untapped, needs="wire")
