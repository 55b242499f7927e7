"""Execution (DESIGN §3 Tasks, §7; seed 002 §4): no requestId runs twice; every task walks
the task state machine to exactly one terminal state and stops there."""

from __future__ import annotations

from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.checks.network import Clocks, Transit, clocks
from bench.checks.terms import TASK_ENDS, TASK_MOVES, records_late_ms, timers_late_ms
from bench.core.events import (
    SEED,
    AttackSent,
    Event,
    InboundAdmitted,
    InstanceState,
    InstanceStatus,
    LedgerFlushed,
    LedgerRestored,
    NodeCrashed,
    NodeStarted,
    RequestSent,
    RunStarted,
    RunStopping,
    TaskExecuted,
    TasksRestored,
    TaskState,
    TaskStatus,
    Via,
)
from bench.history import History


@rule("DESIGN §3 Tasks, §7; seed 002 §4; seed 000 §3.2 (A9)")
def executed_once(h: History, c: Collector) -> None:
    """A requestId is executed at most once, on any node, across QoS1 redeliveries,
    duplicates and restarts: a duplicate request gets the stored result, never a rerun.
    Not a rerun: an attacker's forgery sent under one requestId to several nodes, once on
    each of them (with admission off, each node is right to run the request it was sent)."""
    runs: dict[str, list[TaskExecuted]] = defaultdict(list)
    for e in h.of(TaskExecuted):
        runs[e.task_id].append(e)
    forged_to: dict[str, set[str]] = defaultdict(set)     # requestId -> the nodes it was sent to
    for a in h.of(AttackSent):
        if a.request_id is not None and a.target_node_id is not None:
            forged_to[a.request_id].add(a.target_node_id)
    c.count("tasks", len(runs))
    c.count("executions", sum(len(v) for v in runs.values()))
    for task_id, events in sorted(runs.items()):
        nodes = [e.node for e in events]
        if len(events) > 1 and len(set(nodes)) == len(nodes) and set(nodes) <= forged_to[task_id]:
            c.count("forgery_run_once_on_each_node_it_was_sent_to")
        elif len(events) > 1:
            c.count("executed_more_than_once")
            c.violation(f"requestId {task_id} executed {len(events)} times on "
                        f"{sorted({e.node for e in events})}", *events, taskId=task_id)


#: DESIGN §3: the inbound ledger remembers a messageId for 24 h, and is flushed every 5 s;
#: an admission more than two intervals (one flush may come late) before a crash is on disk.
LEDGER_TTL_MS = 24 * 3600 * 1000.0
LEDGER_FLUSH_MS = 5_000.0
LEDGER_UNFLUSHED_MS = 2 * LEDGER_FLUSH_MS
#: How late a flush may come on a busy host (a timer fires late, a batch waits its turn):
#: one interval, as LEDGER_UNFLUSHED_MS assumes. 2 s was too little: a node container on a
#: loaded 2-core machine (two docker cells side by side) flushed 7.4 s after an admission.
FLUSH_SLACK_MS = LEDGER_FLUSH_MS


@rule("DESIGN §3 Inbound: the ledger deduplicates by messageId (TTL 24 h, flushed every 5 s)")
def admitted_once(h: History, c: Collector) -> None:
    """A node admits a message at most once: a copy (a QoS1 redelivery, a duplicate
    PUBLISH, a second subscription, a replay) is dropped as a DUPLICATE — unless the
    ledger forgot it honestly: 24 h passed, or the node crashed before flushing the first
    admission (no ledger flush between it and the crash, which came within two flush
    intervals of it), or its ledger is not durable (recorded at restore). Defence in
    depth (the task store) may hide a leaky ledger from executed_once; not from here."""
    # "between" is by the history's order (seq), not by milliseconds: live, a flush and an
    # admission often share one (fidelity matrix, streaming_home_restart on Mosquitto: a
    # flush recorded just before an admission in the same millisecond counted as after it)
    first: dict[tuple[str, str], InboundAdmitted] = {}
    flushes: dict[str, list[int]] = defaultdict(list)
    for f in h.of(LedgerFlushed):
        flushes[f.node].append(f.seq)
    crashes: dict[str, list[NodeCrashed]] = defaultdict(list)
    for x in h.of(NodeCrashed):
        crashes[x.node].append(x)
    volatile = {r.node for r in h.of(LedgerRestored) if not r.durable}
    for a in h.of(InboundAdmitted):
        key = (a.node, a.message_id)
        c.count("admitted")
        was = first.get(key)
        first[key] = a
        if was is None:
            continue
        t0 = was.t_ms
        forgot = a.t_ms - t0 >= LEDGER_TTL_MS or any(
            was.seq < crash.seq < a.seq and (a.node in volatile or (
                crash.t_ms - t0 <= LEDGER_UNFLUSHED_MS
                and not any(was.seq < f < crash.seq for f in flushes[a.node])))
            for crash in crashes[a.node])
        if forgot:
            c.count("admitted_again_after_the_ledger_forgot")
        else:
            c.violation(f"{a.node} admitted {a.message_type} {a.message_id} again, "
                        f"{a.t_ms - t0:.0f} ms after the first time", a)


def frozen_windows(h: History) -> dict[str, list[tuple[float, float]]]:
    """Each node's windows frozen by the pause fault: it ran nothing, its timers included,
    until it was thawed."""
    from bench.checks.network import fault_windows
    frozen: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for f in h.memo(fault_windows):
        if f.fault == "pause":
            for n in f.nodes:
                frozen[n].append((f.start_ms, f.end_ms))
    return frozen


@rule("DESIGN §3: the inbound ledger is flushed every 5 s")
def ledger_flushed_on_time(h: History, c: Collector) -> None:
    """A durable ledger holding admissions it has not flushed yet is flushed within its
    5 s interval (and one interval of slack, and as late as a wall clock's timers may fire:
    a loaded machine stalls an event loop), while its node is up and running (time it
    spent frozen by the pause fault does not count): a node that stops flushing (its
    timer not re-armed, a flush that skips a dirty ledger) forgets, at its next crash,
    everything it admitted since — redelivered copies would run again."""
    frozen = h.memo(frozen_windows)
    bound = LEDGER_FLUSH_MS + FLUSH_SLACK_MS + timers_late_ms(h)

    def running(node: str, start: float, end: float) -> float:
        return (end - start) - sum(max(0.0, min(end, b) - max(start, a))
                                   for a, b in frozen[node])
    volatile = {r.node for r in h.of(LedgerRestored) if not r.durable}
    events: list[Event] = sorted([*h.of(InboundAdmitted), *h.of(LedgerFlushed),
                                  *h.of(NodeStarted), *h.of(NodeCrashed)], key=lambda e: e.seq)
    # live, the run stops its nodes at the end (on a loaded machine seconds before
    # run_finished): a node is judged up to that moment
    stopping = min((e.t_ms for e in h.of(RunStopping)), default=h.end_ms)
    pending: dict[str, InboundAdmitted] = {}     # node -> its oldest unflushed admission
    late_at: dict[str, Event] = {}               # node -> the event that found it late

    def check(node: str, now: float, at: Event) -> None:
        first = pending.get(node)
        if first is not None and node not in late_at \
                and running(node, first.t_ms, now) > bound:
            late_at[node] = at
            c.violation(f"{node} admitted {first.message_id} at {first.t_ms:.0f} ms and had "
                        f"not flushed its ledger {now - first.t_ms:.0f} ms later", first, at)
    for e in events:
        if e.node in volatile:
            continue
        match e:
            case NodeStarted() | NodeCrashed():
                pending.pop(e.node, None)
                late_at.pop(e.node, None)
            case LedgerFlushed():
                check(e.node, e.t_ms, e)
                pending.pop(e.node, None)
                c.count("flushes")
            case InboundAdmitted() if e.via == Via.MQTT:
                check(e.node, e.t_ms, e)
                pending.setdefault(e.node, e)
    for node, first in pending.items():
        check(node, stopping, first)


def _boots(h: History) -> dict[str, list[float]]:
    """node -> when each of its boots began."""
    boots: dict[str, list[float]] = defaultdict(list)
    for s in h.of(NodeStarted):
        boots[s.node].append(s.t_ms)
    return boots


def _trails(h: History) -> dict[tuple[str, str], list[TaskState]]:
    trails: dict[tuple[str, str], list[TaskState]] = defaultdict(list)
    for e in h.of(TaskState):
        trails[(e.node, e.task_id)].append(e)
    return trails


def _reaches(a: TaskStatus, b: TaskStatus) -> bool:
    """Whether the task state machine leads from `a` to `b` (in none or more moves)."""
    seen, todo = {a}, [a]
    while todo:
        s = todo.pop()
        for x, y in TASK_MOVES:
            if x == s and y not in seen:
                seen.add(y)
                todo.append(y)
    return b in seen


def _kills_read_back(h: History) -> dict[str, list[tuple[int, int]]]:
    """node -> (seq of a crash, seq of the task table read back after it) for each crash its
    node came back from with tasks on disk (tasks_restored)."""
    restores: dict[str, list[int]] = defaultdict(list)
    for r in h.of(TasksRestored):
        restores[r.node].append(r.seq)
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for x in h.of(NodeCrashed):
        back = min((s for s in restores[x.node] if s > x.seq), default=None)
        if back is not None:
            out[x.node].append((x.seq, back))
    return out


@rule("DESIGN §3 Tasks: SUBMITTED → RUNNING → one terminal state")
def legal_transitions(h: History, c: Collector) -> None:
    """Every task starts SUBMITTED, moves only along the task state machine, says which
    state it left, and never changes state after a terminal one. A node records a state
    only once it is on disk, so a kill may cut records whose states were written: across
    a crash its node came back from, reading its task table, the first record may say it
    left a state whose record never came (SUBMITTED, RUNNING, then after the restart FAILED
    "interrupted" from RUNNING, the RUNNING record cut), if the machine leads there."""
    trails = _trails(h)
    kills = h.memo(_kills_read_back)
    c.count("tasks", len(trails))

    def cut(node: str, after: int, before: int) -> bool:
        return any(after < x < back < before for x, back in kills[node])

    for (node, task_id), events in sorted(trails.items()):
        first = events[0]
        if first.state != TaskStatus.SUBMITTED or first.previous is not None:
            if first.previous is not None and (first.previous, first.state) in TASK_MOVES \
                    and cut(node, 0, first.seq):
                c.count("records_cut_by_a_kill")
            else:
                c.violation(f"task {task_id} on {node} did not start SUBMITTED", first)
        terminal_seen: TaskState | None = None
        for prev, cur in zip(events, events[1:], strict=False):
            if terminal_seen is not None:
                c.violation(f"task {task_id} on {node} changed state after terminal "
                            f"{terminal_seen.state}", terminal_seen, cur)
                break
            if (prev.state, cur.state) in TASK_MOVES and cur.previous == prev.state:
                pass
            elif cur.previous is not None and (cur.previous, cur.state) in TASK_MOVES \
                    and _reaches(prev.state, cur.previous) and cut(node, prev.seq, cur.seq):
                c.count("records_cut_by_a_kill")
            else:
                c.violation(f"task {task_id} on {node}: illegal {prev.state} -> {cur.state}",
                            prev, cur)
            if cur.state in TASK_ENDS:
                terminal_seen = cur


@rule("DESIGN §3 Tasks: every task ends; one found RUNNING after a restart ends FAILED")
def reaches_terminal(h: History, c: Collector) -> None:
    """Every task ends in a terminal state before the run ends (one still running at the
    end is undecided, not wrong). A task its node was running when it crashed is on disk
    (a node records a state only once it is persisted): once the node is back, it ends
    the task FAILED ("interrupted") or, if its instance waits at a gate, keeps it running
    — or says it read the task back already ended (tasks_restored): the end was written
    and the kill cut its record, which follows the write. A task the restarted node never
    mentions again was lost with the process."""
    boots = h.memo(_boots)
    paused: dict[str, list[InstanceState]] = defaultdict(list)
    for i in h.of(InstanceState):
        if i.task_id:
            paused[i.task_id].append(i)
    crashes = h.memo(Transit).crashes
    late = h.end_ms - 3_000
    restored_ended: dict[str, list[tuple[float, set[str]]]] = defaultdict(list)
    for r in h.of(TasksRestored):
        restored_ended[r.node].append((r.t_ms, set(r.ended)))
    for (node, task_id), events in sorted(_trails(h).items()):
        last = events[-1]
        if last.state in TASK_ENDS:
            c.count(f"ended_{last.state.lower()}")
            continue
        crash = min((t for t in crashes[node] if t >= last.t_ms), default=None)
        back = min((t for t in boots[node] if crash is not None and t > crash), default=None)
        states = [i for i in paused[task_id] if crash is not None and i.t_ms <= crash]
        waiting = bool(states) and states[-1].status == InstanceStatus.PAUSED
        if back is None or back > late or waiting:
            c.unknown("unfinished_at_end")
        elif task_id in next((ended for t, ended in restored_ended[node] if t >= back), ()):
            # its end reached the disk and the kill cut its record: the node read it back
            c.count("ended_unjournaled_before_the_crash")
        else:
            c.violation(f"task {task_id} was {last.state} on {node} when it crashed; {node} "
                        f"was back at {back:.0f} ms and never ended it (lost with the process)",
                        last)


#: How late a watchdog may end its task: a timer on a busy live host fires late, and the
#: TIMEOUT is journaled once it is on disk (in simulation it is exactly on time).
WATCHDOG_LATE_MS = 2_000.0
#: How early: a node's clock and the journal's agree to within this, live.
WATCHDOG_EARLY_MS = 50.0


@rule("DESIGN §3 Tasks: a timeout watchdog; seed 002 §4")
def times_out_on_time(h: History, c: Collector) -> None:
    """A task still running when its timeout has passed since it was submitted — the
    timeoutMs its request asked for, else the task timeout every node was configured with
    — ends then, TIMEOUT (a node down or frozen at that moment ends it once it is back; one
    restarted after its clock was set off or right cannot know how long the task waited: it
    may end it at once, or wait at most a whole timeout from the restart), and
    no task ends TIMEOUT before its timeout. An agent that hangs must not hold its task, and the
    requester waiting for it, forever. Left out: tasks no node's request asked for (an
    insider's hand-made message) and requests an attacker's tamper_payload rewrote on the
    way — what the executor was asked is not in the journal."""
    run = next(iter(h.of(RunStarted)), None)
    default = run.task_timeout_ms if run is not None else None
    if default is None:
        return   # a journal from before the timeout was recorded: nothing to judge it by
    altered = {a.message_id for a in h.of(AttackSent) if a.attack == "tamper_payload"}
    asked = {r.request_id: r.task_timeout_ms for r in h.of(RequestSent)
             if r.message_id not in altered}
    boots = h.memo(_boots)
    crashes = h.memo(Transit).crashes
    frozen = h.memo(frozen_windows)
    seen = h.memo(clocks)
    # an end a kill cut from the journal, read back from disk by the next boot
    on_disk = {(r.node, t) for r in h.of(TasksRestored) for t in r.ended}
    # the submission is journaled once its batch is on disk: on a live node, up to the
    # substrate's records_late_ms after the node took it, so an on-time watchdog can look
    # that much early (57 ms, once, on a loaded machine)
    early = WATCHDOG_EARLY_MS + records_late_ms(h)
    for (node, task_id), events in sorted(_trails(h).items()):
        if task_id not in asked:
            c.count("asked_outside_the_journal")
            continue
        timeout = asked[task_id] or default
        deadline = events[0].t_ms + timeout
        end = next((e for e in events if e.state in TASK_ENDS), None)
        if end is None and (node, task_id) in on_disk:
            c.count("ended_unjournaled_before_a_crash")
            continue
        # a node restarted after its clock was set off or right since the submission cannot
        # know how long the task has waited: ahead, the deadline looks past at the restart
        # (it ends at once); behind, it waits at most a whole timeout from the restart
        submitted = events[0].t_ms
        if end is not None and end.state == TaskStatus.TIMEOUT \
                and end.t_ms < deadline - early \
                and _clock_reset(boots[node], seen, node, submitted, end.t_ms) is not None:
            c.count("clock_set_between_submission_and_restart")
            continue
        if end is not None and end.state == TaskStatus.TIMEOUT \
                and end.t_ms < deadline - early:
            c.violation(f"task {task_id} ended TIMEOUT on {node} {end.t_ms - events[0].t_ms:.0f} ms "
                        f"after it was submitted; its timeout is {timeout} ms", events[0], end)
            continue
        due = deadline
        crash = max((t for t in crashes[node] if t <= deadline), default=None)
        if crash is not None and not any(crash < b <= deadline for b in boots[node]):
            back = min((b for b in boots[node] if b > deadline), default=None)
            if back is None:
                c.count("node_down_at_its_deadline")
                continue
            due = back
        reset = _clock_reset(boots[node], seen, node, submitted, due)
        if reset is not None and reset + timeout > due:
            c.count("clock_set_between_submission_and_restart")
            due = reset + timeout
        # a frozen node runs no timer: its watchdog fires once it is thawed
        thawed = max((b for a, b in frozen[node] if a <= due <= b), default=None)
        if thawed is not None:
            c.count("frozen_at_its_deadline")
            due = thawed
        if end is not None and end.t_ms <= due + WATCHDOG_LATE_MS:
            c.count("timed_out_on_time" if end.state == TaskStatus.TIMEOUT
                    else "ended_before_its_timeout")
        elif end is None and due + WATCHDOG_LATE_MS > h.end_ms:
            c.count("deadline_after_the_end")
        else:
            late = (end.t_ms if end is not None else h.end_ms) - due
            was = [e for e in events if e.t_ms <= due][-1].state
            c.violation(f"task {task_id} on {node} was still {was} {late:.0f} ms after its "
                        f"timeout of {timeout} ms had passed",
                        events[0], *(() if end is None else (end,)))


def _clock_reset(boots: list[float], seen: Clocks, node: str, since_ms: float,
                 until_ms: float) -> float | None:
    """The first restart of `node` after `since_ms` and by `until_ms` on a clock set off (or
    right) since `since_ms`: the node cannot know how much time passed across it."""
    return min((b for b in boots if since_ms < b <= until_ms
                and seen.off(node, b) != seen.off(node, since_ms)), default=None)


def _no_task(h: History) -> str | None:
    return None if h.of(TaskState) else "no task ran in this run"


def _nothing_executed(h: History) -> str | None:
    return None if h.of(TaskExecuted) else "no task was executed in this run"


DUPLICATE_EXECUTION = Checker(
    "duplicate_execution", "No requestId (a profile's Task.id) executes twice, on any node, "
    "across redeliveries and restarts; no node admits a message twice while its ledger "
    "should remember it.",
    (executed_once, admitted_once, ledger_flushed_on_time), _nothing_executed,
    protocols=frozenset({SEED}))
TASK_LIFECYCLE = Checker(
    "task_lifecycle", "Every task starts SUBMITTED, moves only along the task state machine "
    "and stops at exactly one terminal state, by its timeout at the latest.",
    (legal_transitions, reaches_terminal, times_out_on_time),
    _no_task)
