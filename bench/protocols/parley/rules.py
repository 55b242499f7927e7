"""Parley v1's rules: what its README promises and what the rules its modules cite say
(clauses.py), judged from the wire tap — every Parley message that crossed each node's
connection, read by the tap's own parser (wire.py) — and from the two things the wire
cannot show: that the handler's work ran (`task_executed`, the adapter's line from inside
`handle_command`) and what `execute` returned to its caller (`request_settled`: outcome and
error `code`). Nothing here imports the library.

Who is who is read off the wire: a node that publishes `req`, `cnl` or `rak` is a
commander, one that publishes `hb`, `prg` or `res` a handler. The timing is the run's
(`run_started.settings`: the topology's `[parley]`, the library's §8 defaults unless it
says). A timer of a process on a busy two-core machine fires late: a cadence rule allows
`LATE_MS` beyond its interval, and a gap a fault explains (the node's process down or
frozen, its link cut, slowed or lossy, the broker down) is not judged. What the run's stop
does (`run_stopping`: the adapters close the library, which resolves what is in flight
as `$cancelled` without the wire) is not judged either.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.checks import Checker, Collector, rule
from bench.checks.network import LINK_FAULTS, fault_windows
from bench.core.events import (
    AgentAnswered,
    BrokerDown,
    BrokerUp,
    FaultStart,
    NodeCrashed,
    RequestOutcome,
    RequestSent,
    RequestSettled,
    RunStarted,
    RunStopping,
    TaskExecuted,
    Wire,
)
from bench.history import History
from bench.protocols.parley import SPEC
from bench.protocols.parley.settings import COUNTS, TIMING

#: how late a timer of a process on a loaded machine may fire, and a message it sends
#: cross the proxy, beyond what the spec's interval says
LATE_MS = 1_500.0
#: how soon after a message reached a node its answer must be on the wire (it is handled
#: on arrival: a hop from paho's thread to the event loop)
ANSWER_MS = 1_500.0
#: a message a node published within this much of one it took in may have been sent
#: before it was read (the two crossed); and a node's own line (stamped by its clock) and
#: the tap's record of the packet behind it (stamped by the bench's, as the proxy gets to
#: it) differ by this much at most: a settlement was seen stamped 2 ms before the result
#: that caused it, on a loaded machine (CI, 2026-12-06)
CROSSED_MS = 500.0
#: the faults that end a node's process (what it held is gone with it)
ENDS_A_PROCESS = frozenset({"restart", "empty_directory", "stale_roster"})
#: how long after a node's CONNECT its subscriptions are back (the library re-subscribes
#: on the connected signal, one hop onto the event loop away)
RESUBSCRIBED_MS = 1_000.0
#: how long after a node's CONNECT its client may still be writing what it held through the
#: outage (paho writes those after its connected callback: a message published then goes
#: out first). The same hop as RESUBSCRIBED_MS's
FLUSHED_MS = RESUBSCRIBED_MS
#: §6's commander messages, §7's handler messages
COMMANDER_TYPES = frozenset({"req", "cnl", "rak"})
HANDLER_TYPES = frozenset({"hb", "prg", "res"})
TYPES = COMMANDER_TYPES | HANDLER_TYPES
#: §5's builtin codes, `$decodeError` being commander-local ("never on the wire")
BUILTIN = frozenset({"$noAck", "$executionStale", "$executionTimeout", "$cancelled", "$busy"})
LIVENESS = frozenset({"$noAck", "$executionStale", "$executionTimeout"})
#: §5: "commander-local; never on the wire"
COMMANDER_LOCAL = frozenset({"$decodeError"})
#: §4.2
ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class Msg:
    """One Parley message on one node's wire (`out`: it published it)."""

    wire: Wire
    kind: str                   # §4's t: req, hb, prg, res, rak, cnl
    id: str
    out: bool
    ok: bool | None = None
    code: str | None = None     # a res's e

    @property
    def at_ms(self) -> float:
        """When the tap saw it (the bench's clock)."""
        return self.wire.t_ms


@dataclass
class Run:
    """A Parley history, read once: every message by node and command id, who is who, the
    timing, and what the run's own doings explain."""

    timing: dict[str, float]
    topics: dict[str, str]
    stop_ms: float
    end_ms: float
    msgs: list[Msg] = field(default_factory=list)
    #: (node, command id) -> its messages on that node's wire, in order
    by: dict[tuple[str, str], list[Msg]] = field(default_factory=lambda: defaultdict(list))
    commanders: set[str] = field(default_factory=set)
    handlers: set[str] = field(default_factory=set)
    #: (node, start, end, ended) spans a disruptive fault, a crash or the broker's absence
    #: explains; `ended`: the node's process ended in it (what it had in hand is gone)
    disturbed: list[tuple[str, float, float, bool]] = field(default_factory=list)
    #: node -> when its process ended (a crash, a restart fault's stop): a new life after
    crashes: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: every PUBLISH a Parley node sent on one of the command type's four topics
    published: list[Wire] = field(default_factory=list)
    #: command id -> what execute returned for it (request_settled, each time)
    settled: dict[str, list[RequestSettled]] = field(default_factory=lambda: defaultdict(list))
    #: (handler, command id) -> each time its work started (task_executed)
    executions: dict[tuple[str, str], list[TaskExecuted]] = field(
        default_factory=lambda: defaultdict(list))
    #: node -> when each of its connections began (its CONNECTs on the tap)
    connects: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: (node, command id) -> each time a req for it reached the node, MQTT's DUP resends
    #: included (its client hands each copy to the library)
    requests_in: dict[tuple[str, str], list[float]] = field(
        default_factory=lambda: defaultdict(list))

    def ms(self, key: str) -> float:
        return self.timing[key] * 1000.0

    def of(self, node: str, command: str, t: str, out: bool) -> list[Msg]:
        return [m for m in self.by[(node, command)] if m.kind == t and m.out is out]

    def explained(self, node: str, start: float, end: float) -> bool:
        """Whether something the run did to `node` (or to every node) acted in
        [start, end]: a gap there says nothing of the library."""
        return self.window(node, start, end) is not None

    def window(self, node: str, start: float, end: float) -> tuple[float, bool] | None:
        """The latest end of what the run did to `node` in [start, end], and whether its
        process ended in it; None: nothing did."""
        hit = [(b, ended) for who, a, b, ended in self.disturbed
               if a <= end and b >= start and who in ("*", node)]
        if not hit:
            return None
        return max(b for b, _e in hit), any(e for _b, e in hit)

    def judged(self, *at: float) -> bool:
        """Whether these moments are before the run's stop (what follows is the close)."""
        return all(t <= self.stop_ms for t in at)


def read(h: History) -> Run:
    """The history as the rules read it (once: `_run` memoizes it)."""
    started = h.of(RunStarted)
    settings: dict[str, Any] = dict((started[0].settings or {}) if started else {})
    timing = {k: float(settings.get(k, v)) for k, v in {**TIMING, **COUNTS}.items()}
    stops = h.of(RunStopping)
    run = Run(timing, dict(settings.get("topics") or {}),
              stops[0].t_ms if stops else h.end_ms, h.end_ms)
    topics = set(run.topics.values())
    connects = run.connects
    tapped: set[tuple[str, str, int | None, str, str]] = set()
    for e in h.of(Wire):
        if e.packet == "CONNECT" and e.direction == "out":
            connects[e.node].append(e.t_ms)
        if e.packet != "PUBLISH":
            continue
        if e.direction == "out" and e.topic in topics:
            run.published.append(e)
        body = e.body
        if not isinstance(body, dict) or "bad" in body:
            continue
        t, command = body.get("t"), body.get("id")
        if not isinstance(t, str) or not isinstance(command, str):
            continue
        if t == "req" and e.direction == "in":
            run.requests_in[(e.node, command)].append(e.t_ms)
        # a DUP is MQTT's resend of a packet the tap already saw: not a Parley message again.
        # One whose first copy the tap never saw (sent into a partition, held by the client
        # until it reconnected) is the message's first appearance on the wire
        copy = (e.node, e.direction, e.packet_id, t, command)
        if e.dup and copy in tapped:
            continue
        tapped.add(copy)
        ok, code = body.get("ok"), body.get("e")
        m = Msg(e, t, command, e.direction == "out", ok if isinstance(ok, bool) else None,
                code if isinstance(code, str) else None)
        run.msgs.append(m)
        run.by[(e.node, command)].append(m)
        # a commander sends req, cnl, rak and takes in hb, prg, res; a handler the other
        # way round (one that takes requests in and answers nothing is still a handler)
        if (t in COMMANDER_TYPES) == m.out:
            run.commanders.add(e.node)
        else:
            run.handlers.add(e.node)
    # a fault that may swallow or hold a node's messages explains a gap in its window (one
    # that only adds copies, as a redelivery, explains none)
    disruptive = {f.fault_index for f in h.of(FaultStart) if f.disrupts
                  or f.fault in LINK_FAULTS or f.fault in ENDS_A_PROCESS}
    for index, w in zip((f.fault_index for f in h.of(FaultStart)), fault_windows(h),
                        strict=True):
        if index not in disruptive:
            continue
        for who in w.nodes or ("*",):
            ended = w.fault in ENDS_A_PROCESS
            run.disturbed.append((who, w.start_ms, w.end_ms, ended))
            if ended:    # a new process life, however it was stopped
                run.crashes[who].append(w.start_ms)
    for x in h.of(NodeCrashed):
        run.crashes[x.node].append(x.t_ms)
        run.disturbed.append((x.node, x.t_ms, x.t_ms + 1.0, True))
    # the broker away: from its going to each node's first CONNECT after it came back
    # (paho's own reconnect, after its backoff), and the resubscription that follows
    ups = [u.t_ms for u in h.of(BrokerUp)]
    for d in h.of(BrokerDown):
        up = min((u for u in ups if u >= d.t_ms), default=h.end_ms)
        for node, times in connects.items():
            back = min((t for t in times if t >= up), default=h.end_ms)
            run.disturbed.append((node, d.t_ms, back + RESUBSCRIBED_MS, False))
    for s in h.of(RequestSettled):
        if s.task_id:
            run.settled[s.task_id].append(s)
    for started_work in h.of(TaskExecuted):
        run.executions[(started_work.node, started_work.task_id)].append(started_work)
    return run


def _run(h: History) -> Run:
    return h.memo(read)


def _commands(run: Run) -> list[tuple[str, str]]:
    """(commander, command id) of every command a commander sent."""
    return [(m.wire.node, m.id) for m in run.msgs if m.out and m.kind == "req"
            and m is run.of(m.wire.node, m.id, "req", True)[0]]


def _sign_of_life(run: Run, node: str, command: str) -> Msg | None:
    """C2: the first hb, prg or res for the command on its commander's wire."""
    return next((m for m in run.by[(node, command)] if not m.out and m.kind in HANDLER_TYPES),
                None)


def _cadence(run: Run, c: Collector, node: str, times: list[float], until: float,
             every_ms: float, what: str, *cite: Any) -> None:
    """Each gap of `times` (and the last one to `until`) is at most `every_ms` late by
    LATE_MS, unless the run explains it (no time before `until`: nothing to judge)."""
    if not times:
        return
    for a, b in zip(times, [*times[1:], until], strict=True):
        if b - a <= every_ms + LATE_MS:
            c.count("gaps_kept")
            continue
        if not run.judged(b):
            c.count("gaps_explained")
            continue
        w = run.window(node, a, b)
        if w is not None and (w[1] or b - max(a, w[0]) <= every_ms + LATE_MS):
            c.count("gaps_explained")   # its process ended, or it resumed once let
        elif w is not None:
            c.violation(f"{what}: {b - w[0]:.0f} ms after the fault on {node} ended, still "
                        f"none on its wire (every {every_ms:.0f} ms, +{LATE_MS:.0f} ms "
                        "late)", *cite)
        else:
            c.violation(f"{what}: {b - a:.0f} ms without one on {node}'s wire "
                        f"(every {every_ms:.0f} ms, +{LATE_MS:.0f} ms late)", *cite)


# -- the commander (§6, C1-C8) ---------------------------------------------------------------
@rule("C1 (ParleyConfig.request_retry_interval: \"req re-publish interval while SENDING\"); "
      "README: \"Requests are re-sent until the other side shows a sign of life\"")
def requests_resent_until_a_sign_of_life(h: History, c: Collector) -> None:
    """While a command has had no sign of life (no hb, prg or res for it on its commander's
    wire) and is not settled or being cancelled, its `req` is published again every
    request_retry_interval. Each re-sent `req` counts `requests_resent`: the retry was
    tried (a run whose commands all met a sign of life within an interval never tried it)."""
    run = _run(h)
    settled = run.settled
    for node, command in _commands(run):
        reqs = run.of(node, command, "req", True)
        life = _sign_of_life(run, node, command)
        ends = [s.t_ms for s in settled.get(command, [])]
        cancels = [m.at_ms for m in run.of(node, command, "cnl", True)]
        until = min([life.at_ms if life else run.end_ms, *ends, *cancels, run.stop_ms])
        times = [m.at_ms for m in reqs if m.at_ms <= until]
        c.count("commands")
        if len(times) > 1:
            c.count("requests_resent", len(times) - 1)
        _cadence(run, c, node, times, until, run.ms("request_retry_interval"),
                 f"command {command} had no sign of life and no req", reqs[0].wire)


@rule("C2 (\"first sign of life — enter LIVE, stop req retries\", as commander.py cites it)")
def no_request_after_a_sign_of_life(h: History, c: Collector) -> None:
    """Once an hb, prg or res for a command reached its commander, the commander publishes
    no `req` for it again."""
    run = _run(h)
    for node, command in _commands(run):
        life = _sign_of_life(run, node, command)
        if life is None:
            continue
        late = [m for m in run.of(node, command, "req", True) if m.at_ms > life.at_ms + CROSSED_MS]
        c.count("commands_with_a_sign_of_life")
        if late and run.explained(node, life.at_ms, late[0].at_ms):
            c.count("explained")   # frozen or cut off with the sign of life unread
        elif late:
            c.violation(f"command {command}: req published {late[0].at_ms - life.at_ms:.0f} ms after "
                        f"its first sign of life ({life.kind}) reached {node}", life.wire, late[0].wire)


@rule("C4/C5 (\"C4: rak every terminal error res except $busy\"; \"C5: a res for a "
      "tombstoned id re-emits rak\"); README: \"results are re-sent until acknowledged\"")
def results_acknowledged(h: History, c: Collector) -> None:
    """Every `res` for one of its commands (but a `$busy` refusal) that reaches a commander
    is answered with a `rak` for it, unless it came after the command's tombstone had
    expired (C6: nobody's then)."""
    run = _run(h)
    settled = run.settled
    for node, command in _commands(run):
        ends = [s.t_ms for s in settled.get(command, [])]
        forgotten = (ends[0] if ends else run.end_ms) + run.ms("tombstone_ttl")
        raks = [m.at_ms for m in run.of(node, command, "rak", True)]
        sent = run.of(node, command, "req", True)[0].at_ms
        for res in run.of(node, command, "res", False):
            if res.code == "$busy" or res.ok is None or res.at_ms > forgotten:
                continue   # $busy is not acked; a res without ok is no result (§4)
            if any(sent < x <= res.at_ms for x in run.crashes[node]):
                continue   # C6: the commander that sent it is gone
            if any(res.at_ms - CROSSED_MS <= t <= res.at_ms + ANSWER_MS for t in raks):
                c.count("results_acknowledged")
            elif run.explained(node, res.at_ms, res.at_ms + ANSWER_MS) \
                    or not run.judged(res.at_ms + ANSWER_MS):
                c.count("explained")
            else:
                c.violation(f"command {command}: its res ({'ok' if res.ok else res.code}) "
                            f"reached {node} and no rak followed within {ANSWER_MS:.0f} ms",
                            res.wire)


@rule("§5/C5 (\"The single terminal outcome a commander observes for a command\"; README: "
      "\"receive one typed result\", \"duplicates are recognized and dropped\")")
def one_outcome_per_command(h: History, c: Collector) -> None:
    """`execute` returns once per command, and what it returns is what the wire brought:
    a success only after an `ok: true` res for it reached the commander, an error code from
    a res only after a res with that code did (`$cancelled` and the liveness codes aside,
    which the commander may reach on its own)."""
    run = _run(h)
    for command, ends in _run(h).settled.items():
        c.count("commands_settled")
        if len(ends) > 1:
            c.violation(f"command {command}: execute returned {len(ends)} times", *ends[:2])
        end = ends[0]
        if not run.judged(end.t_ms):
            continue
        came = [m for m in run.by[(end.node, command)]
                if not m.out and m.kind == "res" and m.at_ms <= end.t_ms + CROSSED_MS]
        if end.code is None and end.outcome is RequestOutcome.COMPLETED:
            if not any(m.ok for m in came):
                c.violation(f"command {command}: execute returned success and no ok res for "
                            f"it had reached {end.node}", end)
        elif end.code is not None and end.code not in LIVENESS | COMMANDER_LOCAL:
            # $cancelled too: "a real cancel on the wire, not a local give-up" — the
            # handler's $cancelled answers it (the library's own close() aside: after the stop)
            if not any(m.code == end.code for m in came):
                c.violation(f"command {command}: execute returned {end.code} and no res with "
                            f"that code had reached {end.node}", end)


@rule("C3 (no_ack_timeout: \"sign-of-life window before any sign of life\", stale_timeout: "
      "\"sliding sign-of-life window after signs of life\", execution_timeout: \"overall "
      "execution cap from the first sign of life\"); README: \"Three distinct liveness "
      "outcomes\"")
def liveness_outcomes_are_earned(h: History, c: Collector) -> None:
    """`$noAck` only for a command no sign of life for which reached its commander, once
    no_ack_timeout passed since it was sent; `$executionStale` only after a sign of life,
    once stale_timeout passed since the last; `$executionTimeout` only once
    execution_timeout passed since the first."""
    run = _run(h)
    sent = {s.task_id: s for s in h.of(RequestSent) if s.task_id}
    for command, ends in _run(h).settled.items():
        end = ends[0]
        if end.code not in LIVENESS or command not in sent:
            continue
        c.count(end.code.lstrip("$"))
        signs = [m.at_ms for m in run.by[(end.node, command)]
                 if not m.out and m.kind in HANDLER_TYPES and m.code != "$busy"
                 and m.at_ms < end.t_ms - CROSSED_MS]
        # sent: its request_sent line, or its first req on the wire if that came first (a
        # req paho held while the broker was away reaches the wire only after it is back)
        reqs = run.of(end.node, command, "req", True)
        began = min([sent[command].t_ms, *(m.at_ms for m in reqs[:1])])
        if signs and run.explained(end.node, signs[0], end.t_ms):
            c.count("explained")   # the commander frozen or cut off with signs unread
        elif end.code == "$noAck":
            if signs:
                c.violation(f"command {command}: $noAck, and a sign of life had reached "
                            f"{end.node} {end.t_ms - signs[0]:.0f} ms before", end)
            elif end.t_ms - began < run.ms("no_ack_timeout") - CROSSED_MS:
                c.violation(f"command {command}: $noAck after {end.t_ms - began:.0f} ms (the "
                            f"window is {run.ms('no_ack_timeout'):.0f} ms)", end)
        elif not signs:
            c.violation(f"command {command}: {end.code} with no sign of life before it "
                        "(that is $noAck's case)", end)
        elif end.code == "$executionStale" \
                and end.t_ms - signs[-1] < run.ms("stale_timeout") - CROSSED_MS:
            c.violation(f"command {command}: $executionStale {end.t_ms - signs[-1]:.0f} ms "
                        f"after its last sign of life (the window is "
                        f"{run.ms('stale_timeout'):.0f} ms)", end)
        elif end.code == "$executionTimeout" \
                and end.t_ms - signs[0] < run.ms("execution_timeout") - CROSSED_MS:
            c.violation(f"command {command}: $executionTimeout {end.t_ms - signs[0]:.0f} ms "
                        f"after its first sign of life (the cap is "
                        f"{run.ms('execution_timeout'):.0f} ms)", end)


@rule("C7 (cancel_retry_interval: \"cnl re-publish interval while cancelling\"); README: "
      "\"cancelling puts a real cancel on the wire, not a local give-up\"")
def cancels_go_on_the_wire(h: History, c: Collector) -> None:
    """A command `execute` ended `$cancelled` before the run's stop had a `cnl` on the
    commander's wire first; and once cancelling, the commander publishes `cnl` again every
    cancel_retry_interval until a res for it reaches it or it settles."""
    run = _run(h)
    settled = run.settled
    for command, ends in settled.items():
        end = ends[0]
        if end.code != "$cancelled" or not run.judged(end.t_ms):
            continue
        c.count("cancelled")
        if not any(m.at_ms <= end.t_ms + CROSSED_MS
                   for m in run.of(end.node, command, "cnl", True)):
            c.violation(f"command {command}: $cancelled with no cnl on {end.node}'s wire",
                        end)
    for node, command in _commands(run):
        cnls = run.of(node, command, "cnl", True)
        if not cnls:
            continue
        answered = [m.at_ms for m in run.of(node, command, "res", False) if m.at_ms >= cnls[0].at_ms]
        until = min([*answered, *(s.t_ms for s in settled.get(command, [])),
                     run.stop_ms, run.end_ms])
        _cadence(run, c, node, [m.at_ms for m in cnls if m.at_ms <= until], until,
                 run.ms("cancel_retry_interval"), f"command {command} was cancelling, no cnl",
                 cnls[0].wire)


@rule("C1-C3 (a command ends: by a result, or by one of the liveness outcomes at the "
      "latest); README: \"receive one typed result: success or a clear error\"")
def every_command_settles(h: History, c: Collector) -> None:
    """Every command a commander sent is settled (`execute` returns) within no_ack_timeout
    + execution_timeout (+ LATE_MS): by then a result, `$noAck` or `$executionTimeout` has
    ended it — or the run ended first (undecided)."""
    run = _run(h)
    settled = run.settled
    bound = run.ms("no_ack_timeout") + run.ms("execution_timeout") + LATE_MS
    for s in h.of(RequestSent):
        if not s.task_id:
            continue
        c.count("commands")
        ends = settled.get(s.task_id)
        due = s.t_ms + bound
        if ends and ends[0].t_ms <= due:
            continue
        if due > run.stop_ms:
            c.unknown("due_after_the_stop")
        elif run.explained(s.node, s.t_ms, due):
            c.count("explained")
        else:
            c.violation(f"command {s.task_id} was not settled {bound:.0f} ms after it was "
                        "sent", s)


# -- the handler (§7, H1-H8) ------------------------------------------------------------------
@rule("README: \"At-most-once execution, correct even at QoS 0 ... at most once per handler "
      "process lifetime, for as long as the handler retains dedup/tombstone state for that "
      "command id\" (the residual cases: §9, reported as declared)")
def executed_at_most_once(h: History, c: Collector) -> None:
    """A handler runs a command id once per process life while it keeps the id's state: a
    second run with no restart between and less than tombstone_ttl after the first one's
    result is a violation; one after a restart, or after the state's retention, is §9's
    declared residual case, counted (`declared_residual_*`) and not a violation. A request
    that reached a handler again while the handler held its id, before the id's first res
    and with no new process life between, counts `requests_again_while_running`: the
    dedup this rule is about was tried (the situation a handler that forgets running
    commands fails in)."""
    run = _run(h)
    for (node, command), reqs in run.requests_in.items():
        if node in run.handlers:
            res = [m.at_ms for m in run.of(node, command, "res", True)]
            for at in reqs[1:]:
                if (not res or at < res[0]) and not any(
                        reqs[0] < x <= at for x in run.crashes[node]):
                    c.count("requests_again_while_running")
    for (node, command), runs in run.executions.items():
        c.count("executions", len(runs))
        for first, again in zip(runs, runs[1:], strict=False):
            # H5/H8: its state is kept while its result is cached (until a rak, or the
            # retries give up) and then as a tombstone for tombstone_ttl
            results = [m.at_ms for m in run.of(node, command, "res", True) if m.at_ms >= first.t_ms]
            cached = results[0] if results else again.t_ms
            raks = [m.at_ms for m in run.of(node, command, "rak", False) if m.at_ms >= cached]
            kept_until = min([*raks, cached + run.ms("result_retry_timeout")]) \
                + run.ms("tombstone_ttl")
            if any(first.t_ms < x <= again.t_ms for x in run.crashes[node]):
                c.count("declared_residual_restart")
            elif again.t_ms > kept_until:
                c.count("declared_residual_state_expired")
            else:
                c.violation(f"command {command} ran twice on {node}, "
                            f"{again.t_ms - first.t_ms:.0f} ms apart, in one process life",
                            first, again)


@rule("H4 (max_concurrent_executions: \"maximum commands executing concurrently (default 1, "
      "serial)\"; \"dequeue FIFO into at most max_concurrent_executions slots\", as "
      "handler.py cites it)")
def executions_within_the_cap(h: History, c: Collector) -> None:
    """A handler runs at most max_concurrent_executions commands at once: a command's
    execution runs from its start (the bench's agent began its work) to its end — the
    agent's answer (the same process's clock), or its first res on the wire where that is
    a cancel's (the tap's clock, CROSSED_MS apart: a cancel ends the handler task before
    the bench's agent answers; the cnl's arrival where the run's fault held the handler's
    link while that res went out, counted `cancelled_ended_at_its_cnl`), or the end of the
    handler's process; when one starts while the cap's worth of others are still running,
    that is a violation. A command admitted while the cap's worth ran, which then waited
    for a slot, counts `waited_for_a_slot`: the cap bound (a run without one never tried
    it)."""
    run = _run(h)
    cap = int(run.timing["max_concurrent_executions"])
    answers: dict[tuple[str, str], list[AgentAnswered]] = defaultdict(list)
    for a in h.of(AgentAnswered):
        answers[(a.node, a.task_id)].append(a)
    for node in run.handlers:
        spans: list[tuple[TaskExecuted, Callable[[int, float], bool]]] = []
        for (who, command), starts in run.executions.items():
            if who == node:
                spans += [(start, _running(run, start, answers[(node, command)], c))
                          for start in starts]
        for start, _ in spans:
            if not run.judged(start.t_ms):
                continue
            c.count("executions_started")
            running = [s for s, still in spans if s.task_id != start.task_id
                       and s.seq < start.seq and still(start.seq, start.t_ms)]
            if len(running) >= cap:
                c.violation(f"command {start.task_id} started on {node} while {len(running)} "
                            f"other{'s' if len(running) > 1 else ''} ran "
                            f"({', '.join(s.task_id for s in running)}): "
                            f"max_concurrent_executions is {cap}", start, *running)
                continue
            # admitted (its first hb) while the cap's worth ran: it waited for a slot
            life = max([x for x in run.crashes[node] if x <= start.t_ms], default=0.0)
            admitted = [m.wire for m in run.of(node, start.task_id, "hb", True)
                        if life <= m.at_ms <= start.t_ms + CROSSED_MS]
            if admitted and sum(still(admitted[0].seq, admitted[0].t_ms) for s, still in spans
                                if s.task_id != start.task_id and s.seq < admitted[0].seq) >= cap:
                c.count("waited_for_a_slot")


def _running(run: Run, start: TaskExecuted, answers: list[AgentAnswered],
             c: Collector) -> Callable[[int, float], bool]:
    """Whether the execution begun at `start` was still running at a line of the history
    (its seq and time)."""
    answer = next((a for a in answers if a.seq > start.seq), None)
    results = [m for m in run.of(start.node, start.task_id, "res", True)
               if m.at_ms >= start.t_ms - CROSSED_MS]
    ended = next((x for x in run.crashes[start.node] if x >= start.t_ms), run.end_ms)
    # the first res ends it (on the tap's clock, CROSSED_MS apart) where it is a cancel's —
    # a cancel ends the handler task before the bench's agent answers — or where no answer
    # came; a result's res follows the answer, which (the process's own clock) is exact: a
    # res within CROSSED_MS of another start must not hide an overrun of the cap
    cut = results[0].at_ms if results and (answer is None or results[0].code == "$cancelled") \
        else None
    if cut is not None and results[0].code == "$cancelled":
        # the tap stamps what a node sends as it leaves for the broker: where the run's own
        # fault held the node's link (a lossy link's retransmissions, latency), the res left
        # late, and the execution may have ended as early as the cnl's arrival (H7: the
        # handler task is cancelled then)
        cnl = next((m.at_ms for m in run.of(start.node, start.task_id, "cnl", False)
                    if start.t_ms - CROSSED_MS <= m.at_ms <= cut), None)
        if cnl is not None and run.explained(start.node, cnl, cut):
            cut = cnl
            c.count("cancelled_ended_at_its_cnl")
    return lambda seq, t_ms: (answer is None or answer.seq > seq) and ended > t_ms \
        and (cut is None or cut > t_ms + CROSSED_MS)


def _admitted(run: Run, node: str, command: str) -> bool:
    """Whether the handler admitted the command (it heartbeated it: H2's accept-ack)."""
    return bool(run.of(node, command, "hb", True))


@rule("H2 (\"unknown id — admit if a command slot is free, otherwise stateless $busy\"; "
      "\"the first hb is the accept-ack\", as handler.py cites it)")
def requests_answered(h: History, c: Collector) -> None:
    """A `req` for an id new to a handler is answered: by an hb for it (admitted) or a res
    (`$busy`), at once."""
    run = _run(h)
    for node in run.handlers:
        firsts: dict[str, Msg] = {}
        for m in run.msgs:
            if m.wire.node == node and not m.out and m.kind == "req":
                firsts.setdefault(m.id, m)
        for command, req in firsts.items():
            if not run.judged(req.at_ms + ANSWER_MS):
                continue
            c.count("requests")
            answers = [m for m in run.by[(node, command)]
                       if m.out and m.kind in ("hb", "res") and m.at_ms >= req.at_ms - CROSSED_MS]
            if answers and answers[0].at_ms <= req.at_ms + ANSWER_MS:
                continue
            if run.explained(node, req.at_ms, req.at_ms + ANSWER_MS):
                c.count("explained")
            else:
                c.violation(f"command {command}: req reached {node} and neither hb nor res "
                            f"followed within {ANSWER_MS:.0f} ms", req.wire)


@rule("H3 (heartbeat_interval: \"hb interval per admitted command\"; \"heartbeats run until "
      "the command's first res is published\", as handler.py cites it)")
def heartbeats_until_the_result(h: History, c: Collector) -> None:
    """From its admission to its first res, a handler heartbeats a command every
    heartbeat_interval; after its first res, no hb for it — but one its client held
    through an outage and wrote in the new connection's first FLUSHED_MS, after a res
    published meanwhile (the wire cannot say which was published first): counted."""
    run = _run(h)
    runs = _run(h).executions
    for node in run.handlers:
        for command in {m.id for m in run.msgs if m.wire.node == node and m.out and m.kind == "hb"}:
            if len(runs.get((node, command), [])) > 1:
                continue   # admitted twice (executed_at_most_once says whether it may be)
            hbs = run.of(node, command, "hb", True)
            results = run.of(node, command, "res", True)
            until = min(results[0].at_ms if results else run.end_ms, run.stop_ms)
            c.count("admitted")
            _cadence(run, c, node, [m.at_ms for m in hbs if m.at_ms <= until], until,
                     run.ms("heartbeat_interval"), f"command {command} was admitted, no hb",
                     hbs[0].wire)
            late = [m for m in hbs if results and m.at_ms > results[0].at_ms]
            if late and _held_through_an_outage(run, node, hbs, results[0], late[0]):
                c.count("hb_held_through_an_outage_after_its_res")
                late = late[1:]
            if late:
                c.violation(f"command {command}: hb on {node} {late[0].at_ms - results[0].at_ms:.0f} "
                            "ms after its first res", results[0].wire, late[0].wire)


def _held_through_an_outage(run: Run, node: str, hbs: list[Msg], res: Msg, hb: Msg) -> bool:
    """Whether the wire cannot say `hb` was published after `res`: both came out on one
    connection that followed an earlier one the command was heartbeated on, the hb the
    command's first on the new one and within FLUSHED_MS of its CONNECT. A client holds
    what is published while its connection is down and writes it once the new one is up —
    paho 2.2 after its connected callback, so a message published in that callback's time
    (the res) goes out first (docs/findings/parley-mqtt.md). Packet ids do not tell: MQTT
    leaves their order to the client. A handler that goes on heartbeating after its res
    shows on its next hb."""
    began = max((t for t in run.connects[node] if t <= res.at_ms), default=None)
    if began is None or hb.at_ms > began + FLUSHED_MS:
        return False
    return any(m.at_ms < began for m in hbs) and not any(began <= m.at_ms < hb.at_ms
                                                          for m in hbs)


@rule("H5 (result_retry_interval: \"res re-publish interval until acked\", "
      "result_retry_timeout: \"result-retry give-up window, from the first res "
      "publication\"); README: \"results are re-sent until acknowledged\"")
def results_resent_until_acknowledged(h: History, c: Collector) -> None:
    """A handler publishes an admitted command's res again every result_retry_interval
    until a rak for it reaches it, or result_retry_timeout since the first res. Each
    re-sent `res` counts `results_resent`: the retry was tried."""
    run = _run(h)
    for node in run.handlers:
        for command in {m.id for m in run.msgs if m.wire.node == node and m.out and m.kind == "res"}:
            if not _admitted(run, node, command):
                continue   # a stateless answer ($busy, $cancelled of an unknown id)
            admitted = run.of(node, command, "hb", True)[0].at_ms
            results = [m for m in run.of(node, command, "res", True) if m.at_ms >= admitted]
            if not results:
                continue
            raks = [m.at_ms for m in run.of(node, command, "rak", False) if m.at_ms >= results[0].at_ms]
            give_up = results[0].at_ms + run.ms("result_retry_timeout")
            until = min([*raks, give_up, run.stop_ms, run.end_ms])
            c.count("results")
            resent = [m.at_ms for m in results if m.at_ms <= until]
            if len(resent) > 1:
                c.count("results_resent", len(resent) - 1)
            _cadence(run, c, node, resent, until,
                     run.ms("result_retry_interval"), f"command {command}'s res was not "
                     "acknowledged, no res", results[0].wire)


@rule("H6 (\"a rak for an id not in RESULT-CACHED is ignored\"; rak moves the command to "
      "its tombstone, as handler.py cites it), H7 (a cnl for a tombstoned id: stateless "
      "$cancelled)")
def acknowledged_results_not_resent(h: History, c: Collector) -> None:
    """Once a rak for a command reached its handler, the handler publishes no res for it
    again — but a `$cancelled` answering a cnl for it (H7's stateless answer)."""
    run = _run(h)
    for node in run.handlers:
        for command in {m.id for m in run.msgs if m.wire.node == node and not m.out
                        and m.kind == "rak"}:
            rak = run.of(node, command, "rak", False)[0]
            cnls = [m.at_ms for m in run.of(node, command, "cnl", False)]
            # a new hb after it: the id admitted again, its state gone (§9's residual case,
            # executed_at_most_once's to judge): a new life of the command
            again = min([m.at_ms for m in run.of(node, command, "hb", True) if m.at_ms > rak.at_ms],
                        default=run.end_ms)
            c.count("acknowledged")
            for res in run.of(node, command, "res", True):
                if res.at_ms <= rak.at_ms + CROSSED_MS or res.at_ms >= again:
                    continue
                if res.code == "$cancelled" and any(t <= res.at_ms <= t + ANSWER_MS
                                                    for t in cnls):
                    continue
                if run.explained(node, rak.at_ms, res.at_ms):
                    c.count("explained")   # frozen with the rak unread: its timer first
                    break
                c.violation(f"command {command}: res on {node} {res.at_ms - rak.at_ms:.0f} ms after "
                            "its rak reached it", rak.wire, res.wire)
                break


@rule("H7 (\"abort the execution signal AND cancel the handler task\"; a queued command: "
      "\"dequeue and produce a cached, retried $cancelled result\"); README: \"Cancellation "
      "that reaches the running handler\"")
def cancels_reach_the_running_handler(h: History, c: Collector) -> None:
    """A cnl that reaches a handler while a command it admitted has no result yet ends the
    command: its res follows at once and is `$cancelled` — unless the bench's agent had
    already answered it (the genuine result won the race)."""
    run = _run(h)
    answered = {(a.node, a.task_id): a.t_ms for a in h.of(AgentAnswered)}
    for node in run.handlers:
        for command in {m.id for m in run.msgs if m.wire.node == node and not m.out
                        and m.kind == "cnl"}:
            cnl = run.of(node, command, "cnl", False)[0]
            hbs = [m for m in run.of(node, command, "hb", True) if m.at_ms <= cnl.at_ms]
            results = run.of(node, command, "res", True)
            if not hbs or (results and results[0].at_ms < cnl.at_ms) \
                    or not run.judged(cnl.at_ms + ANSWER_MS):
                continue   # not admitted, or its result was out before the cancel came
            c.count("cancels_while_running")
            after = [m for m in results if m.at_ms >= cnl.at_ms]
            if not after or after[0].at_ms > cnl.at_ms + ANSWER_MS:
                if run.explained(node, cnl.at_ms, cnl.at_ms + ANSWER_MS):
                    c.count("explained")
                    continue
                c.violation(f"command {command}: a cnl reached {node} while it ran and no res "
                            f"followed within {ANSWER_MS:.0f} ms", cnl.wire)
            elif after[0].code != "$cancelled" \
                    and answered.get((node, command), run.end_ms) > cnl.at_ms + CROSSED_MS:
                c.violation(f"command {command}: cancelled while it ran, and its res is "
                            f"{'ok' if after[0].ok else after[0].code}, not $cancelled",
                            cnl.wire, after[0].wire)


# -- the envelope (§3, §4, §4.2, adapter.py) ---------------------------------------------------
@rule("adapter.py: \"All publishes MUST use retain=false and MAY be QoS 0 or 1\"")
def publishes_never_retained(h: History, c: Collector) -> None:
    """Every Parley publish is retain=false, at QoS 0 or 1."""
    run = _run(h)
    for e in run.published:
        c.count("publishes")
        if e.retain or (e.qos or 0) > 1:
            c.violation(f"{e.node} published on {e.topic} with retain={e.retain}, "
                        f"QoS {e.qos}", e)


@rule("§3 (the four topics of a command type), §4 (the envelope: v 1, t one of six types, "
      "id; ok on res, e when ok is false), §5 (a custom code never begins with '$'; "
      "$decodeError is commander-local)")
def messages_are_envelopes(h: History, c: Collector) -> None:
    """Every Parley publish is a §4 envelope of version 1 whose type belongs on its topic
    (req, cnl, rak on the request topic; hb, prg, res on their own); a res carries `ok`, and
    `e` when `ok` is false, a `$` code being one of the five the wire may carry."""
    run = _run(h)
    home = {"req": "req", "cnl": "req", "rak": "req", "hb": "hb", "prg": "prg", "res": "res"}
    for e in run.published:
        c.count("publishes")
        body = e.body or {"bad": "no payload read"}
        t = body.get("t")
        if "bad" in body or body.get("v") != 1 or t not in home:
            why = body.get("bad") or f"v={body.get('v')}, t={t}"
            c.violation(f"{e.node} published a non-envelope on {e.topic}: {why}", e)
        elif run.topics.get(home[str(t)]) != e.topic:
            c.violation(f"{e.node} published a {t} on {e.topic}", e)
        elif t == "res" and (not isinstance(body.get("ok"), bool)
                             or (body.get("ok") is False and "e" not in body)):
            c.violation(f"{e.node} published a res without ok (or an error without e)", e)
        elif t == "res" and str(body.get("e", "")).startswith("$") \
                and body.get("e") not in BUILTIN:
            c.violation(f"{e.node} published the error code {body.get('e')!r}: a '$' code "
                        "the wire does not carry", e)


@rule("§4.2 (\"Ids MUST be 1–64 chars from [A-Za-z0-9_-] and carry at least 64 bits of "
      "randomness\", as id_generator.py cites it)")
def command_ids_are_valid_and_fresh(h: History, c: Collector) -> None:
    """Every command id is 1-64 characters of [A-Za-z0-9_-], and no commander gives two
    commands the same id."""
    run = _run(h)
    for e in run.published:
        command = (e.body or {}).get("id")
        if isinstance(command, str) and not ID.fullmatch(command):
            c.violation(f"{e.node} published the id {command!r}", e)
    seen: dict[str, RequestSent] = {}
    for s in h.of(RequestSent):
        if not s.task_id:
            continue
        c.count("commands")
        if s.task_id in seen:
            c.violation(f"two commands share the id {s.task_id}", seen[s.task_id], s)
        seen[s.task_id] = s


def _no_command(h: History) -> str | None:
    return None if _commands(_run(h)) else "no commander sent a command (no req on any wire)"


def _nothing_admitted(h: History) -> str | None:
    run = _run(h)
    if any(not m.out and m.kind == "req" for m in run.msgs):
        return None
    return "no request reached a handler"


def _no_publish(h: History) -> str | None:
    return None if _run(h).published else "no Parley publish was tapped"


PARLEY_COMMANDER = Checker(
    "parley_commander", "Parley v1, the commander (§6, C1-C7): a request is re-sent until a "
    "sign of life and never after one; every result is acknowledged; execute returns once, "
    "what the wire brought; the three liveness outcomes each in its own case; a cancel goes on "
    "the wire; every command ends.",
    (requests_resent_until_a_sign_of_life, no_request_after_a_sign_of_life,
     results_acknowledged, one_outcome_per_command, liveness_outcomes_are_earned,
     cancels_go_on_the_wire, every_command_settles),
    _no_command, protocols=frozenset({SPEC.name}))
PARLEY_HANDLER = Checker(
    "parley_handler", "Parley v1, the handler (§7, H1-H7, and the README's at-most-once): a "
    "command runs once per process life while its state is kept; a request is answered at "
    "once; heartbeats keep their cadence until the result, which is re-sent until "
    "acknowledged and not after; a cancel reaches the running command; no more commands "
    "run at once than the cap.",
    (executed_at_most_once, requests_answered, heartbeats_until_the_result,
     results_resent_until_acknowledged, acknowledged_results_not_resent,
     cancels_reach_the_running_handler, executions_within_the_cap),
    _nothing_admitted, protocols=frozenset({SPEC.name}))
PARLEY_ENVELOPE = Checker(
    "parley_envelope", "Parley v1, the wire (§3, §4, §4.2, §5, adapter.py): every publish "
    "an envelope of version 1 on its type's topic, never retained; results carry their "
    "outcome; command ids valid and never reused.",
    (publishes_never_retained, messages_are_envelopes, command_ids_are_valid_and_fresh),
    _no_publish, protocols=frozenset({SPEC.name}))

CHECKERS = (PARLEY_COMMANDER, PARLEY_HANDLER, PARLEY_ENVELOPE)

# the coverage table's situations read the run as the rules do (they import this module)
from bench.protocols.parley.situations import SITUATIONS  # noqa: E402

__all__ = ["CHECKERS", "SITUATIONS"]
