"""Process checkers (DESIGN §3, §7; seed 002 §7, seed 000 §5, seed 004): gate integrity and
context isolation, judged from the history alone.

The context oracle replays copy-on-write from the history with its own small reading of
the write operations (`set`, `append`) and of the digest (the first 16 hex digits of the
SHA-256 of the canonical JSON): it never runs the core's context code.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bench.checks import Checker, Collector, rule
from bench.checks.network import Transit, clocks, sent_where_redirected
from bench.checks.terms import (
    GATE_IN_FLIGHT_AT_END_MS,
    GATE_MAX_ATTEMPTS,
    GATE_RETRY_MS,
    IN_FLIGHT_AT_END_MS,
    INSTANCE_ENDS,
    NOT_SENT,
    TASK_ENDS,
    timers_late_ms,
)
from bench.core.events import (
    AckStatus,
    ContextForked,
    ContextMerged,
    DecidedBy,
    Decision,
    DropReason,
    Event,
    GateAcked,
    GateAlreadyDecided,
    GateClickRejected,
    GateDecided,
    GateDecisionReceived,
    GateDecisionSent,
    GateExpired,
    GateOpenDuplicate,
    GateOpened,
    GateOpenSent,
    GateResumed,
    GateUnacked,
    HumanAsked,
    HumanClicked,
    InstanceCause,
    InstanceRehydrated,
    InstanceStarted,
    InstanceState,
    InstanceStatus,
    NodeStarted,
    OutboundSettled,
    StepFinished,
    StepStarted,
    SubflowFinished,
    TaskState,
)
from bench.history import History
from bench.protocols.seed.rules.execution import frozen_windows
from bench.protocols.seed.rules.inbound import drops

# Events of one node are in history order; events of two nodes are compared by when each
# node says they happened (tMs, one clock for the run): a node process's lines reach the
# history through its pipe, later than the moment they record.


# -- human gates ------------------------------------------------------------------------------------
class Fate(Enum):
    """What became of one gate an executor opened (each gate has exactly one)."""

    LOST_IN_RESTART = "lost in a restart while paused"
    NEVER_STORED = "GATE_OPEN never reached the gate store"
    REDIRECTED = "GATE_OPEN sent where a man in the middle redirected its request"
    REFUSED = "GATE_OPEN refused at the home node, or never sent, with a recorded reason"
    LOST_IN_TRANSIT = "GATE_OPEN lost as the journal explains (broker wipe, takeover, sender crash)"
    IN_FLIGHT = "GATE_OPEN still in flight at the end"
    EXPIRED_UNDECIDED = "past its deadline undecided"
    OPEN_AT_END = "open when the run ended"
    RESUMED = "resumed its instance"
    CLOSED_BEFORE = "its instance ended before the decision"
    DECISION_IN_FLIGHT = "decided near the end"
    DECISION_UNDELIVERABLE = "decided; every send of the decision failed or was refused, " \
        "with a reason"
    NEVER_RESUMED = "decided, never resumed"


@dataclass
class _Gates:
    opens: dict[str, GateOpenSent]
    stored: set[str]                       # gates the gate store shows it had
    opened: dict[str, GateOpened]
    decided: dict[str, GateDecided]
    resumes: dict[str, list[GateResumed]]
    ends: dict[str, list[InstanceState]]
    nacks: dict[str, list[str]]
    fate: dict[str, tuple[Fate, list[Event]]] = field(default_factory=dict)


def deadline_on_the_bench(h: History, o: GateOpened) -> float:
    """When a gate falls due on the bench's clock. Its store keeps the deadline on its own
    clock (open time there + the timeout) and arms a timer for what is left of it, at the
    opening and again at each restart; a clock set ahead or behind since the timer was armed
    moves nothing, but a restart re-arms it on the clock as it is then — so a gate opened
    while the clock was 400 s ahead, its store restarted once the clock was set right, falls
    due 400 s late (explore, seed 19 run 213), and one restarted while the clock is ahead
    falls due at once. (A store down at the moment: expires_on_time.)"""
    seen = h.memo(clocks)
    deadline = o.t_ms + seen.off(o.node, o.t_ms) + o.timeout_ms
    due = o.t_ms + o.timeout_ms                  # the timer armed at the opening
    for boot in h.boots(o.node):
        if boot.seq < o.seq:
            continue
        if boot.t_ms >= due:
            break
        due = max(boot.t_ms, deadline - seen.off(o.node, boot.t_ms))   # armed again
    return due


def _gates(h: History) -> _Gates:
    opens = {e.gate_id: e for e in h.of(GateOpenSent)}
    opened = {e.gate_id: e for e in h.of(GateOpened)}
    # A gate store that crashed may have committed a gate and died before its gate_opened
    # reached the history; everything else it did with that gate shows it had it.
    stored = set(opened) | {e.gate_id for e in h.of(GateOpenDuplicate)} \
        | {e.gate_id for e in h.of(HumanAsked)} | {e.gate_id for e in h.of(GateDecided)}
    decided = {e.gate_id: e for e in h.of(GateDecided)}
    resumes: dict[str, list[GateResumed]] = defaultdict(list)
    for r in h.of(GateResumed):
        resumes[r.gate_id].append(r)
    ends: dict[str, list[InstanceState]] = defaultdict(list)
    for s in h.of(InstanceState):
        if s.status in (InstanceStatus.FAILED, InstanceStatus.COMPLETED):
            ends[s.process_inst_id].append(s)
    nacks: dict[str, list[str]] = defaultdict(list)
    for received in h.of(GateDecisionReceived):
        if received.status in (AckStatus.UNKNOWN_INSTANCE, AckStatus.NOT_WAITING):
            nacks[received.gate_id].append(received.status)
    # a gate message whose send failed, or that was dropped with a reason (not as a
    # duplicate), reached its fate with a record of why (e.g. a signature under a stale key)
    kinds = ("GATE_OPEN", "GATE_DECISION")
    unsent = {o.message_id for o in h.of(OutboundSettled)
              if o.message_type in kinds and o.state in NOT_SENT}
    refused = {(d.node, d.message_id) for d in drops(h)
               if d.message_type in kinds and d.reason != DropReason.DUPLICATE}
    failed = unsent | {m for _, m in refused if m}     # for decisions, refused anywhere
    transit = h.memo(Transit)
    # the line at which a decision first reached its executor (a line, not a time: a node
    # thawed from a pause handles its watchdog and the decision in the same millisecond)
    reached: dict[str, int] = {}
    for received in h.of(GateDecisionReceived):
        reached.setdefault(received.gate_id, received.seq)
    sends: dict[str, list[str]] = defaultdict(list)
    sent_at: dict[str, float] = {}
    for sd in h.of(GateDecisionSent):
        sends[sd.gate_id].append(sd.message_id)
        sent_at[sd.message_id] = sd.t_ms
    g = _Gates(opens, stored, opened, decided, resumes, ends, nacks)
    late = h.end_ms - GATE_IN_FLIGHT_AT_END_MS
    for gate_id, gate in sorted(opens.items()):
        pi = gate.process_inst_id
        d = decided.get(gate_id)
        mine = [r for r in resumes.get(gate_id, []) if r.process_inst_id == pi]
        lost = [e for e in ends.get(pi, []) if e.seq > gate.seq
                and e.cause is InstanceCause.INTERRUPTED and not any(r.seq < e.seq for r in mine)]
        if lost:
            g.fate[gate_id] = (Fate.LOST_IN_RESTART, [gate, lost[0]])
        elif gate_id not in stored and ((gate.home_node_id, gate.message_id) in refused
                                        or gate.message_id in unsent):
            g.fate[gate_id] = (Fate.REFUSED, [gate])
        elif gate_id not in stored and sent_where_redirected(h, gate.node, gate.home_node_id,
                                                             gate.t_ms):
            g.fate[gate_id] = (Fate.REDIRECTED, [gate])
        elif gate_id not in stored:
            why = None
            if transit.died_with_sender(gate.node, gate.t_ms, gate.message_id):
                why = "lost_in_sender_crash"     # its client's queue died with the process
            elif transit.dropped_with_its_client(gate.node, gate.t_ms, gate.message_id):
                why = "dropped_with_its_senders_client"
            elif gate.message_id not in transit.published:
                if transit.out_until_end(gate.node, gate.t_ms) or \
                        transit.stuck_at_sender(gate.node, gate.t_ms, gate.message_id):
                    why = "sender_out_until_end"     # still in its client's queue at the end
            elif gate.home_node_id is not None:
                why = transit.lost(gate.node, transit.published[gate.message_id],
                                   gate.home_node_id)
            undecided = why in Transit.UNDECIDED or why == "sender_out_until_end"
            g.fate[gate_id] = (Fate.IN_FLIGHT if gate.t_ms > late or undecided
                               else Fate.LOST_IN_TRANSIT if why else Fate.NEVER_STORED, [gate])
        elif d is None:
            o = opened.get(gate_id)
            # the deadline is on the node's clock; the gate's timeout runs from its opening
            expired = o is not None and deadline_on_the_bench(h, o) < late
            g.fate[gate_id] = (Fate.EXPIRED_UNDECIDED if expired else Fate.OPEN_AT_END,
                               [o] if o is not None else [gate])
        elif mine:
            g.fate[gate_id] = (Fate.RESUMED, [gate, *mine])
        elif (any(e.t_ms < d.t_ms for e in ends.get(pi, [])) and not any(
                e.cause is InstanceCause.INTERRUPTED for e in ends.get(pi, []) if e.t_ms < d.t_ms)) \
                or any(e.cause is InstanceCause.TASK_ENDED
                       and e.seq < reached.get(gate_id, math.inf) for e in ends.get(pi, [])):
            # it ended before the decision, or its task was ended from outside (timed out)
            # before the decision reached the executor, if it ever did
            g.fate[gate_id] = (Fate.CLOSED_BEFORE, [gate, d])
        elif gate_id in sends and failed.issuperset(sends[gate_id]):
            g.fate[gate_id] = (Fate.DECISION_UNDELIVERABLE, [gate, d])
        elif d.t_ms > late or (gate_id in sends and all(
                transit.stuck_at_sender(d.node, sent_at[m], m) for m in sends[gate_id])):
            # (or every send of it still in its sender's TCP retransmission queue: its link
            # lost half its packets and never caught up — explore, seed 39 run 1408)
            g.fate[gate_id] = (Fate.DECISION_IN_FLIGHT, [gate, d])
        else:
            g.fate[gate_id] = (Fate.NEVER_RESUMED, [gate, d])
    return g


@rule("DESIGN §3 gates: resume exactly that process instance; seed 002 §7")
def resumes_the_gates_instance(h: History, c: Collector) -> None:
    """A decision resumes the instance that opened the gate, never another."""
    g = h.memo(_gates)
    c.count("gates_opened", len(g.opens))
    c.count("resumes", sum(len(v) for v in g.resumes.values()))
    for gate_id, rs in sorted(g.resumes.items()):
        gate = g.opens.get(gate_id)
        for r in rs:
            if gate is not None and r.process_inst_id != gate.process_inst_id:
                c.violation(f"the decision for gate {gate_id} (instance "
                            f"{gate.process_inst_id}) resumed instance {r.process_inst_id}",
                            gate, r)


@rule("DESIGN §3 gates: a decision resumes; seed 002 §7")
def resumes_with_the_decision(h: History, c: Collector) -> None:
    """A gate resumes only after it was decided, and with that decision."""
    g = h.memo(_gates)
    c.count("gates_decided", len(g.decided))
    c.count("by_timeout", sum(1 for d in g.decided.values() if d.decided_by == DecidedBy.TIMEOUT))
    for gate_id, rs in sorted(g.resumes.items()):
        d = g.decided.get(gate_id)
        for r in rs:
            if d is None or d.t_ms > r.t_ms:   # two nodes: their own clocks, not arrival order
                c.violation(f"gate {gate_id} resumed without a decision", r)
            elif r.decision != d.decision:
                c.violation(f"gate {gate_id} was decided {d.decision!r} but resumed with "
                            f"{r.decision!r}", d, r)


@rule("DESIGN §3 gates: the first decision is the decision; later clicks ALREADY_DECIDED")
def decided_once(h: History, c: Collector) -> None:
    """A gate is decided once: no second decision, by a person or by expiry, even after
    the gate store restarted and asked again."""
    per: dict[str, list[GateDecided]] = defaultdict(list)
    for d in h.of(GateDecided):
        per[d.gate_id].append(d)
    for gate_id, ds in sorted(per.items()):
        if len(ds) > 1:
            c.violation(f"gate {gate_id} was decided {len(ds)} times: "
                        f"{[d.decision for d in ds]}", *ds)


@rule("DESIGN §3 gates: exactly once, across restarts; seed 000 §5.6")
def resumes_once(h: History, c: Collector) -> None:
    """A gate resumes its instance at most once, whatever is re-sent, re-clicked or
    redelivered, and across restarts of either side."""
    g = h.memo(_gates)
    c.count("rehydrated", len(h.of(InstanceRehydrated)))
    for gate_id, rs in sorted(g.resumes.items()):
        if len(rs) > 1:
            c.violation(f"gate {gate_id} resumed {len(rs)} times", *rs)


@rule("DESIGN §3 gates: PAUSED snapshot rehydrated; seed 000 §5.6 #17")
def paused_survives_restart(h: History, c: Collector) -> None:
    """An instance paused at a gate survives a restart of its executor: it is never ended
    as interrupted while it waits."""
    for gate_id, (fate, events) in sorted(h.memo(_gates).fate.items()):
        if fate is Fate.LOST_IN_RESTART:
            lost = events[1]
            assert isinstance(lost, InstanceState)
            c.violation(f"instance {lost.process_inst_id}, paused at gate {gate_id}, was lost "
                        f"in a restart ({lost.reason})", *events)


@rule("DESIGN §3 gates: GATE_OPEN goes to the home node's gate store")
def open_reaches_gate_store(h: History, c: Collector) -> None:
    """A GATE_OPEN an executor sent reaches the gate store of the conversation's home node
    (the store shows it had the gate: opened, asked, decided, or told of a duplicate) —
    or is refused there with a recorded reason, or its send fails with one, or the
    network lost it as the journal explains (see delivery.Transit), or it went where a man
    in the middle had redirected its request (network.redirected)."""
    for gate_id, (fate, events) in sorted(h.memo(_gates).fate.items()):
        if fate is Fate.IN_FLIGHT:
            c.unknown("gate_open_in_flight_at_end")
        elif fate is Fate.REFUSED:
            c.count("gate_open_refused_with_reason")
        elif fate is Fate.LOST_IN_TRANSIT:
            c.count("gate_open_lost_in_transit")
        elif fate is Fate.REDIRECTED:
            c.count("gate_open_sent_where_an_attacker_redirected_it")
        elif fate is Fate.NEVER_STORED:
            c.violation(f"GATE_OPEN for {gate_id} never reached the gate store", *events)


@rule("DESIGN §3 gates: expiry applies the timeout policy explicitly")
def timeout_policy_applied(h: History, c: Collector) -> None:
    """A gate past its deadline has been decided — by a person or by its timeout policy
    (reject or fail), never left open."""
    c.count("negative_acks", sum(len(v) for v in h.memo(_gates).nacks.values()))
    for gate_id, (fate, events) in sorted(h.memo(_gates).fate.items()):
        if fate is Fate.OPEN_AT_END:
            c.count("open_at_end")
        elif fate is Fate.EXPIRED_UNDECIDED:
            o = events[0]
            policy = o.on_timeout if isinstance(o, GateOpened) else "?"
            c.violation(f"gate {gate_id} passed its deadline undecided: the timeout policy "
                        f"{policy!r} was never applied", *events)


#: How late an expiry may come on a busy host (a timer fires late, a batch waits its turn):
#: the task watchdog's allowance (bench.protocols.seed.rules.execution).
EXPIRY_LATE_MS = 2_000.0


@rule("DESIGN §3 gates: expiry applies the gate's timeout policy, at its deadline")
def expires_on_time(h: History, c: Collector) -> None:
    """A gate still undecided when its timeout has passed since it was opened expires then
    — its deadline kept across a restart of the gate store: a store down (or frozen) at
    that moment expires it once it is back, never a whole timeout again from its restart
    (a person waits for nothing, and the instance holds its executor, that much longer)."""
    from bench.protocols.seed.rules.execution import frozen_windows
    frozen = h.memo(frozen_windows)
    crashes = h.memo(Transit).crashes
    opened = {o.gate_id: o for o in h.of(GateOpened)}
    for e in h.of(GateExpired):
        o = opened.get(e.gate_id)
        if o is None or not o.timeout_ms:
            continue
        c.count("expired")
        due = deadline_on_the_bench(h, o)
        crash = max((t for t in crashes[e.node] if o.t_ms <= t <= due), default=None)
        if crash is not None:
            back = min((b.t_ms for b in h.boots(e.node) if b.t_ms > crash), default=None)
            if back is not None and back > due:
                due = back
        thawed = max((b for a, b in frozen[e.node] if a <= due <= b), default=None)
        due = thawed if thawed is not None else due
        if e.t_ms > due + EXPIRY_LATE_MS:
            c.violation(f"gate {e.gate_id} expired {e.t_ms - o.t_ms:.0f} ms after it was "
                        f"opened; its timeout is {o.timeout_ms} ms"
                        + (f" and its store was back {due - o.t_ms:.0f} ms after" if due >
                           o.t_ms + o.timeout_ms else ""), o, e)


@rule("DESIGN §3 gates: a second decision for the same gate is an explicit ALREADY_DECIDED")
def decided_again_is_already_decided(h: History, c: Collector) -> None:
    """A decision that reaches an instance whose gate it already resumed — re-sent, or
    redelivered past a ledger a crash cut short — is ALREADY_DECIDED, across a restart of
    the instance's executor too (its snapshot remembers the gates it passed): never
    NOT_WAITING, which tells the gate store the instance waits at no gate of its."""
    resumed: set[tuple[str, str]] = set()
    events: list[GateResumed | GateDecisionReceived] = sorted(
        [*h.of(GateResumed), *h.of(GateDecisionReceived)], key=lambda e: e.seq)
    for e in events:
        key = (e.gate_id, e.process_inst_id)
        if isinstance(e, GateResumed):
            resumed.add(key)
        elif key in resumed:
            c.count("decided_again")
            if e.status == AckStatus.NOT_WAITING:
                c.violation(f"{e.node} answered a decision for gate {e.gate_id}, which had "
                            f"resumed {e.process_inst_id} already, {e.status} (want "
                            "ALREADY_DECIDED)", e)


@rule("DESIGN §3 gates: the decision resumes the instance; seed 002 §7")
def decision_resumes(h: History, c: Collector) -> None:
    """A decided gate resumes its instance — unless the instance ended before the decision
    reached it (as a task that timed out does), or every send of the decision failed or
    was refused with a recorded reason (its agent gone from the directory, a signature
    under a rotated key)."""
    g = h.memo(_gates)
    for gate_id, (fate, events) in sorted(g.fate.items()):
        if fate is Fate.CLOSED_BEFORE:
            c.count("instance_closed_before_decision")
        elif fate is Fate.DECISION_UNDELIVERABLE:
            c.count("decision_undeliverable")
        elif fate is Fate.DECISION_IN_FLIGHT:
            c.unknown("decision_in_flight_at_end")
        elif fate is Fate.NEVER_RESUMED:
            d = g.decided[gate_id]
            pi = g.opens[gate_id].process_inst_id
            nacks = g.nacks.get(gate_id)
            c.violation(f"gate {gate_id} was decided {d.decision!r} but instance {pi} never "
                        f"resumed" + (f" (the executor answered {nacks})" if nacks else ""),
                        *events)


@rule("DESIGN §3 gates: a second decision is an explicit ALREADY_DECIDED")
def every_click_answered(h: History, c: Collector) -> None:
    """Every click of a person gets exactly one recorded outcome: it decided the gate, the
    gate was already decided, or it was rejected with a reason."""
    c.count("already_decided", len(h.of(GateAlreadyDecided)))
    outcomes: dict[str, list[Event]] = defaultdict(list)
    for d in h.of(GateDecided):
        if d.click:
            outcomes[d.click].append(d)
    for a in h.of(GateAlreadyDecided):
        outcomes[a.click].append(a)
    for r in h.of(GateClickRejected):
        outcomes[r.click].append(r)
    for e in h.of(HumanClicked):
        c.count("clicks")
        got = outcomes.get(e.click, [])
        if len(got) != 1:
            c.violation(f"click {e.click} had {len(got)} recorded outcomes (want exactly 1: "
                        "decided, already decided or rejected)", e, *got)


@rule("DESIGN §3 gates: unacknowledged decisions are retried, or given up explicitly")
def decision_acknowledged(h: History, c: Collector) -> None:
    """Every decision is acknowledged by the executor or, after the last retry, explicitly
    given up on (GATE_UNACKED), and it is sent 6 times at most. A decision still within its
    retry schedule when the run ends is undecided, not lost: PROTOCOL W-GATE-4's next send
    (or, after the sixth, the give-up) falls due 2 000 ms x attempt after the last send,
    later by any time its home node spent frozen or down (a restart re-sends a DECIDED gate
    at once), and a wall clock's timers may fire late."""
    acked = {e.gate_id for e in h.of(GateAcked) if not e.duplicate}
    unacked = {e.gate_id for e in h.of(GateUnacked)}
    late = h.end_ms - GATE_IN_FLIGHT_AT_END_MS
    slack = timers_late_ms(h)
    frozen = h.memo(frozen_windows)
    crashes = h.memo(Transit).crashes
    starts: dict[str, list[float]] = defaultdict(list)
    for st in h.of(NodeStarted):
        starts[st.node].append(st.t_ms)
    sent: dict[str, list[GateDecisionSent]] = defaultdict(list)
    for s in h.of(GateDecisionSent):
        sent[s.gate_id].append(s)
    for gate_id, d in sorted(h.memo(_gates).decided.items()):
        if gate_id in acked or gate_id in unacked:
            continue
        sends = [s for s in sent.get(gate_id, []) if s.node == d.node]
        if not sends:
            if d.t_ms > late:
                c.unknown("ack_in_flight_at_end")
            else:
                c.violation(f"the decision for gate {gate_id} was never sent, nor given up on "
                            "(GATE_UNACKED)", d)
            continue
        last = sends[-1]
        if last.attempt > GATE_MAX_ATTEMPTS:
            c.violation(f"the decision for gate {gate_id} was sent {last.attempt} times; "
                        f"W-GATE-4 gives up after {GATE_MAX_ATTEMPTS}", last)
            continue
        due = last.t_ms + GATE_RETRY_MS * last.attempt
        due += sum(min(b, h.end_ms) - max(a, last.t_ms) for a, b in frozen.get(d.node, [])
                   if b > last.t_ms and a < due)
        crash = next((t for t in crashes[d.node] if t >= last.t_ms), None)
        if crash is not None and crash < due:   # down: the restart re-sends it at its start
            back = next((t for t in starts[d.node] if t > crash), None)
            due = h.end_ms + 1 if back is None else back
        if due + slack > h.end_ms - IN_FLIGHT_AT_END_MS:
            c.unknown("ack_in_flight_at_end")
        else:
            c.violation(f"the decision for gate {gate_id} was neither acknowledged nor given "
                        f"up on (GATE_UNACKED): its attempt {last.attempt} was sent at "
                        f"{last.t_ms:.0f} ms, and nothing followed by {due:.0f} ms", d, last)


@rule("DESIGN §3 gates: reject, or expiry under either policy, fails the instance")
def turned_down_ends_the_instance(h: History, c: Collector) -> None:
    """A gate resumed with anything but approve (rejected by a person, or expired under
    `reject` or `fail`) ends its instance FAILED (DECIDED_AGAINST) and nothing of it runs
    after: no step starts once the decision is in. A node that crashes before the end has
    its restart to finish it; a resume just before the end of the run may be ending yet."""
    crashes = h.memo(Transit).crashes
    states: dict[str, list[InstanceState]] = defaultdict(list)
    for s in h.of(InstanceState):
        states[s.process_inst_id].append(s)
    steps: dict[str, list[StepStarted]] = defaultdict(list)
    for st in h.of(StepStarted):
        steps[st.process_inst_id].append(st)
    for r in h.of(GateResumed):
        if r.decision == Decision.APPROVE:
            continue
        c.count("turned_down")
        pi = r.process_inst_id
        ran = [st for st in steps[pi] if st.node == r.node and st.seq > r.seq]
        if ran:
            c.violation(f"instance {pi} ran step {ran[0].path} after its gate {r.gate_id} "
                        f"came back {r.decision!r}", r, ran[0])
        end = next((s for s in states[pi] if s.node == r.node and s.seq > r.seq), None)
        if end is None and r.t_ms > h.end_ms - GATE_IN_FLIGHT_AT_END_MS:
            c.unknown("turned_down_ending_at_end")
        elif end is None and any(t >= r.t_ms for t in crashes[r.node]):
            c.count("turned_down_then_crashed")
        elif end is None or end.status != InstanceStatus.FAILED \
                or end.cause is not InstanceCause.DECIDED_AGAINST:
            got = "never ended" if end is None else f"went {end.status} ({end.cause.value})"
            c.violation(f"instance {pi} {got} after its gate {r.gate_id} came back "
                        f"{r.decision!r}", r, *([end] if end is not None else []))


def _no_gate(h: History) -> str | None:
    return None if h.of(GateOpenSent) else "no gate was opened in this run"


GATE_INTEGRITY = Checker(
    "gate_integrity", "Every decided gate resumes exactly its own instance exactly once, with "
    "the decision, across restarts; a rejected or expired gate fails its instance and nothing "
    "runs after; every click and every decision gets an explicit outcome; an expired gate "
    "has its timeout policy applied.",
    (resumes_the_gates_instance, resumes_with_the_decision, turned_down_ends_the_instance,
     decided_once, resumes_once, expires_on_time, decided_again_is_already_decided,
     paused_survives_restart, open_reaches_gate_store, timeout_policy_applied,
     decision_resumes, every_click_answered, decision_acknowledged), _no_gate, needs="gates")


# -- copy-on-write context ---------------------------------------------------------------------------
def _digest(data: Any) -> str:
    """The context digest, as DESIGN's snapshots define it: sha256 of the canonical JSON."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


class _BadOps(ValueError):
    pass


def _apply(data: Any, ops: Any) -> None:
    """A step's writes, as the workload's steps make them: `set` a path to a value,
    `append` a value to the list at a path (seed 004's operations)."""
    if not isinstance(ops, list):
        raise _BadOps(f"ops {ops!r} are not a list")
    for op in ops:
        path = op.get("path") if isinstance(op, dict) else None
        if not isinstance(path, list) or not path or not all(isinstance(k, str) for k in path):
            raise _BadOps(f"op {op!r} has no path")
        parent = data
        for key in path[:-1]:
            if not isinstance(parent, dict):
                raise _BadOps(f"op {op!r}: {key!r} is not inside an object")
            parent = parent.setdefault(key, {})
        if not isinstance(parent, dict):
            raise _BadOps(f"op {op!r}: no object to write into")
        if op.get("op") == "set":
            parent[path[-1]] = copy.deepcopy(op.get("value"))
        elif op.get("op") == "append" and isinstance(parent.setdefault(path[-1], []), list):
            parent[path[-1]].append(copy.deepcopy(op.get("value")))
        else:
            raise _BadOps(f"op {op!r} is neither set nor append to a list")


def _foreign_values(value: Any, instance: str) -> list[str]:
    """Values written by another instance (every step's value starts with its instance)."""
    found: list[str] = []
    if isinstance(value, dict):
        for v in value.values():
            found.extend(_foreign_values(v, instance))
    elif isinstance(value, list):
        for v in value:
            found.extend(_foreign_values(v, instance))
    elif isinstance(value, str) and value.startswith("pi-") \
            and value.split("/", 1)[0] != instance:
        found.append(value)
    return found


def _diff(expected: Any, actual: Any) -> str:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            if expected.get(k) != actual.get(k):
                return f"{k}: {_diff(expected.get(k), actual.get(k))}"
        return "equal"
    if isinstance(expected, list) and isinstance(actual, list):
        extra = [x for x in actual if x not in expected]
        missing = [x for x in expected if x not in actual]
        return f"extra {extra[:3]} missing {missing[:3]}"
    return f"expected {expected!r}, got {actual!r}"


@dataclass
class _Replay:
    """Findings of one replay of every instance, by rule, and the counts it made."""

    findings: dict[str, list[tuple[str, list[Event]]]] = field(
        default_factory=lambda: defaultdict(list))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, rule_id: str, why: str, *events: Event) -> None:
        self.findings[rule_id].append((why, list(events)))


INSTANCE_EVENTS = (InstanceStarted, ContextForked, StepStarted, StepFinished, ContextMerged,
                   InstanceState, SubflowFinished)


def _replay(h: History) -> _Replay:
    out = _Replay()
    per: dict[str, list[Event]] = defaultdict(list)
    for kind in INSTANCE_EVENTS:
        for e in h.of(kind):
            per[getattr(e, "process_inst_id")].append(e)  # noqa: B009 - each of them has it
    for pi, events in sorted(per.items()):
        events.sort(key=lambda e: e.seq)
        _replay_one(pi, events, out)
    return out


def _replay_one(pi: str, events: list[Event], out: _Replay) -> None:
    ctx: dict[str, Any] = {}
    head: dict[str, tuple[str | None, int]] = {}      # scope -> (snapshot id, version)
    first_base: dict[str, str] = {}
    started: dict[tuple[str, int], StepStarted] = {}
    finished: dict[tuple[str, int], StepFinished] = {}
    sub_ops: dict[str, list[Any]] = defaultdict(list)
    failed_subflows: dict[str, StepFinished] = {}
    failed_main: StepFinished | None = None
    ended: InstanceState | None = None      # its first COMPLETED or FAILED
    for e in events:
        if ended is not None and isinstance(e, (InstanceState, StepStarted, ContextMerged)):
            what = f"went {e.status} ({e.cause.value})" if isinstance(e, InstanceState) \
                else f"started {e.path}" if isinstance(e, StepStarted) else f"merged {e.path}"
            out.add("ends_once", f"{pi} ended {ended.status} ({ended.cause.value}) and then "
                    f"{what}", ended, e)
        match e:
            case InstanceStarted():
                out.counts["instances"] += 1
                ctx["main"] = e.context
                head["main"] = (None, 0)
                held = {k: v for k, v in e.context.items() if k != "input" and v} \
                    if isinstance(e.context, dict) else {}
                if held:
                    out.add("fresh_context_is_empty", f"instance {pi} started with a context that "
                            f"already holds {str(held)[:120]} (shared with another task)", e)
            case ContextForked():
                ctx[e.scope] = copy.deepcopy(ctx.get("main"))
                head[e.scope] = (e.parent_snapshot_id, 0)
                if e.digest != _digest(ctx[e.scope]):
                    out.add("attempt_starts_from_its_snapshot", f"{pi}: sub-flow {e.scope} forked "
                            "from something other than its parent's current context", e)
            case StepStarted():
                out.counts["attempts"] += 1
                started[(e.path, e.attempt)] = e
                current = ctx.get(e.scope)
                if current is not None and e.base_digest != _digest(current):
                    out.add("attempt_starts_from_its_snapshot", f"{pi}: {e.path} attempt "
                            f"{e.attempt} started from a context that is not its snapshot "
                            f"(version {e.base_version})", e)
                if e.attempt == 1:
                    first_base[e.path] = e.base_digest
                elif e.base_digest != first_base.get(e.path):
                    out.add("retry_starts_from_pre_attempt_snapshot", f"{pi}: retry {e.attempt} "
                            f"of {e.path} does not start from the pre-attempt snapshot", e)
            case StepFinished():
                finished[(e.path, e.attempt)] = e
                if not e.ok:
                    out.counts["failed_attempts"] += 1
                    this = started.get((e.path, e.attempt))
                    final = this is not None and e.attempt > this.retries
                    if final and e.scope != "main":
                        failed_subflows[e.scope] = e
                    elif final:
                        failed_main = e
            case ContextMerged():
                out.counts["merges"] += 1
                _merged(pi, e, ctx, head, finished, sub_ops, failed_subflows, out)
            case SubflowFinished() if e.ok == (e.step in failed_subflows):
                said, steps = ("succeeded", "failed") if e.ok else ("failed", "succeeded")
                out.add("failure_fails_the_instance", f"{pi}: sub-flow {e.step} is recorded as "
                        f"{said}, but its steps {steps}", e)
            case InstanceState(status="COMPLETED"):
                if failed_subflows:
                    scope, f = next(iter(failed_subflows.items()))
                    out.add("failure_fails_the_instance", f"{pi}: sub-flow {scope} failed but "
                            "the instance COMPLETED", f, e)
                if failed_main is not None:
                    out.add("failure_fails_the_instance", f"{pi}: step {failed_main.path} failed "
                            "for good but the instance COMPLETED", failed_main, e)
                out.counts["completed"] += 1
                ended = ended or e
            case InstanceState(status="FAILED"):
                ended = ended or e
                out.counts["failed"] += 1
                if e.cause is InstanceCause.STEP_FAILED and failed_main is None \
                        and not failed_subflows:
                    last = max(finished.values(), key=lambda f: f.seq, default=None)
                    out.add("failure_fails_the_instance", f"{pi}: FAILED for a failed step, but "
                            "no step had failed its last attempt (a retry was left)",
                            *([last] if last is not None else []), e)
    if failed_subflows:
        out.counts["subflows_failed"] += 1


def _merged(pi: str, e: ContextMerged, ctx: dict[str, Any],
            head: dict[str, tuple[str | None, int]],
            finished: dict[tuple[str, int], StepFinished], sub_ops: dict[str, list[Any]],
            failed_subflows: dict[str, StepFinished], out: _Replay) -> None:
    scope, path = e.scope, e.path
    prev = head.get(scope)
    if prev is not None and (e.version != prev[1] + 1 or (
            prev[0] is not None and e.parent_snapshot_id != prev[0] and prev[1] > 0)):
        out.add("version_chain_unbroken", f"{pi}: version chain of {scope} broken at {path}: "
                f"v{e.version} (parent {e.parent_snapshot_id}) after v{prev[1]} ({prev[0]})", e)
    head[scope] = (e.snapshot_id, e.version)
    step = finished.get((path, e.attempt))
    ops: Any
    if path in failed_subflows:
        out.add("failed_work_never_merged", f"{pi}: failed sub-flow {path} was merged into "
                "its parent", failed_subflows[path], e)
        ops = e.ops
    elif step is not None:
        if not step.ok:
            out.add("failed_work_never_merged", f"{pi}: failed attempt {e.attempt} of {path} "
                    "was merged", step, e)
        ops = step.ops
    elif scope == "main" and path in sub_ops:
        ops = sub_ops.pop(path)
    else:
        ops = e.ops   # a gate's decision: it may only write under "gates"
        if not isinstance(ops, list) or any(
                not isinstance(op, dict) or not op.get("path") or op["path"][0] != "gates"
                for op in ops):
            out.add("merge_is_snapshot_plus_writes", f"{pi}: merge of {path} wrote outside "
                    "'gates' with no step behind it", e)
    if scope != "main" and isinstance(ops, list):
        sub_ops[scope].extend(ops)
    expected = copy.deepcopy(ctx.get(scope))
    try:
        _apply(expected, ops)
    except _BadOps as exc:
        out.add("merge_is_snapshot_plus_writes", f"{pi}: the writes merged for {path} do not "
                f"apply: {exc}", e)
    if expected != e.context:
        out.add("merge_is_snapshot_plus_writes", f"{pi}: context after merging {path} is not "
                f"its snapshot plus the step's writes ({_diff(expected, e.context)[:160]})", e)
    foreign = _foreign_values(e.context, pi)
    if foreign:
        out.add("no_values_of_another_instance", f"{pi}: context holds values written by "
                f"another instance: {foreign[:3]}", e)
    ctx[scope] = e.context


def _report(h: History, c: Collector) -> None:
    """The replay's findings for the rule now running."""
    for why, events in h.memo(_replay).findings.get(c.rule, []):
        c.violation(why, *events)


@rule("seed 004 §二.3: a fresh instance's mutable context is empty")
def fresh_context_is_empty(h: History, c: Collector) -> None:
    """A new instance's context holds nothing but its input (nothing left over from
    another task through a shared template)."""
    replay = h.memo(_replay)
    for key in ("instances", "attempts", "failed_attempts", "merges"):
        if replay.counts.get(key):
            c.count(key, replay.counts[key])
    _report(h, c)


@rule("DESIGN §3 context: every step works on a copy of its scope's snapshot; seed 004")
def attempt_starts_from_its_snapshot(h: History, c: Collector) -> None:
    """Every attempt — and every sub-flow fork — starts from exactly its scope's current
    snapshot (parallel branches all from the same parent)."""
    _report(h, c)


@rule("DESIGN §3 context: a retry starts from the pre-attempt snapshot; seed 000 §5.4")
def retry_starts_from_pre_attempt_snapshot(h: History, c: Collector) -> None:
    """A retry starts from the same snapshot as the first attempt: a failed attempt's
    copy is discarded, not built on."""
    _report(h, c)


def parallel_branches(definition: Any) -> dict[str, list[str]]:
    """A definition's parallel steps (at the top level, where a process has them): step id
    -> its branch ids, in the order the definition gives them."""
    out: dict[str, list[str]] = {}
    for step in definition if isinstance(definition, list) else []:
        if isinstance(step, dict) and step.get("kind") == "parallel":
            out[str(step.get("id"))] = [str(b.get("id")) for b in step.get("branches") or []
                                        if isinstance(b, dict)]
    return out


@rule("DESIGN §3 context: a parallel step's branches are merged in branch order; seed 004")
def branches_merged_in_branch_order(h: History, c: Collector) -> None:
    """A parallel step's branches are merged into their parent in the order the definition
    lists them, whatever order they finished in: with list-growing merges (seed 004's
    `append`) another order gives another context, run by run. Judged where the branches
    really finished out of order (their attempts' ends); elsewhere every order agrees."""
    branches: dict[str, dict[str, list[str]]] = {
        i.process_inst_id: parallel_branches(i.definition) for i in h.of(InstanceStarted)}
    merged: dict[tuple[str, str], list[ContextMerged]] = defaultdict(list)
    for m in h.of(ContextMerged):
        step, _, branch = m.path.partition("/")
        if m.scope == "main" and branch and step in branches.get(m.process_inst_id, {}):
            merged[(m.process_inst_id, step)].append(m)
    finished: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in h.of(StepFinished):
        step, _, branch = f.path.partition("/")
        if f.ok and f.scope == "main" and branch \
                and step in branches.get(f.process_inst_id, {}):
            finished[(f.process_inst_id, step)].append(branch)
    for (pi, step), ms in sorted(merged.items()):
        order = branches[pi][step]
        got = [m.path.partition("/")[2] for m in ms]
        c.count("parallel_steps_merged")
        if finished.get((pi, step), got) != sorted(got, key=order.index):
            c.count("finished_out_of_branch_order")
        if got != sorted(got, key=lambda b: order.index(b) if b in order else len(order)):
            c.violation(f"{pi} merged the branches of {step} in the order {got}; the "
                        f"definition lists them {order}", *ms)


@rule("seed 004: versioned, parent-linked snapshots")
def version_chain_unbroken(h: History, c: Collector) -> None:
    """Each merge makes the next version of its scope, linked to the one before."""
    _report(h, c)


@rule("DESIGN §3 context: a failed attempt's copy is discarded; a failed sub-flow never merged")
def failed_work_never_merged(h: History, c: Collector) -> None:
    """Nothing a failed attempt or a failed sub-flow wrote is merged back."""
    _report(h, c)


@rule("DESIGN §3 context: explicit merge operators; seed 000 §5.5")
def merge_is_snapshot_plus_writes(h: History, c: Collector) -> None:
    """A context after a merge is the context before plus exactly the writes of the
    successful attempt merged (a gate's decision writes only under `gates`)."""
    _report(h, c)


@rule("DESIGN §7 context isolation: no leak between tasks or branches")
def no_values_of_another_instance(h: History, c: Collector) -> None:
    """No instance's context ever holds a value another instance wrote."""
    _report(h, c)


@rule("DESIGN §3 processes: COMPLETED and FAILED are final; seed 000 §5")
def ends_once(h: History, c: Collector) -> None:
    """An instance ends once: after its first COMPLETED or FAILED nothing of it starts,
    merges or changes state again — not a second end after a restart that found it still
    RUNNING on disk (its end never persisted), not a step of a branch still in flight."""
    c.count("ended", sum(1 for s in h.of(InstanceState) if s.status in INSTANCE_ENDS))
    _report(h, c)


@rule("DESIGN §3 context: a failed sub-flow fails its parent, never counted COMPLETED")
def failure_fails_the_instance(h: History, c: Collector) -> None:
    """An instance whose step or sub-flow failed for good never ends COMPLETED, and one
    fails for a step only once a step has spent all its attempts (1 + retries); a
    sub-flow's recorded outcome is what its steps did."""
    replay = h.memo(_replay)
    for key in ("completed", "failed", "subflows_failed"):
        if replay.counts.get(key):
            c.count(key, replay.counts[key])
    _report(h, c)


@rule("DESIGN §3 Tasks and processes: an instance runs its task's work; seed 002 §4")
def ends_with_its_task(h: History, c: Collector) -> None:
    """An instance ends with the task that runs it: once that task is terminal (its
    watchdog timed it out, a restart interrupted it), no step of the instance starts and
    no gate of it opens, and the instance is itself COMPLETED or FAILED by the end of the
    run. Work done for a task nobody waits for is work done twice when the requester asks
    again, and a gate opened for it asks a person to approve what will never resume."""
    ended: dict[tuple[str, str], TaskState] = {}
    for s in h.of(TaskState):
        if s.state in TASK_ENDS:
            ended.setdefault((s.node, s.task_id), s)
    final = {(s.node, s.process_inst_id) for s in h.of(InstanceState)
             if s.status in (InstanceStatus.COMPLETED, InstanceStatus.FAILED)}
    later: dict[tuple[str, str], list[StepStarted | GateOpenSent]] = defaultdict(list)
    steps_and_gates: list[StepStarted | GateOpenSent] = [*h.of(StepStarted), *h.of(GateOpenSent)]
    for e in steps_and_gates:
        later[(e.node, e.process_inst_id)].append(e)
    for i in h.of(InstanceStarted):
        end = ended.get((i.node, i.task_id))
        if end is None:
            continue
        c.count("instances_of_ended_tasks")
        after = sorted((e for e in later[(i.node, i.process_inst_id)] if e.seq > end.seq),
                       key=lambda e: e.seq)
        if after:
            what = f"step {after[0].path}" if isinstance(after[0], StepStarted) \
                else f"gate {after[0].gate_id}"
            c.violation(f"{what} of {i.process_inst_id} started after its task {i.task_id} "
                        f"ended {end.state} on {i.node}", end, after[0])
        elif (i.node, i.process_inst_id) not in final:
            c.violation(f"{i.process_inst_id} never ended though its task {i.task_id} ended "
                        f"{end.state} on {i.node}", i, end)


def _no_instance(h: History) -> str | None:
    return None if h.of(InstanceStarted) else "no process instance ran"


CONTEXT_ISOLATION = Checker(
    "context_isolation", "Copy-on-write, replayed: every attempt starts from its snapshot, a "
    "merge is the snapshot plus the successful writes, nothing leaks between instances, a "
    "failed sub-flow is never merged and fails its parent, an instance ends once and with its "
    "task.",
    (fresh_context_is_empty, attempt_starts_from_its_snapshot,
     retry_starts_from_pre_attempt_snapshot, version_chain_unbroken, failed_work_never_merged,
     merge_is_snapshot_plus_writes, no_values_of_another_instance, failure_fails_the_instance,
     ends_once, ends_with_its_task, branches_merged_in_branch_order),
    _no_instance, needs="processes")
