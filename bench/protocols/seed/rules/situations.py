"""The coverage table's situations of the seed protocol: the paths of its mechanisms a
run reached (relay gaps, gate expiry, redelivery after a restart, forgeries, ...), each
recognised from the history alone (bench/checks/coverage.py explains situations)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from bench.core.events import (
    AckStatus,
    AttackSent,
    Decision,
    DropReason,
    GateDecisionReceived,
    GateDecisionSent,
    GateExpired,
    GateOpened,
    GateOpenSent,
    GateResumed,
    InboundAdmitted,
    InboundDropped,
    InstanceCause,
    InstanceStarted,
    InstanceState,
    LedgerFlushed,
    MessageType,
    NodeCrashed,
    NodeStarted,
    OutboundSettled,
    RelayAccepted,
    RelayDropped,
    RelayDuplicate,
    RelayGap,
    RelaySent,
    RequestOutcome,
    RequestSent,
    RequestSettled,
    RosterLoaded,
    SignatureVerdict,
    StepFinished,
    SubflowFinished,
    SubscriberAttached,
    TaskState,
    TaskStatus,
    TimeoutPolicy,
)
from bench.history import History
from bench.protocols.seed.rules.directory import Directories
from bench.protocols.seed.rules.inbound import drops
from bench.protocols.seed.rules.relay import frame_arrivals


def _crashes(h: History) -> list[tuple[NodeCrashed, float]]:
    """Each crash with the seq its node was next started at (inf: never). What came before
    what is the history's order throughout: a live history puts a send, a flush and a
    crash in one millisecond all the time (issue 50)."""
    starts: dict[str, list[int]] = defaultdict(list)
    for s in h.of(NodeStarted):
        starts[s.node].append(s.seq)
    return [(c, next((q for q in starts[c.node] if q > c.seq), float("inf")))
            for c in h.of(NodeCrashed)]


def _crash_with_publishes_in_flight(h: History) -> int:
    """A crash of a node that had sent a message whose publish had not settled yet: a
    request, relayed frame or gate message (sent events name their message), or a task's
    response (sent when the task ended; its settlement names the request)."""
    settled = {o.message_id: o.seq for o in h.of(OutboundSettled)}
    answered = {(o.node, o.request_id): o.seq for o in h.of(OutboundSettled)
                if o.message_type == MessageType.TASK_RESPONSE and o.request_id}
    sends: list[RequestSent | RelaySent | GateOpenSent | GateDecisionSent] = [
        *h.of(RequestSent), *h.of(RelaySent), *h.of(GateOpenSent), *h.of(GateDecisionSent)]
    sent = [(s.node, s.seq, settled.get(s.message_id, float("inf")))   # sent, settled at
            for s in sends]
    sent += [(t.node, t.seq, answered.get((t.node, t.task_id), float("inf")))
             for t in h.of(TaskState) if t.state in (TaskStatus.COMPLETED, TaskStatus.FAILED)]
    return sum(1 for crash, _ in h.memo(_crashes)
               if any(node == crash.node and at < crash.seq < done for node, at, done in sent))


def _redelivered_after_flushes(h: History) -> int:
    """A node restarted after two or more ledger flushes, then was handed again a message
    it had admitted before the crash (and dropped it as a duplicate)."""
    admitted: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for a in h.of(InboundAdmitted):
        admitted[a.node].append((a.seq, a.message_id))
    flushes: dict[str, list[int]] = defaultdict(list)
    for f in h.of(LedgerFlushed):
        flushes[f.node].append(f.seq)
    dups: dict[str, list[tuple[int, str | None]]] = defaultdict(list)
    for d in drops(h):
        if d.reason == DropReason.DUPLICATE:
            dups[d.node].append((d.seq, d.message_id))
    n = 0
    for crash, up in h.memo(_crashes):
        if sum(q < crash.seq for q in flushes[crash.node]) < 2:
            continue
        before = {m for q, m in admitted[crash.node] if q < crash.seq}
        n += sum(1 for q, m in dups[crash.node] if q > up and m in before)
    return n


def _misaddressed_to_empty_roster(h: History) -> int:
    """A request refused as NOT_MINE by a node while the roster it last loaded was empty."""
    loads: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for r in h.of(RosterLoaded):
        loads[r.node].append((r.seq, not r.agents))

    def empty_at(node: str, seq: int) -> bool:
        last = [empty for at, empty in loads[node] if at < seq]
        return bool(last) and last[-1]
    return sum(1 for d in drops(h)
               if d.reason == DropReason.NOT_MINE and empty_at(d.node, d.seq))


def _gate_expired_after_home_restart(h: History) -> int:
    opened = {g.gate_id: g for g in h.of(GateOpened)}
    crashes = h.memo(_crashes)
    return sum(1 for e in h.of(GateExpired) if e.gate_id in opened and any(
        c.node == e.node and opened[e.gate_id].seq < c.seq < e.seq for c, _ in crashes))


def _home_restart_tabs_reattach(h: History) -> int:
    attached = h.of(SubscriberAttached)
    streamed = {r.home_node_id for r in h.of(RelaySent)}
    return sum(1 for c, up in h.memo(_crashes) if c.node in streamed
               and any(a.node == c.node and a.seq < c.seq for a in attached)
               and any(a.node == c.node and a.seq > up for a in attached))


def _turned_down_instance_ends(h: History) -> int:
    ended = {(s.process_inst_id, s.status) for s in h.of(InstanceState)}
    return sum(1 for r in h.of(GateResumed) if r.decision in (Decision.REJECT, Decision.EXPIRED)
               and (r.process_inst_id, "FAILED") in ended)


def _reorder_repaired(h: History) -> int:
    """A frame reached its home after a later frame of its stream (out of order), and was
    still accepted: the reorder window held the later one back for it."""
    accepted = {(a.node, a.stream, a.stream_seq) for a in h.of(RelayAccepted)}
    n = 0
    for (node, stream), arrived in h.memo(frame_arrivals).items():
        top = 0
        for _, seq in arrived:
            n += seq < top and (node, stream, seq) in accepted
            top = max(top, seq)
    return n


def _stream_without_conversation(h: History) -> int:
    none = {s.request_id for s in h.of(RequestSent) if s.conversation_id is None}
    return len({d.task_id for d in h.of(RelayDropped) if d.task_id in none})


def _genuine_after_a_forgery(h: History) -> int:
    """Messages a node took in (or dropped as a duplicate) after a forgery under their
    messageId had reached it first (ledger_poisoning's bite)."""
    first: dict[tuple[str, str], int] = {}
    for a in h.of(AttackSent):
        if a.attack == "ledger_poisoning":
            first.setdefault((a.target_node_id or "", a.message_id), a.seq)
    later: list[InboundAdmitted | InboundDropped] = [
        *h.of(InboundAdmitted),
        *(d for d in drops(h) if d.reason == DropReason.DUPLICATE)]
    return len([e for e in later if e.message_id is not None
                and e.seq > first.get((e.node, e.message_id), e.seq)])


def _branches_out_of_order(h: History) -> int:
    """Parallel steps whose branches' successful attempts ended out of the order their
    definition lists them in."""
    from bench.protocols.seed.rules.process import parallel_branches
    order = {i.process_inst_id: parallel_branches(i.definition) for i in h.of(InstanceStarted)}
    ends: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in h.of(StepFinished):
        step, _, branch = f.path.partition("/")
        if f.ok and f.scope == "main" and branch and step in order.get(f.process_inst_id, {}):
            ends[(f.process_inst_id, step)].append(branch)
    return sum(got != sorted(got, key=order[pi][step].index) for (pi, step), got in ends.items()
               if set(got) <= set(order[pi][step]))


def _hostile_admitted(h: History) -> int:
    admitted = {(a.node, a.message_id) for a in h.of(InboundAdmitted)}
    return sum(a.attack == "hostile_input" and (a.target_node_id, a.message_id) in admitted
               for a in h.of(AttackSent))


#: those any protocol's run may reach: they read what every node records (a crash, the
#: sends and settlements of its publishes), as the A2A profile's agents do too
SHARED_SITUATIONS = frozenset({"crash_with_publishes_in_flight"})
#: (name, what it is, how often a history reached it)
SITUATIONS: tuple[tuple[str, str, Callable[[History], int]], ...] = (
    ("relay_gap_declared", "the home node declared a gap in a relayed stream",
              lambda h: len(h.of(RelayGap))),
    ("relay_duplicate_dropped", "the home node dropped a frame it already had",
              lambda h: len(h.of(RelayDuplicate))),
    ("relay_reorder_repaired", "a frame arrived after a later one of its stream and "
              "was still accepted, in order", _reorder_repaired),
    ("executor_answered_already_decided",
              "an executor answered a re-sent decision ALREADY_DECIDED",
              lambda h: sum(r.status == AckStatus.ALREADY_DECIDED
                            for r in h.of(GateDecisionReceived))),
    ("decision_resent", "a gate decision was sent again, unacknowledged",
              lambda h: sum(s.attempt >= 2 for s in h.of(GateDecisionSent))),
    ("gate_expired_reject", "a gate expired under the reject policy",
              lambda h: sum(e.policy == TimeoutPolicy.REJECT for e in h.of(GateExpired))),
    ("gate_expired_fail", "a gate expired under the fail policy",
              lambda h: sum(e.policy == TimeoutPolicy.FAIL for e in h.of(GateExpired))),
    ("gate_on_timeout_fail", "a gate was opened with gate_on_timeout = fail",
              lambda h: sum(g.on_timeout == TimeoutPolicy.FAIL for g in h.of(GateOpened))),
    ("gate_expired_after_home_restart",
              "a gate expired on a home node that restarted after opening it",
              _gate_expired_after_home_restart),
    ("turned_down_instance_followed_to_its_end",
              "a rejected or expired gate resumed its instance, which then failed",
              _turned_down_instance_ends),
    ("failed_subflow", "a sub-flow failed",
              lambda h: sum(not s.ok for s in h.of(SubflowFinished))),
    ("forged_ahead_then_genuine",
              "a message came in under a messageId a forgery ahead of it had used",
              _genuine_after_a_forgery),
    ("branches_finished_out_of_order",
              "a parallel step's branches finished in another order than the definition's",
              _branches_out_of_order),
    ("request_timed_out", "a requester gave a request up (NO_RESPONSE)",
              lambda h: sum(s.outcome == RequestOutcome.NO_RESPONSE for s in h.of(RequestSettled))),
    ("task_timed_out", "an executor's watchdog ended a task TIMEOUT",
              lambda h: sum(s.state == TaskStatus.TIMEOUT for s in h.of(TaskState))),
    ("instance_ended_by_its_task", "an instance was stopped because its task ended",
              lambda h: sum(s.cause == InstanceCause.TASK_ENDED for s in h.of(InstanceState))),
    ("crash_with_publishes_in_flight",
              "a node crashed with a message sent and not yet settled", _crash_with_publishes_in_flight),
    ("redelivered_after_ledger_flushes",
              "a node restarted after two or more ledger flushes got an old message again",
              _redelivered_after_flushes),
    ("misaddressed_to_empty_roster",
              "a request reached a node whose roster was empty", _misaddressed_to_empty_roster),
    ("home_restart_mid_stream_tabs_reattach",
              "a conversation's home node restarted while streams were relayed to it, and tabs "
              "attached again", _home_restart_tabs_reattach),
    ("header_tampered", "a man in the middle altered a signed request",
              lambda h: sum(a.attack.startswith("tamper_") for a in h.of(AttackSent))),
    ("replay_outside_window", "a request was replayed after its timestamp window",
              lambda h: sum(a.attack == "replay" and a.honest_verdict == SignatureVerdict.STALE
                            for a in h.of(AttackSent))),
    ("forged_sender", "a message claimed a sender it did not come from",
              lambda h: sum(a.attack == "forged_sender" for a in h.of(AttackSent))),
    ("announcement_cleared", "a running node's retained directory announcement was "
              "cleared", lambda h: len(h.fold(Directories).clears)),
    ("stream_without_conversation", "a task requested with no conversationId had "
              "a flow, which streamed nowhere", _stream_without_conversation),
    ("hostile_input_admitted", "a request an insider made hostile (a replyNodeId "
              "off the topic scheme, a definition the grammar rules out) passed admission",
              _hostile_admitted),
)
