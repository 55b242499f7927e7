"""FLOW-RELAY (DESIGN §3, §7; seed 002 §6): relay integrity and relay locality."""

from __future__ import annotations

from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.checks.network import Transit, clocks, fault_windows, sent_where_redirected
from bench.checks.terms import (
    CLOCK_SLACK_MS,
    IN_FLIGHT_AT_END_MS,
    NOT_SENT,
    records_late_ms,
    timers_late_ms,
)
from bench.core.events import (
    DropReason,
    Event,
    FlowEmitted,
    InboundAdmitted,
    NodeCrashed,
    OutboundSettled,
    RelayAccepted,
    RelayDelivered,
    RelayDuplicate,
    RelayFrame,
    RelayGap,
    RelaySent,
    RequestSent,
    SubscriberAttached,
    SubscriberDetached,
)
from bench.history import History
from bench.protocols.seed.rules.inbound import drops


def _frames(h: History) -> dict[tuple[str, int], RelayFrame]:
    return {(e.stream, e.stream_seq): e for e in h.of(RelayFrame)}


def _producers(h: History) -> dict[str, str]:
    """stream -> the node whose flow emits it (framed or not yet)."""
    return {e.stream: e.node for e in h.of(FlowEmitted)} | \
        {e.stream: e.node for e in h.of(RelayFrame)}


@rule("DESIGN §3 FLOW-RELAY: thinking coalesced (150 ms / 4,096 B), nothing lost")
def frames_carry_the_flow(h: History, c: Collector) -> None:
    """Per stream, the frames carry exactly the text the flow emitted, in order: coalescing
    thinking loses and reorders nothing (a producer that crashed loses its pending
    thinking; its frames are judged one by one below). Text emitted so close to the end
    that it may still be coalescing is undecided, not lost."""
    frames = _frames(h)
    c.count("frames", len(frames))
    producer = _producers(h)
    crashed = {e.node for e in h.of(NodeCrashed)}
    emitted: dict[str, str] = defaultdict(str)
    first: dict[str, FlowEmitted] = {}
    late: dict[str, int] = {}      # stream -> where its text emitted near the end begins
    for e in h.of(FlowEmitted):
        if e.t_ms > h.end_ms - IN_FLIGHT_AT_END_MS:
            late.setdefault(e.stream, len(emitted[e.stream]))
        emitted[e.stream] += e.text
        first.setdefault(e.stream, e)
    by_stream: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for (stream, seq), f in frames.items():
        by_stream[stream].append((seq, f.text))
    for stream, text in sorted(emitted.items()):
        if producer.get(stream) in crashed:
            continue
        framed = "".join(t for _seq, t in sorted(by_stream.get(stream, [])))
        if framed != text and text.startswith(framed) and len(framed) >= late.get(stream, len(text)):
            c.unknown("thinking_pending_at_end")
        elif framed != text:
            c.violation(f"stream {stream}: frames carry {framed[:60]!r}, the flow emitted "
                        f"{text[:60]!r}", first[stream])


@rule("DESIGN §3 FLOW-RELAY: gaps explicit; seed 002 §6 (receiver cursor, reorder window)")
def relayed_frames_accounted(h: History, c: Collector) -> None:
    """Every relayed frame is accepted by the home node with the same text, or falls in a
    gap the home node declared explicitly, or its send failed and the sender said so, or
    it went where a man in the middle had redirected its request (network.redirected), or
    the home node dropped it with a recorded reason (a signature under a stale key, say),
    or the sender crashed (or the bench replaced its MQTT client, as the duplicate-client-id
    fault does) before the broker acknowledged it, or the home crashed while it
    held it behind a hole (or came back from a crash with its cursor already past it:
    UNKNOWN, the record of the acceptance died with the process), or the network lost it as the journal explains
    (delivery.Transit: a broker wipe, the home's client id taken over) or may still carry
    it, or the home held it while its clock was set ahead (its reorder window ends on
    that clock: undecided) — in these cases only if the home never accepted a later frame
    of its stream: had it, the gap was its to declare."""
    frames = _frames(h)
    # its send failed, or the sender found no way to its home (a replyNodeId that is no
    # node id): either way the sender said so
    failed = {o.message_id for o in h.of(OutboundSettled) if o.state in NOT_SENT}
    accepted = {(e.stream, e.stream_seq): e for e in h.of(RelayAccepted)}
    last_accepted: dict[str, int] = {}
    for stream, seq in accepted:
        last_accepted[stream] = max(seq, last_accepted.get(stream, 0))
    dropped = {(d.node, d.message_id) for d in drops(h)
               if d.reason != DropReason.DUPLICATE}
    reached_home = {(a.node, a.message_id): a.t_ms for a in h.of(InboundAdmitted)}
    transit = h.memo(Transit)
    published, crashes = transit.published, transit.crashes
    cursor_past: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for d in h.of(RelayDuplicate):
        if d.cursor >= d.stream_seq:
            cursor_past[(d.node, d.stream, d.stream_seq)].append(d.t_ms)
    gaps: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for g in h.of(RelayGap):
        gaps[g.stream].append((g.from_seq, g.to_seq))
        c.count("gaps_recorded")
    for e in h.of(RelaySent):
        key = (e.stream, e.stream_seq)
        c.count("relayed")
        got = accepted.get(key)
        if got is not None:
            if got.text != frames[key].text:
                c.violation(f"{key[0]} seq {key[1]} accepted as {got.text!r}, sent as "
                            f"{frames[key].text!r}", e, got)
            continue
        if any(lo <= key[1] <= hi for lo, hi in gaps[key[0]]):
            continue
        if e.message_id in failed:
            c.count("relay_send_failed")
            continue
        if sent_where_redirected(h, e.node, e.home_node_id, e.t_ms):
            c.count("relayed_where_an_attacker_redirected_it")    # his node got it
            continue
        if last_accepted.get(key[0], 0) < key[1]:
            if (e.home_node_id, e.message_id) in dropped:
                c.count("relayed_dropped_with_reason")
                continue
            if transit.died_with_sender(e.node, e.t_ms, e.message_id):
                c.count("relayed_lost_in_sender_crash")
                continue
            if transit.dropped_with_its_client(e.node, e.t_ms, e.message_id):
                c.count("relayed_dropped_with_its_senders_client")
                continue
            if transit.stuck_at_sender(e.node, e.t_ms, e.message_id):
                c.unknown("relayed_retransmitting_at_its_sender")
                continue
            if e.message_id not in published and transit.out_until_end(e.node, e.t_ms):
                c.unknown("relayed_by_a_sender_out_until_end")   # still in its client's queue
                continue
            held_since = reached_home.get((e.home_node_id, e.message_id))
            if held_since is not None and any(t >= held_since for t in crashes[e.home_node_id]):
                c.count("relayed_held_by_a_home_that_crashed")   # its reorder buffer died
                continue
            if held_since is not None and any(
                    node == e.home_node_id and start <= held_since <= end and off > 0
                    for node, start, end, off in h.memo(clocks).skews):
                # held behind a hole by a home whose clock was then set back: its reorder
                # window runs on that clock, and ends as much later (explore, seed 14 run
                # 1004: 60 s, past the run's end)
                c.unknown("relayed_held_by_a_home_whose_clock_was_set_back")
                continue
            why = transit.lost(e.node, published.get(e.message_id, h.end_ms), e.home_node_id)
            if why in Transit.UNDECIDED:
                c.unknown(why)
                continue
            if why is not None:
                c.count(f"relayed_{why}")
                continue
        if e.t_ms > h.end_ms - IN_FLIGHT_AT_END_MS:
            c.unknown("relayed_in_flight_at_end")
            continue
        if any(e.t_ms <= t_crash < t_dup for t_crash in crashes[e.home_node_id]
               for t_dup in cursor_past.get((e.home_node_id, *key), ())):
            # the home restarted with its cursor already past the frame: it accepted it in
            # the process that died, after committing the cursor and before its record of
            # the acceptance (and of the delivery) got out — whether a tab saw it is unknown
            c.unknown("relayed_accepted_by_a_home_that_died_before_recording_it")
            continue
        c.violation(f"{key[0]} seq {key[1]} was relayed but neither accepted nor recorded as "
                    "a gap at the home node", e)


@rule("DESIGN §3 FLOW-RELAY: one cursor per stream; seed 002 §6 (global cursor defect)")
def delivered_in_order_once(h: History, c: Collector) -> None:
    """Per subscriber and stream, delivered seqs strictly increase: no duplicate, no
    reordering, and each delivery carries the text of its frame."""
    frames = _frames(h)
    last: dict[tuple[str, str], int] = {}
    for e in h.of(RelayDelivered):
        c.count("delivered")
        key = (e.subscriber_id, e.stream)
        if e.stream_seq <= last.get(key, 0):
            c.violation(f"subscriber {e.subscriber_id} got {e.stream} seq {e.stream_seq} "
                        f"after seq {last[key]}", e)
        last[key] = max(last.get(key, 0), e.stream_seq)
        frame = frames.get((e.stream, e.stream_seq))
        if frame is not None and frame.text != e.text:
            c.violation(f"{e.stream} seq {e.stream_seq} delivered as {e.text!r}, framed as "
                        f"{frame.text!r}", frame, e)


@rule("DESIGN §3 FLOW-RELAY: broadcastToConversation; seed 002 §6 (active-emitter defect)")
def delivered_to_its_conversation(h: History, c: Collector) -> None:
    """An event of a conversation is pushed only to that conversation's subscribers."""
    for e in h.of(RelayDelivered):
        if e.subscriber_conversation != e.conversation_id:
            c.violation(f"an event of conversation {e.conversation_id} was pushed to "
                        f"{e.subscriber_id}, who watches {e.subscriber_conversation!r}", e)


@rule("DESIGN §3 FLOW-RELAY: local events verified, relayed ones claimed")
def trust_labels(h: History, c: Collector) -> None:
    """A delivery is labelled `verified` on the node that produced the stream and `claimed`
    on any other node."""
    producer = _producers(h)
    for e in h.of(RelayDelivered):
        want = "verified" if producer.get(e.stream) == e.node else "claimed"
        if e.trust != want:
            c.violation(f"{e.stream} seq {e.stream_seq} delivered on {e.node} labelled "
                        f"{e.trust}, should be {want}", e)


@rule("seed 002 §6: local first; DESIGN §7 zero relay traffic with a local subscriber")
def local_first(h: History, c: Collector) -> None:
    """No FLOW_EVENT leaves a node while that node has a subscriber for the conversation.
    A crash ends every subscription on the node (its tabs' streams die with the process)."""
    watching: dict[str, dict[str, str | None]] = defaultdict(dict)   # node -> tab -> conv
    merged: list[Event] = sorted([*h.of(SubscriberAttached), *h.of(SubscriberDetached),
                                  *h.of(RelaySent), *h.of(NodeCrashed)], key=lambda x: x.seq)
    for e in merged:
        match e:
            case SubscriberAttached():
                watching[e.node][e.subscriber_id] = e.conversation_id
            case SubscriberDetached():
                watching[e.node].pop(e.subscriber_id, None)
            case NodeCrashed():
                watching[e.node].clear()
            case RelaySent():
                c.count("relayed")
                if e.conversation_id in watching[e.node].values():
                    c.violation(f"{e.node} relayed {e.stream} seq {e.stream_seq} although it has "
                                f"a local subscriber for {e.conversation_id}", e)


@rule("DESIGN §3 FLOW-RELAY: every event of a stream gets the next seq")
def seqs_are_one_to_n(h: History, c: Collector) -> None:
    """Per stream, the producer frames seqs 1, 2, 3, … in order: none skipped, repeated or
    going back — across its restarts too (a restarted producer that starts again from 1
    would have its new frames dropped as duplicates). A skip across a crash of the
    producer is excused: the record of the frame in between may have died with it."""
    crashes = h.memo(Transit).crashes
    last: dict[tuple[str, str], RelayFrame] = {}
    for e in h.of(RelayFrame):
        c.count("framed")
        before = last.get((e.node, e.stream))
        want = 1 if before is None else before.stream_seq + 1
        last[(e.node, e.stream)] = e
        if e.stream_seq == want:
            continue
        since = before.t_ms if before is not None else float("-inf")
        if e.stream_seq > want and any(since <= t <= e.t_ms for t in crashes[e.node]):
            c.count("skipped_across_a_crash")
            continue
        c.violation(f"{e.node} framed {e.stream} seq {e.stream_seq} where seq {want} was "
                    "next", *([before] if before is not None else []), e)


@rule("DESIGN §3 FLOW-RELAY: one cursor per stream; a gap is declared explicitly")
def gaps_and_acceptances_consistent(h: History, c: Collector) -> None:
    """On each home node and stream: a seq is accepted at most once; a declared gap is a
    well-formed range (1 ≤ from ≤ to) that overlaps no other gap and no accepted seq —
    a gap over a frame it had, or a frame accepted after it was declared lost, is a
    cursor that went wrong."""
    accepted: dict[tuple[str, str, int], RelayAccepted] = {}
    for e in h.of(RelayAccepted):
        key = (e.node, e.stream, e.stream_seq)
        if key in accepted:
            c.violation(f"{e.node} accepted {e.stream} seq {e.stream_seq} twice",
                        accepted[key], e)
        accepted.setdefault(key, e)
    declared: dict[tuple[str, str], list[RelayGap]] = defaultdict(list)
    for g in h.of(RelayGap):
        c.count("gaps")
        if not 1 <= g.from_seq <= g.to_seq:
            c.violation(f"{g.node} declared a gap {g.from_seq}..{g.to_seq} in {g.stream}", g)
        for other in declared[(g.node, g.stream)]:
            if g.from_seq <= other.to_seq and other.from_seq <= g.to_seq:
                c.violation(f"{g.node} declared {g.stream} {g.from_seq}..{g.to_seq} missing "
                            f"again (already {other.from_seq}..{other.to_seq})", other, g)
        declared[(g.node, g.stream)].append(g)
        for seq in range(g.from_seq, g.to_seq + 1):
            got = accepted.get((g.node, g.stream, seq))
            if got is not None:
                c.violation(f"{g.node} declared {g.stream} seq {seq} missing in a gap and "
                            "accepted it too", g, got)


#: DESIGN §3 FLOW-RELAY: the home holds a hole for a 500 ms reorder window before it declares
#: the missing frames a gap.
REORDER_WINDOW_MS = 500.0


def frame_arrivals(h: History) -> dict[tuple[str, str], list[tuple[float, int]]]:
    """(home node, stream) -> (when, seq) of each relayed frame that node admitted, in the
    order they arrived."""
    frames = {r.message_id: (r.stream, r.stream_seq) for r in h.of(RelaySent)}
    arrivals: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for a in h.of(InboundAdmitted):
        if a.message_id in frames:
            stream, seq = frames[a.message_id]
            arrivals[(a.node, stream)].append((a.t_ms, seq))
    return arrivals


@rule("DESIGN §3 FLOW-RELAY: reordering within 500 ms is repaired, not declared lost")
def gaps_wait_the_window(h: History, c: Collector) -> None:
    """A gap is declared only once the reorder window has run from when the hole appeared
    (when the first frame held beyond it reached the home): declared sooner, frames that
    were merely late are thrown away as lost. Not judged while a fault set the home's
    clock off (its timers run on it). Each of the two records may be stamped up to the
    substrate's records_late_ms after the home decided (a live node's group commit)."""
    arrivals = h.memo(frame_arrivals)
    slack = CLOCK_SLACK_MS + records_late_ms(h)
    skewed = [f for f in h.memo(fault_windows) if f.fault == "clock_skew"]
    for g in h.of(RelayGap):
        if any(g.node in f.nodes and f.start_ms <= g.t_ms for f in skewed):
            c.count("gap_on_a_skewed_clock")
            continue
        beyond = [t for t, seq in arrivals[(g.node, g.stream)] if seq > g.to_seq and t <= g.t_ms]
        if not beyond:
            continue
        appeared = min(beyond)
        if g.t_ms < appeared + REORDER_WINDOW_MS - slack:
            c.violation(f"{g.node} declared {g.stream} {g.from_seq}..{g.to_seq} lost "
                        f"{g.t_ms - appeared:.0f} ms after the hole appeared, within the "
                        f"{REORDER_WINDOW_MS:.0f} ms reorder window", g)


@rule("DESIGN §3 FLOW-RELAY: a hole the window did not repair is declared when it runs out")
def gaps_declared_when_the_window_ends(h: History, c: Collector) -> None:
    """A hole the reorder window did not repair is declared lost when the window, run from
    when the hole appeared, ends — not a window after the previous gap or after the latest
    arrival: a stream with many holes falls further behind with each, its watchers waiting
    on frames that will not come. Not judged across a crash, a freeze or a skewed clock of
    the home (held frames die with its process; its timers stop or run on another clock)."""
    from bench.protocols.seed.rules.execution import frozen_windows
    arrivals = h.memo(frame_arrivals)
    late = timers_late_ms(h)
    crashes = h.memo(Transit).crashes
    frozen = h.memo(frozen_windows)
    skewed = [f for f in h.memo(fault_windows) if f.fault == "clock_skew"]
    for g in h.of(RelayGap):
        booted = max((b.t_ms for b in h.boots(g.node) if b.t_ms <= g.t_ms), default=0.0)
        beyond = [t for t, seq in arrivals[(g.node, g.stream)]
                  if seq > g.to_seq and booted <= t <= g.t_ms]
        if not beyond:
            continue
        appeared = min(beyond)
        if (any(g.node in f.nodes and f.start_ms <= g.t_ms for f in skewed)
                or any(appeared <= t <= g.t_ms for t in crashes[g.node])
                or any(a <= g.t_ms and appeared <= b for a, b in frozen[g.node])):
            c.count("gap_across_a_fault")
            continue
        c.count("gaps")
        if g.t_ms > appeared + REORDER_WINDOW_MS + late + CLOCK_SLACK_MS:
            c.violation(f"{g.node} declared {g.stream} {g.from_seq}..{g.to_seq} lost "
                        f"{g.t_ms - appeared:.0f} ms after the hole appeared; the reorder "
                        f"window is {REORDER_WINDOW_MS:.0f} ms"
                        + (f" (timers here may fire {late:.0f} ms late)" if late else ""), g)


@rule("DESIGN §3 FLOW-RELAY: a stream is `conversationId|agentId` of its task's request")
def streams_of_their_tasks_conversation(h: History, c: Collector) -> None:
    """A task's flow streams into the conversation its request named, and only there; a
    task requested with no conversationId (the envelope allows it) streams nowhere — not
    into a conversation called "None". The conversation is read from the requester's
    record of what it sent, not from the executor's."""
    asked = {s.request_id: s.conversation_id for s in h.of(RequestSent)}
    events: list[FlowEmitted | RelayFrame] = [*h.of(FlowEmitted), *h.of(RelayFrame)]
    seen: set[tuple[str, str]] = set()
    for e in events:
        if e.task_id not in asked:
            continue                       # not a request of the workload (an attacker's)
        conversation = asked[e.task_id]
        if (e.task_id, e.stream) in seen:
            continue
        seen.add((e.task_id, e.stream))
        c.count("task_streams")       # a task's flow on its stream (one stream carries many)
        if conversation is None:
            c.violation(f"task {e.task_id} was requested with no conversationId, yet its flow "
                        f"streamed into {e.stream!r}", e)
        elif e.conversation_id != conversation or not e.stream.startswith(conversation + "|"):
            c.violation(f"task {e.task_id} was requested in {conversation!r}, yet its flow "
                        f"streamed into {e.stream!r} ({e.conversation_id!r})", e)


def _no_stream(h: History) -> str | None:
    return None if h.of(RelayFrame) else "no flow streamed in this run"


RELAY_INTEGRITY = Checker(
    "relay_integrity", "Per stream: frames carry the emitted text, numbered 1..n; relayed "
    "frames are accepted once or fall in an explicit gap that overlaps nothing accepted; per "
    "subscriber strictly increasing, right text, right conversation, right trust label; a stream is its task's "
    "conversation's.",
    (frames_carry_the_flow, seqs_are_one_to_n, relayed_frames_accounted,
     gaps_and_acceptances_consistent, gaps_wait_the_window,
     gaps_declared_when_the_window_ends, delivered_in_order_once,
     delivered_to_its_conversation, trust_labels, streams_of_their_tasks_conversation),
    _no_stream)
RELAY_LOCALITY = Checker(
    "relay_locality", "Seed 002 §6: local first — no FLOW_EVENT leaves a node while that node "
    "has a subscriber for the conversation.", (local_first,), _no_stream)
