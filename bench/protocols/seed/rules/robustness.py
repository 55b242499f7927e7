"""Robustness (DESIGN §3: malformed or unknown input is a recorded rejection, never a crash):
the node under test never dies of an exception of its own, refuses what it must refuse, and
publishes only to topics of the scheme."""

from __future__ import annotations

import re

from bench.checks import Checker, Collector, declared_without, rule
from bench.checks.network import EVERY_NODE, Transit
from bench.checks.shared import never_raises
from bench.checks.terms import IN_FLIGHT_AT_END_MS, MALFORMED_ENVELOPE, NOT_SENT, TASK_ENDS
from bench.core.events import (
    AttackSent,
    DirectoryRejected,
    DropReason,
    Event,
    InboundAdmitted,
    InboundDropped,
    InstanceStarted,
    MessageType,
    MqttConnected,
    MqttDisconnected,
    NodeCrashed,
    NodeStarted,
    NodeWarning,
    OutboundSettled,
    OutboundState,
    TaskExecuted,
    TaskState,
    TaskStatus,
    WarningKind,
)
from bench.history import History
from bench.protocols.seed.rules.directory import Directories
from bench.protocols.seed.rules.inbound import drops

#: Warnings a node gives only when its own bookkeeping or its store went wrong: no fault
#: of the bench corrupts a store or settles a publish the node never made (a malformed
#: process definition comes only from `hostile_input`, judged apart).
NEVER_PROVOKED = frozenset({
    WarningKind.UNKNOWN_SETTLEMENT,
    WarningKind.SNAPSHOT_UNREADABLE, WarningKind.GATE_RECORD_UNREADABLE,
    WarningKind.STREAM_RECORD_UNREADABLE, WarningKind.ROSTER_UNREADABLE,
    WarningKind.RESTORE_TASKS, WarningKind.RESTORE_REQUESTS})


@rule("DESIGN §3: a warning is worth a human's attention, so it must be true")
def warnings_are_true(h: History, c: Collector) -> None:
    """Every warning says something the history confirms: a missing replyNodeId is
    warned about for a request admitted without one; a publish without a connection
    while the node had none; the warnings of broken bookkeeping or a broken store never
    (see NEVER_PROVOKED), nor an unrestorable ledger. Undeliverable messages are judged
    by directory_liveness and reply_routing."""
    # a request's task id is its requestId, or its messageId where it carries none
    without_reply = {(a.node, a.request_id or a.message_id) for a in h.of(InboundAdmitted)
                     if a.reply_node_id is None}
    bad_definitions = {(a.target_node_id, a.request_id) for a in h.of(AttackSent)
                       if a.attack == "hostile_input"
                       and a.how not in HOSTILE_REPLY | HOSTILE_ENVELOPE | HOSTILE_WELL_FORMED}
    connected: dict[str, bool] = {}
    events: list[Event] = sorted([*h.of(MqttConnected), *h.of(MqttDisconnected),
                                  *h.of(NodeCrashed), *h.of(NodeStarted), *h.of(NodeWarning)],
                                 key=lambda e: e.seq)
    for e in events:
        match e:
            case MqttConnected():
                connected[e.node] = True
            case MqttDisconnected() | NodeCrashed() | NodeStarted():
                connected[e.node] = False
            case NodeWarning():
                c.count("warnings")
                if e.what in NEVER_PROVOKED:
                    c.violation(f"{e.node} warned {e.what.value!r}: {e.reason or e.message_id}", e)
                elif e.what is WarningKind.BAD_PROCESS_DEFINITION and \
                        (e.node, e.task_id) not in bad_definitions:
                    c.violation(f"{e.node} called the process definition of {e.task_id} bad, "
                                f"but no one sent it a bad one: {e.reason}", e)
                elif e.what is WarningKind.MISSING_REPLY_NODE and \
                        (e.node, e.task_id) not in without_reply:
                    c.violation(f"{e.node} warned that request {e.task_id} had no replyNodeId, "
                                "but it was admitted with one (or never)", e)
                elif e.what is WarningKind.PUBLISH_WITHOUT_CONNECTION and \
                        connected.get(e.node, False):
                    c.violation(f"{e.node} warned it published to {e.topic!r} without a "
                                "connection while it was connected", e)


#: Hostile requests whose replyNodeId is no topic segment (bench.faults.attacks)
HOSTILE_REPLY = frozenset({"reply_slash", "reply_wildcard"})
#: ... whose envelope DESIGN §3 refuses before anything reads it
HOSTILE_ENVELOPE = frozenset({"empty_conversation"})
#: ... and whose envelope is at the edge of well-formed: admission judges it, not the parser
HOSTILE_WELL_FORMED = frozenset({"timestamp_zero"})
TOPIC_SEGMENT = re.compile(r"[^/+#\x00]+")


@rule("DESIGN §3: input a node must refuse is refused with a reason, never acted on")
def hostile_input_refused(h: History, c: Collector) -> None:
    """A request an insider made hostile, once admitted: a process definition the
    grammar rules out (a human step inside a branch, an unknown kind, retries outside
    0..10, duplicate ids — judged here from the attack, not by the node's parser) starts
    no instance and ends its task FAILED; an answer whose replyNodeId is not one topic
    segment is never published (UNDELIVERABLE, with its reason). A node that declares it
    runs no process instances (node_started.features) reads no definition: to it the
    payload is opaque, and its answer is judged only as an answer. An envelope with an
    optional string field present but empty is refused as MALFORMED, never admitted; one
    with a timestamp of 0 is well-formed (stale, for admission to judge), never MALFORMED."""
    # a man in the middle that replaced the payload on the way took the definition out
    altered = {a.message_id for a in h.of(AttackSent) if a.attack == "tamper_payload"}
    # one that rewrote its headers gave it a replyNodeId of its choosing: the node answered
    # the request it was handed, not the insider's
    rewritten = {a.message_id for a in h.of(AttackSent) if a.attack == "tamper_headers"}
    attacks = [a for a in h.of(AttackSent) if a.attack == "hostile_input"]
    if not attacks:
        return
    admitted = {(a.node, a.message_id) for a in h.of(InboundAdmitted)}
    started = {(s.node, s.task_id) for s in h.of(InstanceStarted)}
    ended: dict[tuple[str, str], TaskState] = {}
    for s in h.of(TaskState):
        if s.state in TASK_ENDS:
            ended.setdefault((s.node, s.task_id), s)
    answers: dict[tuple[str, str], OutboundSettled] = {}
    for o in h.of(OutboundSettled):
        if o.message_type == MessageType.TASK_RESPONSE and o.request_id:
            answers.setdefault((o.node, o.request_id), o)
    crashed = {e.node for e in h.of(NodeCrashed)}
    no_processes = declared_without(h, "processes")
    late = h.end_ms - 3_000
    malformed = {(d.node, d.message_id) for d in drops(h)
                 if d.reason == DropReason.MALFORMED}
    # an injection the broker could not take in (it was down) reached nobody to refuse it
    transit = h.memo(Transit)
    broker_out = [o for o in transit.outages if o.node == EVERY_NODE]
    for a in attacks:
        node, rid = a.target_node_id or "", a.request_id or ""
        if a.how in HOSTILE_ENVELOPE:
            c.count(a.how)
            if (node, a.message_id) in admitted:
                c.violation(f"{node} admitted {a.message_id}, whose envelope DESIGN §3 refuses "
                            f"({a.how.replace('_', ' ')})", a)
            elif (node, a.message_id) not in malformed and a.t_ms < late \
                    and node not in crashed:
                # (or the network may have done with it what it does with any message: a
                # client id taken over handed the node's inbox to the impostor — explore,
                # seed 6 run 3394)
                lost = transit.lost(a.node, a.t_ms, node)
                if any(o.start_ms <= a.t_ms <= o.end_ms for o in broker_out):
                    c.count("injected_while_the_broker_was_down")
                elif lost in Transit.UNDECIDED:
                    c.unknown(lost)
                elif lost is not None:
                    c.count(lost)
                else:
                    c.violation(f"{node} never refused {a.message_id} as MALFORMED "
                                f"({a.how.replace('_', ' ')})", a)
            continue
        if a.how in HOSTILE_WELL_FORMED:
            c.count(a.how)
            if (node, a.message_id) in malformed:
                c.violation(f"{node} refused {a.message_id} as MALFORMED; its envelope is "
                            f"well-formed ({a.how.replace('_', ' ')})", a)
            continue
        if (node, a.message_id) not in admitted:
            c.count("not_admitted")
            continue
        if node in no_processes and a.how not in HOSTILE_REPLY:
            c.count("definition_opaque_to_a_node_without_processes")
            continue
        if a.message_id in altered and a.how not in HOSTILE_REPLY:
            c.count("definition_replaced_in_flight")
            continue
        if a.message_id in rewritten and a.how in HOSTILE_REPLY:
            c.count("reply_node_rewritten_in_flight")
            continue
        c.count(a.how)
        end, answer = ended.get((node, rid)), answers.get((node, rid))
        if a.how in HOSTILE_REPLY:
            if answer is not None and answer.state not in NOT_SENT:
                c.violation(f"{node} answered {rid}, whose replyNodeId is no topic segment, "
                            f"as {answer.state} on {answer.topic!r}", a, answer)
            continue
        if (node, rid) in started:
            c.violation(f"{node} started an instance for {rid}, whose process definition "
                        f"has {a.how.replace('_', ' ')}", a)
        elif end is not None and end.state != TaskStatus.FAILED:
            c.violation(f"{node} ended {rid} (process definition with "
                        f"{a.how.replace('_', ' ')}) {end.state}", a, end)
        elif end is None and a.t_ms < late and node not in crashed:
            c.violation(f"{node} never ended {rid} (process definition with "
                        f"{a.how.replace('_', ' ')})", a)


@rule("MQTT 3.1.1 §4.7: a topic name has no wildcard; DESIGN §2 topic scheme")
def topics_well_formed(h: History, c: Collector) -> None:
    """Every message a node published went to a topic of the scheme — `<prefix>/node/<id>/
    inbox`, `<prefix>/event/A2A/<group>` or `<prefix>/directory/<id>` — whose named part is
    one segment with no wildcard: never to a topic a peer's field spelled out."""
    for o in h.of(OutboundSettled):
        if o.state != OutboundState.PUBLISHED or o.topic is None:
            continue
        c.count("published")
        parts = o.topic.split("/")
        shape = (len(parts) >= 3 and parts[-1] == "inbox" and parts[-3] == "node") or \
            (len(parts) >= 3 and parts[-3:-1] == ["event", "A2A"]) or \
            (len(parts) >= 2 and parts[-2] == "directory")
        named = parts[-2] if parts[-1] == "inbox" else parts[-1]
        if not shape or not all(TOPIC_SEGMENT.fullmatch(p) for p in parts) \
                or not TOPIC_SEGMENT.fullmatch(named):
            c.violation(f"{o.node} published {o.message_type} {o.message_id} to {o.topic!r}, "
                        "which is not a topic of the scheme", o)


def _no_node(h: History) -> str | None:
    return None if h.of(NodeStarted) else "no node started"


#: The malformed_envelope fault's cases a node must take (DESIGN §3's headers are optional:
#: null is none), or may bound as it likes (a size DESIGN sets no limit for); every other
#: case is an envelope DESIGN §3 rules out, or (`ann:`) an announcement that is none
ENVELOPE_WELL_FORMED = frozenset({"headers_null"})
ENVELOPE_ANY_OUTCOME = frozenset({"too_large"})
#: ... and the well-formed ones it has no business running (a TASK_REQUEST on a scene
#: group's topic, a DATA_REQUEST): never MALFORMED, never run as a task
ENVELOPE_NOT_TO_RUN = frozenset({"route:request_on_group", "route:no_handler"})


@rule("DESIGN §3: malformed input is a recorded rejection, never a crash and never silently "
      "re-typed")
def malformed_envelopes_refused(h: History, c: Collector) -> None:
    """Each message of the malformed_envelope fault that reached a node: an envelope DESIGN
    §3 rules out (no UTF-8, no JSON, no object, a field missing, unknown or of the wrong
    type) is dropped MALFORMED — its first outcome at the node after it was sent, matched
    by its messageId or, where the node could read none, by being the next MALFORMED drop
    of no id there — never admitted, never run; the edge case (headers null) is never
    called MALFORMED; the 2 MiB one has some recorded outcome. An announcement that is none
    is refused (directory_rejected) by some node and its node id never enters a directory.
    A well-formed message it has no business running (a TASK_REQUEST on a scene group's
    topic, a DATA_REQUEST) is never called MALFORMED and never run as a task. Undecided:
    what the broker could not take in (down), what was still in flight at the end, a
    target that crashed meanwhile."""
    attacks = [a for a in h.of(AttackSent) if a.attack == MALFORMED_ENVELOPE]
    if not attacks:
        return
    outcomes: list[InboundAdmitted | InboundDropped] = sorted(
        [*h.of(InboundAdmitted), *drops(h)], key=lambda e: e.seq)
    used: set[int] = set()
    ran = {(x.node, x.task_id) for x in h.of(TaskExecuted)}
    rejected = {(d.node, d.topic.rsplit("/", 1)[-1]) for d in h.of(DirectoryRejected)}
    entered = h.fold(Directories).last_online      # node id -> its latest online announcement
    crashed = {e.node for e in h.of(NodeCrashed)}
    transit = h.memo(Transit)
    broker_out = [o for o in transit.outages if o.node == EVERY_NODE]
    late = h.end_ms - IN_FLIGHT_AT_END_MS
    for a in attacks:
        if any(o.start_ms <= a.t_ms <= o.end_ms for o in broker_out) or a.t_ms > late:
            c.unknown("sent_while_the_broker_was_down_or_at_the_end")
            continue
        if a.how.startswith("ann:"):
            c.count("announcements_that_are_none")
            if a.message_id in entered:
                c.violation(f"{a.message_id} entered a directory from an announcement that is "
                            f"none ({a.how})", a)
            elif not any(ghost == a.message_id for _node, ghost in rejected):
                c.violation(f"no node recorded its refusal of the announcement of "
                            f"{a.message_id} ({a.how})", a)
            continue
        node = a.target_node_id or ""
        first = next((o for o in outcomes if o.node == node and o.seq > a.seq
                      and id(o) not in used and (o.message_id == a.message_id or (
                          isinstance(o, InboundDropped) and not o.message_id
                          and o.reason == DropReason.MALFORMED))), None)
        if first is None:
            if node in crashed:
                c.unknown("its_target_crashed")
            else:
                c.violation(f"{node} recorded no outcome of {a.message_id} ({a.how})", a)
            continue
        used.add(id(first))
        malformed = isinstance(first, InboundDropped) and first.reason == DropReason.MALFORMED
        c.count(f"{a.how.split(':', 1)[0]}_{'malformed' if malformed else 'taken'}")
        if a.how in ENVELOPE_ANY_OUTCOME:
            continue
        if a.how in ENVELOPE_NOT_TO_RUN:
            if malformed or (node, a.message_id) in ran:
                c.violation(f"{node} {'ran' if not malformed else 'called MALFORMED'} "
                            f"{a.message_id}, a well-formed message it has no business "
                            f"running ({a.how})", a, first)
            continue
        if a.how in ENVELOPE_WELL_FORMED:
            if malformed:
                c.violation(f"{node} dropped {a.message_id} as MALFORMED, an envelope DESIGN "
                            f"§3 allows ({a.how.replace('_', ' ')})", a, first)
        elif not malformed:
            what = "admitted" if isinstance(first, InboundAdmitted) \
                else f"dropped as {first.reason} (not MALFORMED)"
            c.violation(f"{node} {what} {a.message_id}, an envelope DESIGN §3 rules out "
                        f"({a.how})", a, first)


ROBUSTNESS = Checker("robustness", "No node dies of its own exception: every input gets a "
                     "recorded outcome (DESIGN §3); every warning it gives is true; hostile "
                     "input is refused, and nothing is published off the topic scheme.",
                     (never_raises, warnings_are_true, hostile_input_refused,
                      malformed_envelopes_refused, topics_well_formed), _no_node)
