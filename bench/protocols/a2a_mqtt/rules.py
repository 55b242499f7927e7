"""The A2A-over-MQTT profile's rules (docs/profiles/a2a-mqtt.md), judged from what its
agents recorded — the requester's attempts, replies and settlements, the responder's
intake and replies — never from the agents' code. Each rule cites its clause ids.

The generic ones the profile shares with the seed protocol (one execution per task) live
with their family (`duplicate_execution`); these are the profile's own: every operation
ends, the retry profile is kept, every reply answers a request that was sent, on its path.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from bench.checks import Checker, Collector, rule
from bench.checks.network import LINK_FAULTS, Transit, _drained, fault_windows, held_until
from bench.checks.robustness import never_raises
from bench.checks.terms import IN_FLIGHT_AT_END_MS, records_late_ms
from bench.core.events import (
    A2A_MQTT,
    A2mAttempt,
    A2mOutcome,
    A2mPuback,
    A2mReplied,
    A2mReplyTaken,
    A2mRequestTaken,
    A2mSettled,
    A2mTaskState,
    AgentAnswered,
    AgentCalled,
    AttackSent,
    AttemptWhy,
    Event,
    ExecutorsRegistered,
    FaultFired,
    FaultHealed,
    FaultStart,
    Intake,
    MqttDisconnected,
    NodeCrashed,
    NodeStarted,
    ReplyKind,
    RequestSent,
    RequestSettled,
    RunStarted,
    TaskExecuted,
    Wire,
)
from bench.history import History

#: A2M-RETRY-1's defaults, as the bench's requester uses them
REPLY_FIRST_MS = 15_000.0
MAX_ATTEMPTS = 3
BACKOFF_MS = (1_000.0, 2_000.0, 4_000.0)
JITTER = 0.2
#: The longest an operation may take to end with nobody answering: every attempt's wait
#: and every backoff at its longest, and a stream's idle wait (A2M-RETRY-7).
STREAM_IDLE_MS = 30_000.0
OPERATION_BUDGET_MS = MAX_ATTEMPTS * REPLY_FIRST_MS + sum(BACKOFF_MS[:MAX_ATTEMPTS - 1]) \
    * (1 + JITTER) + STREAM_IDLE_MS
#: MQTT 5 §3.4.2.1: the PUBACK reason code of a PUBLISH nobody subscribes to
NO_MATCHING_SUBSCRIBERS = 0x10
#: How many requests to a pool a broker may accept, with no member taking any, before that
#: is its doing and not a member's bad moment: a pool whose every member is down queues
#: them on the members' sessions, and a member back takes them (moat-lib-mqtt 0.8.7
#: accepted 28 and delivered none)
POOL_SILENCE_AFTER = 5
#: The task states that end a correlation's stream (A2M-STREAM-2, A2M-STREAM-3).
FINAL_STATES = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
                          "TASK_STATE_REJECTED", "TASK_STATE_INPUT_REQUIRED",
                          "TASK_STATE_AUTH_REQUIRED"})
COMPLETED, FAILED, CANCELED, INPUT_REQUIRED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
                                              "TASK_STATE_CANCELED",
                                              "TASK_STATE_INPUT_REQUIRED")
#: The task states no task leaves (A2A v1.0's terminal states).
TERMINAL_STATES = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
                             "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})
#: JSON-RPC 2.0: invalid params (A2M-CTX-3's answer to a context that is not the task's)
INVALID_PARAMS = -32602
#: How early an attempt may come against the profile's wait (whole-ms clocks, a timer's
#: slack): the same allowance the seed's watchdog rules give.
EARLY_MS = 50.0
#: The profile's request and discovery topics (A2M-TOPIC-1), read here on their own
REQUEST_PREFIX, DISCOVERY_PREFIX = "$a2a/v1/request/", "$a2a/v1/discovery/"
#: How late past its Message Expiry Interval a request may still arrive: the broker counts
#: whole seconds ([MQTT-3.3.2-6] forwards what is left, rounded), and a timer's slack.
EXPIRY_SLACK_MS = 1_000.0 + EARLY_MS


# -- what responders took in and sent out: their own records, or their wire ----------------------
@dataclass(frozen=True, slots=True)
class Took:
    """A request a responder took in: from its own record (A2mRequestTaken), or, for an
    agent that keeps none (one not written here, judged from its wire tap), from the
    PUBLISH the broker handed it. `refused`: None where only the wire tells."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    response_topic: str | None
    task_id: str | None
    refused: bool | None
    event: Event
    context_id: str | None = None
    method: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply or stream item a responder published: its own record (A2mReplied), or the
    PUBLISH its wire tap saw leave it."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    kind: str           # RESULT, ERROR, STATUS, ARTIFACT; "REPLY" off the wire
    final: bool         # an error, or a status or Task whose state ends the correlation's
                        # stream (a Task still WORKING answers a retry and does not end it;
                        # an artifact chunk ends nothing, whatever state its task is in)
    task_id: str | None
    event: Event
    state: str | None = None          # the task state it carries
    context_id: str | None = None     # the contextId it carries


@dataclass(frozen=True, slots=True)
class Asked:
    """A request a requester published: its own record (A2mAttempt), or, for one that keeps
    none (written elsewhere, judged from its wire tap), the PUBLISH the tap saw leave it."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    response_topic: str | None
    method: str | None
    task_id: str | None
    context_id: str | None
    event: Event
    #: off the tap, a property_tampering fault on its link acted on it: the Correlation
    #: Data here is the one it was sent with (an altered one's mark removed), or None for
    #: one the fault stripped
    tampered: bool = False
    #: it carried a bearer token in a2a-authorization (None: its record does not say)
    bearer: bool | None = None


@dataclass(frozen=True, slots=True)
class Heard:
    """A reply a requester received on its reply topic: its own record (A2mReplyTaken), or
    the PUBLISH its wire tap saw reach it. `code`: a JSON-RPC error's; `state`: the task
    state it carried."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    code: int | None
    state: str | None
    event: Event
    #: the agent its a2a-responder-agent-id named (a pool's member, a task's delegate)
    named: str | None = None


def _askers(h: History) -> set[str]:
    """The requesters that record their attempts (the bench's reference)."""
    return {a.node for a in h.of(A2mAttempt)}


def asked(h: History) -> list[Asked]:
    """Every request a requester published, in history order."""
    own = h.memo(_askers)
    replies = h.memo(_reply_topics)
    out: list[tuple[int, Asked]] = [
        (a.seq, Asked(a.node, a.t_ms, a.topic, a.correlation,
                      next(iter(replies.get(a.node, ())), None), a.method, a.task_id,
                      a.context_id, a, bearer=a.bearer))
        for a in h.of(A2mAttempt)]
    out += _asked_off_the_wire(h, own)
    return [a for _seq, a in sorted(out, key=lambda x: x[0])]


def wire_asked(h: History) -> list[Asked]:
    """Every request a requester's wire tap saw it publish, the reference's too where it was
    tapped (a grid, --wire-tap): what the rules that read only wires judge."""
    return [a for _seq, a in sorted(_asked_off_the_wire(h, set()), key=lambda x: x[0])]


def _asked_off_the_wire(h: History, skip: set[str]) -> list[tuple[int, Asked]]:
    """The requests the taps saw leave each requester but those of `skip`, by seq."""
    out: list[tuple[int, Asked]] = []
    # the tap reads a PUBLISH after the proxy's faults acted on it
    stripped = _tampering(h, "correlation_data", "strip")
    altered = _tampering(h, "correlation_data", "alter")
    # a request a responder took in and sent on as it came (a card owner handing its task
    # over) is not one it asked
    took = {(t.node, t.response_topic, t.correlation) for t in h.memo(intake)}
    for w in h.of(Wire):
        if w.node in skip or w.direction != "out" or w.packet != "PUBLISH" \
                or not (w.topic or "").startswith(REQUEST_PREFIX):
            continue
        p = _props(w)
        corr = _text(p.get("correlationData"))
        if (w.node, _text(p.get("responseTopic")), corr) in took:
            continue
        windows = stripped[w.node] if corr is None else \
            altered[w.node] if corr.endswith(TAMPERED) else []
        tampered = any(a <= w.t_ms <= b for a, b in windows)
        if tampered and corr is not None:
            corr = corr.removesuffix(TAMPERED)
        bearer = _user(w, "a2a-authorization")
        out.append((w.seq, Asked(w.node, w.t_ms, w.topic or "", corr,
                                 _text(p.get("responseTopic")), w.rpc_method, w.task_id,
                                 w.conversation_id, w, tampered,
                                 bearer is not None and bearer.startswith("Bearer "))))
    return out


def heard(h: History) -> list[Heard]:
    """Every reply a requester received, in history order."""
    own = h.memo(_askers)
    # (its own record keeps no error code: -1, an error it may not retry on)
    out: list[tuple[int, Heard]] = [
        (r.seq, Heard(r.node, r.t_ms, r.topic, r.correlation,
                      -1 if r.reply is ReplyKind.ERROR else None, r.state, r,
                      r.responder_agent_id))
        for r in h.of(A2mReplyTaken) if r.reason is None]
    out += _heard_off_the_wire(h, own)
    return [x for _seq, x in sorted(out, key=lambda x: x[0])]


def wire_heard(h: History) -> list[Heard]:
    """Every reply a requester's wire tap saw reach it, the reference's too where tapped."""
    return [x for _seq, x in sorted(_heard_off_the_wire(h, set()), key=lambda x: x[0])]


def _heard_off_the_wire(h: History, skip: set[str]) -> list[tuple[int, Heard]]:
    """The replies the taps saw reach each requester but those of `skip`, by seq."""
    out: list[tuple[int, Heard]] = []
    subscribed: dict[tuple[str, str], float] = h.memo(_subscribed_at)
    for w in h.of(Wire):
        topic = w.topic or ""
        if w.node in skip or w.direction != "in" or w.packet != "PUBLISH" \
                or not topic.startswith("$a2a/v1/reply/") or (w.node, topic) not in subscribed:
            continue
        out.append((w.seq, Heard(w.node, w.t_ms, topic, _text(_props(w).get("correlationData")),
                                 w.rpc_error, w.task_state, w,
                                 _user(w, "a2a-responder-agent-id"))))
    return out


def _unnamed_pooled(h: History) -> set[int]:
    """The replies (their events' seq) a requester got off its wire to a request it had sent
    to a pool's topic, naming no responder: protocol errors (A2M-REQ-3) that answer nothing
    (`unnamed_pooled_replies_answer_nothing` judges that the requester knew)."""
    pooled = {(a.node, a.correlation) for a in h.memo(wire_asked)
              if a.correlation is not None and _pool_of(a.topic)}
    return {x.event.seq for x in h.memo(wire_heard) if x.named is None
            and (x.node, x.correlation) in pooled}


def _subscribed_at(h: History) -> dict[tuple[str, str], float]:
    """(tapped node, filter) -> when its first SUBSCRIBE naming that filter left it."""
    out: dict[tuple[str, str], float] = {}
    for w in h.of(Wire):
        if w.packet == "SUBSCRIBE" and w.direction == "out":
            for f in w.filters or ():
                out.setdefault((w.node, f), w.t_ms)
    return out


def _reply_topics(h: History) -> dict[str, list[str]]:
    """Each requester's reply topics: what it subscribed before asking (A2M-SESS-2)."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in h.of(ExecutorsRegistered):
        if not r.agents:
            out[r.node] += [f for f in r.subscribed if f not in out[r.node]]
    return out


def _agent_of(h: History) -> dict[str, str]:
    """Each responder node -> its agent id (what it registered)."""
    return {r.node: r.agents[0] for r in h.of(ExecutorsRegistered) if r.agents}


def _recorders(h: History) -> set[str]:
    """The responders that record what they take in and send (the bench's reference)."""
    return {e.node for e in h.of(A2mRequestTaken)} | {e.node for e in h.of(A2mReplied)}


def _props(w: Wire) -> dict[str, object]:
    return dict(w.properties) if isinstance(w.properties, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def intake(h: History) -> list[Took]:
    """Every request a responder took in, in history order."""
    own = h.memo(_recorders)
    out: list[tuple[int, Took]] = [
        (t.seq, Took(t.node, t.t_ms, t.topic, t.correlation, t.response_topic, t.task_id,
                     t.intake in (Intake.REFUSED, Intake.DROPPED), t, t.context_id, t.method))
        for t in h.of(A2mRequestTaken)]
    for w in h.of(Wire):
        if w.node in own or w.direction != "in" or w.packet != "PUBLISH" \
                or not (w.topic or "").startswith(REQUEST_PREFIX):
            continue
        p = _props(w)
        out.append((w.seq, Took(w.node, w.t_ms, w.topic or "", _text(p.get("correlationData")),
                                _text(p.get("responseTopic")), w.task_id, None, w,
                                w.conversation_id, w.rpc_method)))
    return [t for _seq, t in sorted(out, key=lambda x: x[0])]


def answers(h: History) -> list[Answer]:
    """Every reply and stream item a responder published, in history order."""
    own = h.memo(_recorders)
    out: list[tuple[int, Answer]] = [
        (r.seq, Answer(r.node, r.t_ms, r.topic, r.correlation, r.reply.value,
                       r.reply is ReplyKind.ERROR
                       or (r.reply is not ReplyKind.ARTIFACT and r.state in FINAL_STATES)
                       or (r.reply is ReplyKind.RESULT and r.state is None), r.task_id, r,
                       r.state, r.context_id))
        for r in h.of(A2mReplied)]
    for w in h.of(Wire):
        topic = w.topic or ""
        if w.node in own or w.direction != "out" or w.packet != "PUBLISH" \
                or topic.startswith((REQUEST_PREFIX, DISCOVERY_PREFIX)):
            continue
        error = w.rpc_error is not None
        out.append((w.seq, Answer(w.node, w.t_ms, topic, _text(_props(w).get("correlationData")),
                                  "ERROR" if error else "REPLY",
                                  error or w.task_state in FINAL_STATES, w.task_id, w,
                                  w.task_state, w.conversation_id)))
    return [a for _seq, a in sorted(out, key=lambda x: x[0])]


def _sent(h: History) -> set[tuple[str | None, str]]:
    """The reply paths (Response Topic, Correlation Data) of every request a requester sent:
    what tells its requests from an attacker's injections."""
    return {(a.response_topic, a.correlation) for a in h.memo(asked) if a.correlation}


def _answers_by_path(h: History) -> dict[tuple[str | None, str], list[Answer]]:
    """Every answer a responder published, by the reply path it went to."""
    out: dict[tuple[str | None, str], list[Answer]] = defaultdict(list)
    for a in h.memo(answers):
        if a.correlation is not None:
            out[(a.topic, a.correlation)].append(a)
    return out


@rule("A2M-RETRY-5, A2M-RETRY-1, A2M-STREAM-2: an operation ends — answered, refused, or "
      "given up after its last attempt; the requester never forgets one")
def every_operation_settles(h: History, c: Collector) -> None:
    """Every operation a requester began (its first attempt) ends in a settlement: the
    answer, an error, or NO_REPLY once its attempts ran out — at once when a final reply
    (a result, an error, a terminal status) reached it. Undecided: one that got no final
    reply and was still within its budget (every attempt's wait, every backoff, a
    stream's idle wait) when the run ended, or whose requester crashed meanwhile.

    A requester written elsewhere is held to the same budget through its contract's
    lines: every operation it said it took on (request_sent) it says it ended
    (request_settled) within OPERATION_BUDGET_MS — an answer, an error, or its give-up
    after the profile's attempts (liveness, the requester's side)."""
    _contract_operations_settle(h, c)
    settled = {(e.node, e.op_id) for e in h.of(A2mSettled)}
    first: dict[tuple[str, str], A2mAttempt] = {}
    for a in h.of(A2mAttempt):
        first.setdefault((a.node, a.op_id), a)
    final: dict[tuple[str, str], A2mReplyTaken] = {}
    for r in h.of(A2mReplyTaken):
        # a SendMessage's result that is a Task still WORKING or SUBMITTED (a retry answered
        # before the task ended) ends nothing: the requester follows it up; any result ends
        # a GetTask or a CancelTask
        asked = first.get((r.node, r.op_id or ""))
        if r.op_id is not None and r.reason is None and (
                r.reply is ReplyKind.ERROR or r.state in FINAL_STATES
                or (r.reply is ReplyKind.RESULT and (r.state is None or (
                    asked is not None and asked.method in ("GetTask", "CancelTask"))))):
            final.setdefault((r.node, r.op_id), r)
    crashes = h.memo(Transit).crashes
    c.count("operations", len(first))
    for (node, op), a in sorted(first.items()):
        if (node, op) in settled:
            continue
        answer = final.get((node, op))
        if answer is not None and not any(t >= answer.t_ms for t in crashes[node]):
            c.violation(f"{node} took a final reply to {op} and never ended it", a, answer)
        elif a.t_ms + OPERATION_BUDGET_MS > h.end_ms:
            c.unknown("open_when_the_run_ended")
        elif any(t >= a.t_ms for t in crashes[node]):
            c.count("open_when_its_requester_crashed")
        else:
            c.violation(f"{node} began {op} ({a.method} on task {a.task_id}) and never "
                        f"ended it: {(h.end_ms - a.t_ms) / 1000:.0f} s, its budget "
                        f"{OPERATION_BUDGET_MS / 1000:.0f} s", a)


#: How late past OPERATION_BUDGET_MS a requester's own report of an operation's end may come
#: (its process printing it on a loaded machine)
REPORT_SLACK_MS = 5_000.0


def _contract_operations_settle(h: History, c: Collector) -> None:
    """every_operation_settles for requesters that keep no records of the profile's (one
    written elsewhere): its request_sent and request_settled lines. Where request_sent
    names the Task.id, the bound is tighter, from its wire: nothing is waited for once
    the task has been quiet — no attempt of it sent, no reply of it heard — for the
    stream idle wait (30 s, longer than a first-reply wait and its backoff)."""
    own = h.memo(_askers)
    ends = {(e.node, e.request_id): e.t_ms for e in h.of(RequestSettled) if e.node not in own}
    crashes = h.memo(Transit).crashes
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)     # (node, task) -> times
    for a in h.memo(asked):
        if a.task_id is not None and a.node not in own:
            seen[(a.node, a.task_id)].append(a.t_ms)
    for x in h.memo(heard):
        task = x.event.task_id if isinstance(x.event, Wire) else None
        if task is not None:
            seen[(x.node, task)].append(x.t_ms)
    for s in h.of(RequestSent):
        if s.node in own:
            continue
        c.count("operations_it_reported")
        end = ends.get((s.node, s.request_id))
        bound = s.t_ms + OPERATION_BUDGET_MS + REPORT_SLACK_MS
        why = f"the profile's budget is {OPERATION_BUDGET_MS / 1000:.0f} s"
        if s.task_id is not None:
            c.count("operations_naming_their_task")
            last = max((t for t in seen[(s.node, s.task_id)] if s.t_ms - CROSSING_MS <= t
                        and (end is None or t <= end)), default=s.t_ms)
            if last + STREAM_IDLE_MS + REPORT_SLACK_MS < bound:
                bound = last + STREAM_IDLE_MS + REPORT_SLACK_MS
                why = (f"nothing of task {s.task_id} crossed its wire after {last:.0f} ms, and "
                       f"the profile waits {STREAM_IDLE_MS / 1000:.0f} s at most")
        if end is not None and end <= bound:
            continue
        if end is not None:
            c.violation(f"{s.node} ended {s.request_id} only {(end - s.t_ms) / 1000:.0f} s "
                        f"after it took it on: {why}", s)
        elif bound > h.end_ms:
            # the bench's stop ended it before its bound: no evidence either way, and not a
            # case the rule could decide on any run (every run stops with some in flight)
            c.count("open_when_the_run_ended")
        elif any(t >= s.t_ms for t in crashes[s.node]):
            c.count("open_when_its_requester_crashed")
        else:
            c.violation(f"{s.node} took {s.request_id} on at {s.t_ms:.0f} ms and never said it "
                        f"ended ({(h.end_ms - s.t_ms) / 1000:.0f} s): {why}", s)


@rule("A2M-RETRY-1, A2M-RETRY-2, A2M-RETRY-5, A2M-RETRY-6: retries with new Correlation Data "
      "and the same Task.id, after the profile's waits, at most three attempts, never once "
      "a reply came")
def retries_keep_the_profile(h: History, c: Collector) -> None:
    """An operation's attempts: at most MAX_ATTEMPTS, each with Correlation Data none of
    the others had and the Task.id of the first; a retry only after the previous attempt
    went unanswered for REPLY_FIRST_MS (or was not accepted) and its backoff (±20 %) —
    and no later than that, unless a fault acted on the requester (or on every node) or
    it crashed meanwhile; and no attempt at all once a correlated reply or stream item
    reached the requester.
    (A restart sends what was in flight again: not a retry, judged as a first.)"""
    attempts: dict[tuple[str, str], list[A2mAttempt]] = defaultdict(list)
    for a in h.of(A2mAttempt):
        attempts[(a.node, a.op_id)].append(a)
    answered: dict[tuple[str, str], float] = {}
    for r in h.of(A2mReplyTaken):
        if r.op_id is not None and r.reason is None:
            answered.setdefault((r.node, r.op_id), r.t_ms)
    # an attempt is recorded once its batch is committed (on a live node, later, by a varying
    # amount): the requester's waits are read on its own clock (sent_ms) where it says it,
    # else allowing the substrate's records_late_ms
    early = EARLY_MS + records_late_ms(h)
    crashes = h.memo(Transit).crashes
    # what may hold a retry past its time: a fault acting on the requester (a pause, a
    # partition that queues it until it is back) or on every node (the broker), a crash
    near = h.memo(fault_windows)

    def held(node: str, start: float, end: float) -> bool:
        return any(w.acts_on(start, end, node) for w in near) \
            or any(start <= x <= end for x in crashes.get(node, ()))
    for key, tries in sorted(attempts.items()):
        c.count("attempts", len(tries))
        node, op = key
        if len(tries) > MAX_ATTEMPTS:
            c.violation(f"{node} published {op} {len(tries)} times (at most {MAX_ATTEMPTS})",
                        *tries)
        if len({a.correlation for a in tries}) < len(tries):
            c.violation(f"{node} reused Correlation Data across the attempts of {op}", *tries)
        if len({a.task_id for a in tries}) > 1:
            c.violation(f"{node} changed the Task.id between the attempts of {op}: "
                        f"{sorted({a.task_id for a in tries})}", *tries)
        for before, after in zip(tries, tries[1:], strict=False):
            if key in answered and answered[key] < after.t_ms:
                c.violation(f"{node} published {op} again after a reply to it came "
                            f"(A2M-RETRY-6)", before, after)
                continue
            if after.why is AttemptWhy.RESTART:
                c.count("sent_again_after_a_restart")
                continue
            backoff = BACKOFF_MS[min(before.attempt - 1, len(BACKOFF_MS) - 1)] * (1 - JITTER)
            wait = backoff if after.why is AttemptWhy.NOT_ACCEPTED else REPLY_FIRST_MS + backoff
            if before.sent_ms is not None and after.sent_ms is not None:
                gap, slack = float(after.sent_ms - before.sent_ms), EARLY_MS
            else:
                gap, slack = after.t_ms - before.t_ms, early
            if gap < wait - slack:
                c.violation(f"{node} retried {op} {gap:.0f} ms after its attempt "
                            f"{before.attempt}; the profile waits {wait:.0f} ms", before, after)
                continue
            latest = wait / (1 - JITTER) * (1 + JITTER) if after.why is AttemptWhy.NOT_ACCEPTED \
                else REPLY_FIRST_MS + (wait - REPLY_FIRST_MS) / (1 - JITTER) * (1 + JITTER)
            if gap > latest + slack:
                if held(node, before.t_ms, after.t_ms):
                    c.count("retried_late_while_a_fault_acted")
                else:
                    c.violation(f"{node} retried {op} {gap:.0f} ms after its attempt "
                                f"{before.attempt}; the profile retries within {latest:.0f} ms "
                                "(A2M-RETRY-1: backoff 1, 2, 4 s ±20 %)", before, after)
    _wire_retries(h, c)


#: A PUBACK reason code at or above this is a failure (MQTT 5 §2.4): the PUBLISH was not
#: accepted, and the profile retries it after the backoff alone (A2M-RETRY-5)
REFUSED_FROM = 0x80


def _wire_retries(h: History, c: Collector) -> None:
    """retries_keep_the_profile for a requester that keeps no records (one written
    elsewhere), off its wire: the SendMessages it published for one Task.id with no reply to
    any of them in between are one operation's attempts — at most MAX_ATTEMPTS, each after
    the last went unanswered for REPLY_FIRST_MS and its backoff (the backoff alone where the
    broker refused the last); held to the profile's defaults (A2M-RETRY-1 lets a deployment
    configure others: a requester under test runs with the defaults, as
    docs/profiles/own-agent.md asks). The same PUBLISH sent again on a new
    connection (the same Correlation Data: QoS 1) is no attempt; attempts across one of the
    requester's restarts, or around one a property_tampering fault acted on, are not
    compared."""
    wire_asks = [a for a in h.memo(asked) if isinstance(a.event, Wire) and a.task_id
                 and a.method in ("SendMessage", "SendStreamingMessage")]
    if not wire_asks:
        return
    task_of = {(a.node, a.correlation): a.task_id for a in wire_asks}
    refused = {(w.node, w.packet_id) for w in h.of(Wire)
               if w.packet == "PUBACK" and w.direction == "in" and w.reason_codes
               and w.reason_codes[0] >= REFUSED_FROM}
    crashes = h.memo(Transit).crashes
    # the tap stamps a packet when the bench's proxy reads it: on a wall clock, as late as
    # any record (a loaded two-core machine: an attempt stamped 120 ms late made its retry
    # look early, 2026-12-06), so an early retry is one earlier than that too
    early_ms = EARLY_MS + records_late_ms(h)
    events: list[tuple[int, Asked | Heard]] = [(a.event.seq, a) for a in wire_asks]
    events += [(x.event.seq, x) for x in h.memo(heard) if isinstance(x.event, Wire)]
    chains: dict[tuple[str, str | None], list[Asked]] = defaultdict(list)
    for _seq, x in sorted(events, key=lambda e: e[0]):
        if isinstance(x, Heard):
            key = (x.node, task_of.get((x.node, x.correlation)))
            chains.pop(key, None)       # a reply came: what follows is a next turn, or judged
            continue                    # by no_request_again_after_a_reply
        key = (x.node, x.task_id)
        chain = chains[key]
        if x.tampered:
            # a fault on its link acted on it: which attempt it was is not known here
            chains[key] = []
            c.count("attempts_tampered_on_the_tap")
            continue
        if chain and chain[-1].correlation == x.correlation:
            c.count("the_same_publish_again")
            continue
        if chain and any(chain[-1].t_ms <= t <= x.t_ms for t in crashes[x.node]):
            chains[key] = chain = []
            c.count("sent_again_after_a_restart")
        c.count("wire_attempts")
        if chain:
            before, n = chain[-1], len(chain)
            backoff = BACKOFF_MS[min(n - 1, len(BACKOFF_MS) - 1)] * (1 - JITTER)
            packet = before.event.packet_id if isinstance(before.event, Wire) else None
            wait = backoff if (x.node, packet) in refused else REPLY_FIRST_MS + backoff
            gap = x.t_ms - before.t_ms
            if gap < wait - early_ms:
                c.violation(f"{x.node} sent task {x.task_id} again {gap:.0f} ms after its "
                            f"attempt {n}, with no reply between; the profile waits "
                            f"{wait:.0f} ms", before.event, x.event)
        chain.append(x)
        if len(chain) == MAX_ATTEMPTS + 1:
            c.violation(f"{x.node} sent task {x.task_id} {len(chain)} times with no reply "
                        f"between (at most {MAX_ATTEMPTS})", *(a.event for a in chain))


@rule("A2M-CTX-5, A2M-RR-7: every SendMessage for one Task.id (retries, next turns) carries "
      "the context the task was created in")
def turns_keep_the_task_and_context(h: History, c: Collector) -> None:
    """A requester that sends a task again — a retry, or its next turn after an
    input-required — names the context it created the task in (read from its records, or
    its wire): a new context would be refused (A2M-CTX-3) and the conversation lost. New
    Correlation Data for each is `no_request_again_after_a_reply`'s to judge."""
    first: dict[tuple[str, str], Asked] = {}
    for a in h.memo(asked):
        if a.task_id is None or a.method not in ("SendMessage", "SendStreamingMessage"):
            continue
        was = first.setdefault((a.node, a.task_id), a)
        if a is was:
            continue
        c.count("sent_again")
        if a.context_id != was.context_id:
            c.violation(f"{a.node} sent task {a.task_id} again in context {a.context_id!r}; "
                        f"it created it in {was.context_id!r}", was.event, a.event)


#: A2M-RR-5's Task.id: a UUID of version 4 (RFC 9562), read here on its own
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
                   re.IGNORECASE)
#: Binding errors a requester may retry on (A2M-ERR-3): request expired, responder unavailable
RETRY_ELIGIBLE = frozenset({-32003, -32004})
#: The task states after which a SendMessage for the same Task.id is the task's next turn
NEXT_TURN_STATES = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})


@rule("A2M-RR-2, A2M-RR-5, A2M-SESS-2: a request carries a Response Topic the requester "
      "subscribed first, Correlation Data, and a UUIDv4 Task.id")
def requests_carry_a_reply_path(h: History, c: Collector) -> None:
    """Every request a requester published (its record, or its wire) carries Response Topic
    and Correlation Data; a SendMessage names a Task.id that is a UUIDv4; and, of a tapped
    requester, its Response Topic is one it had subscribed before publishing (else the
    first reply can come before anyone listens)."""
    subscribed_at: dict[tuple[str, str], float] = h.memo(_subscribed_at)
    for a in h.memo(asked):
        c.count("requests_published")
        if a.tampered and a.correlation is None:
            c.count("stripped_on_the_tap")      # it left its requester with it
            continue
        if a.response_topic is None or a.correlation is None:
            missing = " and ".join(x for x, v in (("Response Topic", a.response_topic),
                                                  ("Correlation Data", a.correlation))
                                   if v is None)
            c.violation(f"{a.node} published a request to {a.topic} without {missing}",
                        a.event)
            continue
        if a.method in ("SendMessage", "SendStreamingMessage") \
                and not UUID4.match(a.task_id or ""):
            c.violation(f"{a.node} sent {a.method} with Task.id {a.task_id!r}: not a UUIDv4 "
                        "of its own making", a.event)
        if isinstance(a.event, Wire):
            at = subscribed_at.get((a.node, a.response_topic))
            if at is None or at > a.t_ms:
                c.violation(f"{a.node} published a request naming Response Topic "
                            f"{a.response_topic!r} before subscribing it", a.event)


#: A request topic: `$a2a/v1/request/{org_id}/{unit_id}/{agent_id}` or, to a pool,
#: `.../pool/{pool_id}` (A2M-TOPIC-2, A2M-TOPIC-3), each id of A2M-ID-1's alphabet
REQUEST_TOPIC = re.compile(r"^\$a2a/v1/request/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/"
                           r"(pool/)?[A-Za-z0-9_.-]+$")


@rule("A2M-RR-1, A2M-TOPIC-2, A2M-TOPIC-3: a request goes to an agent's or a pool's request "
      "topic at QoS 1, never to a shared-subscription topic")
def requests_go_to_request_topics(h: History, c: Collector) -> None:
    """Every request a requester published is on `$a2a/v1/request/{org}/{unit}/{agent}` or
    `.../pool/{pool}`, at QoS 1 (off its wire: the QoS it published with; its records say
    no QoS); and, off its wire, nothing it publishes goes to a `$share/...` topic — a
    shared subscription is a subscriber's filter, a PUBLISH there reaches no pool."""
    for a in h.memo(asked):
        c.count("request_topics_read")
        if not REQUEST_TOPIC.match(a.topic):
            c.violation(f"{a.node} published a request to {a.topic!r}: not an agent's or a "
                        "pool's request topic", a.event)
        elif isinstance(a.event, Wire) and a.event.qos != 1:
            c.violation(f"{a.node} published a request to {a.topic} at QoS {a.event.qos}, "
                        "not 1", a.event)
    own = h.memo(_askers)
    responders = {t.node for t in h.memo(intake)}
    for w in h.of(Wire):
        if w.direction == "out" and w.packet == "PUBLISH" and w.node not in own \
                and w.node not in responders and (w.topic or "").startswith("$share/"):
            c.violation(f"{w.node} published to {w.topic!r}: a shared-subscription filter, "
                        "not a pool's request topic", w)


@rule("A2M-RR-4, A2M-REQ-1: Correlation Data is no Task.id, and no two operations in "
      "flight on one reply topic share it")
def correlations_are_the_requesters_own(h: History, c: Collector) -> None:
    """Of every request a requester published (its records or its wire): its Correlation
    Data is not its Task.id (the text of one, or its hex), and it names no other operation
    still waiting on the same reply topic — one whose Task.id or method differs, before a
    final answer to it came (a retry of the same operation gets new Correlation Data:
    `no_request_again_after_a_reply` judges those)."""
    open_ops: dict[tuple[str | None, str], tuple[str | None, str | None, Asked]] = {}
    closed: set[tuple[str | None, str]] = set()
    events: list[tuple[int, Asked | Answer]] = [(a.event.seq, a) for a in h.memo(asked)]
    events += [(x.event.seq, x) for x in h.memo(answers) if x.final]
    for _seq, x in sorted(events, key=lambda e: e[0]):
        if x.correlation is None:
            continue
        if isinstance(x, Answer):
            closed.add((x.topic, x.correlation))
            continue
        key = (x.response_topic, x.correlation)
        c.count("correlations")
        try:
            text = bytes.fromhex(x.correlation).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            text = None
        if x.task_id is not None and x.task_id in (text, x.correlation):
            c.violation(f"{x.node} sent task {x.task_id} with its Task.id as Correlation Data",
                        x.event)
        held = open_ops.get(key)
        if held is not None and key not in closed and (held[0], held[1]) != (x.task_id,
                                                                            x.method):
            c.violation(f"{x.node} sent {x.method} for task {x.task_id} under Correlation Data "
                        f"{x.correlation}, which {held[1]} for task {held[0]} still waited on",
                        held[2].event, x.event)
        open_ops[key] = (x.task_id, x.method, x)
        closed.discard(key)


@rule("A2M-CTX-4: a request's a2a-context-id, where it sets one, is its message's contextId")
def context_property_matches_the_payload(h: History, c: Collector) -> None:
    """Off a requester's wire: a request carrying both User Property `a2a-context-id` and
    a `Message.context_id` in its payload carries the same context in both (the payload is
    authoritative: a responder routing by the property files the task elsewhere). The
    tap reads a request after the faults on its link: a value a property_tampering fault
    added or altered there (its mark, in its window) is not the requester's."""
    windows = [_tampering(h, "user_property", "add"), _tampering(h, "user_property", "alter")]
    for a in h.memo(asked):
        if not isinstance(a.event, Wire):
            continue
        said = _user(a.event, "a2a-context-id")
        if said is not None and said.endswith(TAMPER_TEXT) and any(
                x <= a.t_ms <= y for w in windows for x, y in w.get(a.node, ())):
            c.count("context_properties_tampered_on_the_tap")
            continue
        if said is None or a.event.conversation_id is None:
            continue
        c.count("requests_naming_their_context_twice")
        if said != a.event.conversation_id:
            c.violation(f"{a.node} sent task {a.task_id} with a2a-context-id {said!r} and "
                        f"contextId {a.event.conversation_id!r} in its payload", a.event)


@rule("A2M-DUP-1: a redelivered reply settles nothing twice")
def nothing_settled_twice(h: History, c: Collector) -> None:
    """Each operation a requester began ends once (its `request_settled`, recorded or said
    on the contract): a reply delivered again (QoS 1, DUP), or one more answer to an attempt
    already answered, does not end it a second time."""
    copies: set[tuple[str, str | None, int | None]] = set()
    for x in h.memo(heard):
        if not isinstance(x.event, (A2mReplyTaken, Wire)):
            continue
        again = (x.node, x.correlation, x.event.packet_id)
        if x.event.dup or (x.event.packet_id is not None and again in copies):
            c.count("redelivered_replies")     # DUP set, or the same packet id once more
        copies.add(again)
    first: dict[tuple[str, str], RequestSettled] = {}
    requesters = h.memo(_requesters)
    for s in h.of(RequestSettled):
        if s.node not in requesters:
            continue
        c.count("settlements")
        earlier = first.setdefault((s.node, s.request_id), s)
        if earlier is not s:
            c.violation(f"{s.node} settled {s.request_id} twice: {earlier.outcome.value} at "
                        f"{earlier.t_ms:.0f} ms, {s.outcome.value} at {s.t_ms:.0f} ms",
                        earlier, s)


def _requesters(h: History) -> set[str]:
    """The profile's requesters: those that recorded an attempt, or whose wire shows a
    request leaving them."""
    return {a.node for a in h.memo(asked)}


@rule("A2M-RETRY-9: a request's Message Expiry Interval, if set, outlasts the first-reply wait")
def request_expiry_outlasts_the_wait(h: History, c: Collector) -> None:
    """Off a requester's wire: a request that carries a Message Expiry Interval sets it
    above the profile's 15 s first-reply wait (a shorter one expires a request its
    requester still waits on: the retry then finds nothing to deduplicate against)."""
    for a in h.memo(asked):
        if not isinstance(a.event, Wire):
            continue
        expiry = _props(a.event).get("messageExpiryS")
        if not isinstance(expiry, int):
            continue
        c.count("requests_with_an_expiry")
        if expiry * 1000 <= REPLY_FIRST_MS:
            c.violation(f"{a.node} published a request with a Message Expiry Interval of "
                        f"{expiry} s, within the {REPLY_FIRST_MS / 1000:.0f} s first-reply wait",
                        a.event)


#: A2M-SESS-4's "high collision resistance", in bits: what a reply suffix must hold once the
#: names it is built of are taken out. 48 bits give two of 10,000 concurrent requesters
#: of one agent id the same suffix with odds of about 2 in 10 million (n^2 / 2^49); a
#: UUIDv4's 122 bits, 12 hex digits' 48 pass; a node id or a counter does not.
SUFFIX_BITS = 48


def _suffix_bits(suffix: str, names: set[str]) -> float:
    """What `suffix` may hold of chance, in bits: its characters less every known name in
    it (its node, client and agent ids, org and unit) and separators, each worth the
    alphabet its kind of characters spans (hex digits 4 bits, digits and lower case
    letters 5.2, both cases 5.95)."""
    rest = suffix.lower()
    for name in sorted(names, key=len, reverse=True):
        if len(name) >= 3:
            rest = rest.replace(name.lower(), "")
    rest = re.sub(r"[-_./]", "", rest)
    if not rest:
        return 0.0
    cased = any(ch.isupper() for ch in suffix)
    alphabet = 16 if re.fullmatch(r"[0-9a-f]+", rest) else 10 if rest.isdigit() \
        else 62 if cased else 36
    return len(rest) * math.log2(alphabet)


@rule("A2M-SESS-4: a requester's reply topic suffix resists collisions: concurrent "
      "requesters never share a reply stream")
def reply_suffixes_resist_collisions(h: History, c: Collector) -> None:
    """Per requester, each Response Topic its requests name: the suffix after its agent id
    (`$a2a/v1/reply/{org}/{unit}/{agent_id}/{reply_suffix}`; the last level of a topic
    not of that shape) holds at least SUFFIX_BITS of chance once the names it is built of
    are taken out (a node id, a client id, `r-client-1`: none), and no two requesters name
    the same reply topic."""
    started = h.of(RunStarted)
    client_ids = (started[0].client_ids if started else None) or {}
    users: dict[str, set[str]] = defaultdict(set)
    judged: set[tuple[str, str]] = set()
    for a in h.memo(asked):
        topic = a.response_topic
        if not topic or (a.node, topic) in judged:
            continue
        judged.add((a.node, topic))
        users[topic].add(a.node)
        c.count("reply_topics")
        levels = topic.split("/")
        shaped = topic.startswith("$a2a/v1/reply/") and len(levels) > 6
        suffix = "/".join(levels[6:]) if shaped else levels[-1]
        names = {a.node, *(client_ids.get(a.node, "").split("/")),
                 *(levels[3:6] if shaped else ())}
        bits = _suffix_bits(suffix, names)
        if bits < SUFFIX_BITS:
            c.violation(f"{a.node} named the reply topic {topic}: its suffix {suffix!r} holds "
                        f"about {bits:.0f} bits of chance once its names are taken out, under "
                        f"the {SUFFIX_BITS} collision resistance asks", a.event)
    for topic, nodes in sorted(users.items()):
        if len(nodes) > 1:
            c.violation(f"{', '.join(sorted(nodes))} all named the reply topic {topic}")


#: How long past its retry's latest moment (the first-reply wait, the longest backoff with
#: its jitter) a requester judged from its wire may still send it: a busy machine's timers
UNCORRELATED_SLACK_MS = 3_000.0


@rule("A2M-REQ-2: a reply with missing or unknown Correlation Data is a protocol error, "
      "ignored: it answers nothing")
def uncorrelated_replies_answer_nothing(h: History, c: Collector) -> None:
    """Off a requester's wire: a reply that reached it without Correlation Data, or with
    Correlation Data it never sent, naming a task it had asked for (Task.id), answers none
    of its requests. Where no reply with Correlation Data of its requests for that task had
    come before it and its latest attempt was not its last, the requester, still waiting,
    must retry once the first-reply wait is over: one that never asks about the task again
    took the stray reply for its answer (the retry's own answer may come later). Undecided
    where its attempts were spent, it crashed or a fault acted on its link meanwhile, or
    the run ended before its retry was due."""
    _strays_answer_nothing(h, c, "uncorrelated_replies", lambda r, mine: (
        r.correlation is None or r.correlation not in mine))


@rule("A2M-REQ-3: a reply to a pooled request without a2a-responder-agent-id is a protocol "
      "error: it answers nothing")
def unnamed_pooled_replies_answer_nothing(h: History, c: Collector) -> None:
    """Off a requester's wire: a reply with the Correlation Data of a request it sent to a
    pool's topic that names no responder (no User Property a2a-responder-agent-id) answers
    nothing: the requester cannot tell which member holds the task. Judged as a stray reply
    is (`uncorrelated_replies_answer_nothing`): where no valid reply had come and attempts
    were left, the requester must retry once the first-reply wait is over — one that never
    asks about the task again took the unnamed reply for its answer."""
    unnamed = h.memo(_unnamed_pooled)
    _strays_answer_nothing(h, c, "unnamed_pooled_replies",
                           lambda r, mine: r.event.seq in unnamed)


def _strays_answer_nothing(h: History, c: Collector, what: str,
                           stray: Callable[[Heard, set[str]], bool]) -> None:
    """A reply `stray` calls a protocol error (given the requester's own Correlation Data)
    settles nothing: judged per (requester, Task.id) at the first such reply before any
    valid one (counts `{what}`, `{what}_ignored`); where a valid reply came after it,
    before a retry was due, that one answered the request (`{what}_then_answered`: the next
    item of a responder that streams its statuses) and the case is not one of `{what}`: what
    the requester made of the stray cannot be told."""
    # off the wire, every requester's that was tapped, the reference's too (a grid,
    # --wire-tap): its own records keep no Task.id of a reply they ignored
    sent: dict[str, set[str]] = defaultdict(set)                # node -> correlations
    asks: dict[tuple[str, str], list[Asked]] = defaultdict(list)  # (node, task) -> requests
    for a in h.memo(wire_asked):
        if a.correlation is not None:
            sent[a.node].add(a.correlation)
        if a.task_id:
            asks[(a.node, a.task_id)].append(a)
    replies = [(r, r.event) for r in h.memo(wire_heard) if isinstance(r.event, Wire)]
    # (node, task) -> when the first valid reply to one of its requests came
    answered: dict[tuple[str, str], int] = {}
    valid: dict[tuple[str, str], list[Heard]] = defaultdict(list)
    for r, w in replies:
        if not stray(r, sent[r.node]) and r.correlation in sent[r.node]:
            answered.setdefault((r.node, w.task_id or ""), w.seq)
            valid[(r.node, w.task_id or "")].append(r)
    crashes = h.memo(Transit).crashes
    windows = h.memo(fault_windows)
    judged: set[tuple[str, str]] = set()
    for r, w in replies:
        task = w.task_id
        if task is None or not stray(r, sent[r.node]):
            continue
        key = (r.node, task)
        before = [a for a in asks.get(key, ()) if a.event.seq < r.event.seq]
        if not before or key in judged or answered.get(key, r.event.seq + 1) < r.event.seq:
            continue
        judged.add(key)
        latest = before[-1]
        due = latest.t_ms + REPLY_FIRST_MS + BACKOFF_MS[1] * 1.2 + UNCORRELATED_SLACK_MS
        if not any(a.event.seq > r.event.seq for a in asks[key]) and any(
                r.event.seq < v.event.seq and v.t_ms <= due for v in valid[key]):
            # a valid reply came after it, before a retry was due (the stream's next item:
            # a responder that streams status updates): that one answered the request, and
            # what the requester made of the stray cannot be told — no case of `what`
            c.count(f"{what}_then_answered")
            continue
        c.count(what)
        if any(a.event.seq > r.event.seq for a in asks[key]):
            c.count(f"{what}_ignored")      # it asked again: still waiting
            continue
        if len(before) >= MAX_ATTEMPTS or due > h.end_ms \
                or any(latest.t_ms <= t <= due for t in crashes[r.node]) \
                or any(f.fault != "property_tampering" and (not f.nodes or r.node in f.nodes)
                       and f.start_ms <= due and f.end_ms >= latest.t_ms for f in windows):
            c.unknown("no_retry_due_before_the_end")
            continue
        if r.correlation is None:
            how = "no Correlation Data"
        elif r.correlation not in sent[r.node]:
            how = f"Correlation Data {r.correlation} it never sent"
        else:
            how = f"no a2a-responder-agent-id, to its pooled request {r.correlation}"
        c.violation(f"{r.node} got a reply for task {task} with {how} at {r.t_ms:.0f} ms and "
                    f"never asked about the task again, though no valid reply to its requests "
                    f"for it had come (attempt {len(before)} of {MAX_ATTEMPTS}, sent at "
                    f"{latest.t_ms:.0f} ms): it took a protocol error for its answer",
                    latest.event, r.event)


#: How soon after a status that ends a correlation's stream reached it a requester reports
#: the operation ended (A2M-STREAM-2, A2M-STREAM-3): at once, the spec says; the bound is a
#: loaded machine's, well below the 30 s stream idle wait a requester that does not take
#: the status for the end waits out
SETTLE_AFTER_FINAL_MS = 5_000.0
#: How long past the stream idle wait a requester has to publish its GetTask (A2M-RETRY-7):
#: a timer's slack on a loaded machine
RECOVERY_GRACE_MS = 10_000.0


def _ends_by_task(h: History) -> dict[tuple[str, str], list[float]]:
    """(requester, Task.id) -> when it reported an operation on the task ended: its own
    record (A2mSettled), or the request_settled line of one written elsewhere that names
    the Task.id."""
    own = h.memo(_askers)
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s in h.of(A2mSettled):
        out[(s.node, s.task_id)].append(s.t_ms)
    for e in h.of(RequestSettled):
        if e.task_id is not None and e.node not in own:
            out[(e.node, e.task_id)].append(e.t_ms)
    return {k: sorted(v) for k, v in out.items()}


def _asked_by_task(h: History) -> dict[tuple[str, str], list[Asked]]:
    """(requester, Task.id) -> every request it published for the task, in history order."""
    out: dict[tuple[str, str], list[Asked]] = defaultdict(list)
    for a in h.memo(asked):
        if a.task_id is not None:
            out[(a.node, a.task_id)].append(a)
    return out


@dataclass
class _Chain:
    """One operation of a requester on a task as its wire (or its records) shows it: the
    requests for one Task.id and method (SendMessage and SendStreamingMessage alike) with
    no final reply between, the stream items that came, and the reply that ended it."""

    node: str
    task: str
    method: str
    first: Asked
    items: list[Heard]
    end: Heard | None = None


def _chains(h: History) -> list[_Chain]:
    """Every requester's operations, in the order they began. A final reply (a status that
    ends the stream, an error, any result of GetTask or CancelTask) ends its chain; a
    later reply to one of its correlations (a late answer to an earlier attempt, a copy)
    is none of a new one's. A SendMessage sent again after a terminal status (a retry
    that should not have left, `no_request_again_after_a_reply`'s to judge) joins the
    operation that status ended: only input-required, auth-required or an error begins a
    new one (the task's next turn, a retry the profile allows)."""
    events: list[tuple[int, Asked | Heard]] = [(a.event.seq, a) for a in h.memo(asked)]
    events += [(x.event.seq, x) for x in h.memo(heard)]
    unnamed = h.memo(_unnamed_pooled)
    chain_of: dict[tuple[str, str], _Chain] = {}         # (node, correlation) -> its chain
    current: dict[tuple[str, str, str], _Chain] = {}    # (node, task, method) -> open chain
    done: dict[tuple[str, str, str], _Chain] = {}       # ... -> the one a terminal state ended
    out: list[_Chain] = []
    for _seq, x in sorted(events, key=lambda e: e[0]):
        if isinstance(x, Asked):
            if x.task_id is None or x.correlation is None or x.method is None:
                continue
            method = "SendMessage" if x.method == "SendStreamingMessage" else x.method
            key = (x.node, x.task_id, method)
            chain = current.get(key) or done.get(key)
            if chain is None:
                chain = current[key] = _Chain(x.node, x.task_id, method, x, [])
                out.append(chain)
            chain_of[(x.node, x.correlation)] = chain
            continue
        chain = chain_of.get((x.node, x.correlation or ""))
        if chain is None or chain.end is not None or x.event.seq in unnamed:
            continue
        if x.code is not None or x.state in FINAL_STATES or chain.method != "SendMessage":
            chain.end = x
            key = (chain.node, chain.task, chain.method)
            current.pop(key, None)
            if chain.method == "SendMessage" and x.state in TERMINAL_STATES:
                done[key] = chain
        else:
            chain.items.append(x)
    return out


@rule("A2M-STREAM-2, A2M-STREAM-3: a status that ends a correlation's stream (terminal, or "
      "input-required, auth-required) ends the requester's operation at once")
def final_statuses_end_the_operation(h: History, c: Collector) -> None:
    """Per requester, from what it published and received (its records, or its wire) and
    the ends it reports: the status that ended a SendMessage's stream — COMPLETED, FAILED,
    CANCELED or REJECTED (A2M-STREAM-2: the requester takes it as completion), input-required
    or auth-required (A2M-STREAM-3: the correlation's in-flight state cleaned up, the task
    not ended) — is followed within SETTLE_AFTER_FINAL_MS by the requester's report that an
    operation on that Task.id ended. A requester that takes only a Task result for the end,
    or keeps the correlation in flight, waits out its stream idle wait (30 s) or forever;
    what it publishes after is `no_request_again_after_a_reply`'s. A status that comes
    after the requester had reported an end since the operation began (its stream idle
    wait, A2M-RETRY-7) asks for no second one. An end reported by a GetTask or CancelTask
    on the task is taken for the operation's (the bench cannot tell an operation's end from
    another's on one Task.id: a follow-up's end may hide a late one). Undecided where the requester
    names no Task.id in its ends, or crashed, or the run ended, before the bound; not judged
    where the requester restarted between the operation's first request and the status."""
    ends = h.memo(_ends_by_task)
    reporting = {node for node, _task in ends}
    own = h.memo(_askers)
    crashes = h.memo(Transit).crashes
    late = records_late_ms(h)
    used: dict[tuple[str, str], set[int]] = defaultdict(set)
    for chain in h.memo(_chains):
        f = chain.end
        if chain.method != "SendMessage" or f is None or f.code is not None \
                or f.state not in FINAL_STATES:
            continue
        key = (chain.node, chain.task)
        c.count("operations_ended_by_a_status")
        if any(chain.first.t_ms <= t <= f.t_ms for t in crashes[chain.node]):
            # its requester restarted meanwhile: what it kept of the operation is its own
            # (a restart may forget what was in flight; every_operation_settles judges that)
            c.count("began_before_its_requester_restarted")
            continue
        if chain.node not in reporting:
            c.unknown("ends_name_no_task")
            continue
        bound = f.t_ms + SETTLE_AFTER_FINAL_MS + (late if chain.node in own else 0.0)
        times = ends.get(key, [])
        before = next((i for i, t in enumerate(times) if i not in used[key]
                       and chain.first.t_ms - CROSSING_MS <= t < f.t_ms - CROSSING_MS), None)
        if before is not None:
            # it had ended the operation already (its stream idle wait, a GetTask's end)
            used[key].add(before)
            c.count("statuses_after_the_operation_ended")
            continue
        pick = next((i for i, t in enumerate(times) if i not in used[key]
                     and t >= f.t_ms - CROSSING_MS), None)
        if pick is not None and times[pick] <= bound:
            used[key].add(pick)
            continue
        if bound > h.end_ms or any(f.t_ms - CROSSING_MS <= t <= bound
                                   for t in crashes[chain.node]):
            c.unknown("ended_by_a_status_near_the_end")
            continue
        what = "the stream's end" if f.state in TERMINAL_STATES else \
            "the end of the correlation (the task waits for its next turn)"
        if pick is None:
            c.violation(f"{chain.node} got {f.state} for task {chain.task} at {f.t_ms:.0f} ms "
                        f"and never reported the operation ended: it did not take the status "
                        f"for {what}", chain.first.event, f.event)
        else:
            used[key].add(pick)
            c.violation(f"{chain.node} got {f.state} for task {chain.task} at {f.t_ms:.0f} ms "
                        f"and reported the operation ended only "
                        f"{(times[pick] - f.t_ms) / 1000:.1f} s later: it did not take the "
                        f"status for {what}", chain.first.event, f.event)


@rule("A2M-PROP-2 (SHOULD): a reply carrying an a2a- User Property the profile does not "
      "define ends the operation as it would without it")
def replies_with_unknown_properties_taken(h: History, c: Collector) -> None:
    """Per requester: a final reply to one of its requests that carried an `a2a-` User
    Property the binding does not define (BINDING_PROPERTIES) — seen so on its wire, or
    published while a property_tampering fault added such a property to its responder's
    publishes — is followed within SETTLE_AFTER_FINAL_MS by the requester's report that an
    operation on that Task.id ended, as any final reply is: a requester that takes the
    unknown property for a protocol error, or the reply for another's, waits out its
    first-reply wait and retries instead. Judged from what was sent to it, not from what
    it says it took in. Undecided where the requester names no Task.id in its ends, or
    crashed, or the run ended, before the bound."""
    ends = h.memo(_ends_by_task)
    reporting = {node for node, _task in ends}
    own = h.memo(_askers)
    crashes = h.memo(Transit).crashes
    late = records_late_ms(h)
    adding = _tampering(h, "user_property", "add",
                        lambda key: key.startswith("a2a-") and key not in BINDING_PROPERTIES)

    def unknown_on(w: Wire) -> bool:
        return any(str(name).startswith("a2a-") and name not in BINDING_PROPERTIES
                   for name, _value in _user_pairs(w))
    by_path = {(a.response_topic, a.correlation): a for a in h.memo(asked)
               if a.correlation is not None and a.task_id is not None}
    heard_unknown = {(x.topic, x.correlation) for x in h.memo(heard)
                     if isinstance(x.event, Wire) and unknown_on(x.event)}
    judged: set[tuple[str | None, str]] = set()
    for f in h.memo(answers):
        path = (f.topic, f.correlation or "")
        ask = by_path.get(path)
        if ask is None or not f.final or path in judged:
            continue
        if path not in heard_unknown and not any(
                a <= f.t_ms <= b for a, b in adding.get(f.node, ())):
            continue
        judged.add(path)
        node, task = ask.node, str(ask.task_id)
        c.count("replies_with_unknown_properties")
        if any(ask.t_ms <= t <= f.t_ms for t in crashes[node]):
            continue
        if node not in reporting:
            c.unknown("ends_name_no_task")
            continue
        bound = f.t_ms + CROSSING_MS + SETTLE_AFTER_FINAL_MS + (late if node in own else 0.0)
        if any(f.t_ms - CROSSING_MS <= t <= bound for t in ends.get((node, task), ())):
            continue
        if bound > h.end_ms or any(f.t_ms <= t <= bound for t in crashes[node]):
            c.unknown("unknown_property_reply_near_the_end")
            continue
        c.violation(f"{node} was sent the final reply to its request for task {task} at "
                    f"{f.t_ms:.0f} ms carrying an a2a- User Property the profile does not "
                    f"define, and reported no end within "
                    f"{SETTLE_AFTER_FINAL_MS / 1000:.0f} s", ask.event, f.event)


@rule("A2M-RETRY-5: a publish the broker did not accept is retried until the attempts run out")
def refused_publishes_retried(h: History, c: Collector) -> None:
    """A request whose PUBLISH the broker refused (a PUBACK reason code of 0x80 or more)
    was not sent: the requester sends it again (new Correlation Data, the same Task.id) —
    after the profile's backoff — unless that was its last attempt. Of the reference, from
    its records: an operation it gave up NOT_SENT with attempts left. Of one written
    elsewhere: undecided — its tap shows the refusing PUBACK but not the PUBLISH it refused
    (the fault proxy refuses it before the tap's record), so which Task.id to hold to its
    retry is not on the wire."""
    for p in h.of(A2mPuback):
        if p.reason_code >= REFUSED_FROM:
            c.count("refused_publishes")
    for s in h.of(A2mSettled):
        if s.outcome is A2mOutcome.NOT_SENT and s.attempts < MAX_ATTEMPTS:
            c.violation(f"{s.node} gave up its {s.method} of task {s.task_id} as not sent after "
                        f"{s.attempts} of {MAX_ATTEMPTS} attempts: a publish not accepted is "
                        f"retried until the attempts run out", s)
    own = h.memo(_askers)
    requesters = {a.node for a in h.memo(wire_asked)}
    for w in h.of(Wire):
        if w.node in own or w.node not in requesters or w.direction != "in" \
                or w.packet != "PUBACK" or not w.reason_codes \
                or w.reason_codes[0] < REFUSED_FROM:
            continue
        c.unknown("refused_request_not_on_the_tap")


@rule("A2M-RETRY-7 (SHOULD): a stream stalled past its idle wait is recovered with GetTask on "
      "its Task.id, not by publishing the request again")
def stalled_streams_recovered_with_get_task(h: History, c: Collector) -> None:
    """Per requester, from what it published and received (its records, or its wire): a
    SendMessage whose stream had brought at least one item and then nothing — no item, no
    final status — for longer than the stream idle wait (30 s) is followed, within
    RECOVERY_GRACE_MS of that wait's end, by a GetTask on its Task.id (earlier is welcome);
    publishing the SendMessage again, or nothing, is not the recovery the profile asks
    for. Undecided where the requester crashed, or the run ended, before the bound; not
    judged where it restarted between the operation's first request and the stall."""
    crashes = h.memo(Transit).crashes
    asks = h.memo(_asked_by_task)
    for chain in h.memo(_chains):
        if chain.method != "SendMessage" or not chain.items:
            continue
        times = [x.t_ms for x in chain.items] + \
            ([chain.end.t_ms] if chain.end is not None else [h.end_ms])
        stall = next((a for a, b in zip(times, times[1:], strict=False)
                      if b - a > STREAM_IDLE_MS + EARLY_MS), None)
        if stall is None or any(chain.first.t_ms <= t <= stall for t in crashes[chain.node]):
            continue
        c.count("stalled_streams")
        due = stall + STREAM_IDLE_MS + RECOVERY_GRACE_MS
        after = [a for a in asks.get((chain.node, chain.task), ()) if stall < a.t_ms <= due]
        first = after[0] if after else None
        if first is not None and first.method == "GetTask":
            c.count("stalled_streams_recovered")
            continue
        if first is not None and first.method in ("SendMessage", "SendStreamingMessage"):
            c.violation(f"{chain.node}'s stream for task {chain.task} stalled after "
                        f"{stall:.0f} ms, and it published the request again at "
                        f"{first.t_ms:.0f} ms instead of asking with GetTask",
                        chain.items[-1].event, first.event)
            continue
        if due > h.end_ms or any(stall <= t <= due for t in crashes[chain.node]):
            c.unknown("stalled_near_the_end")
            continue
        c.violation(f"{chain.node}'s stream for task {chain.task} stalled after {stall:.0f} ms "
                    f"(no item, no final status for {STREAM_IDLE_MS / 1000:.0f} s) and it sent "
                    f"no GetTask on the task by {due:.0f} ms"
                    + (f" (it sent {first.method})" if first is not None else ""),
                    chain.first.event, chain.items[-1].event)


#: JSON-RPC error -32005 transport_protocol_error: binding metadata invalid (A2M-ERR-3: not
#: retried unless the request is corrected)
TRANSPORT_PROTOCOL_ERROR = -32005


def _binding(a: Asked) -> tuple[object, ...] | None:
    """A request's binding metadata as its requester sent it: its a2a- User Properties but
    the bearer token (a fresh one corrects nothing the binding reads) and a value a fault
    on its link added or altered (TAMPER_TEXT), its Content Type, whether it had a Response
    Topic; None where only the requester's records tell (no wire)."""
    if not isinstance(a.event, Wire):
        return None
    p = _props(a.event)
    users = p.get("userProperties")
    pairs = sorted((str(u[0]), str(u[1])) for u in (users if isinstance(users, list) else [])
                   if isinstance(u, list | tuple) and len(u) == 2
                   and str(u[0]).startswith("a2a-") and u[0] != "a2a-authorization"
                   and not str(u[1]).endswith(TAMPER_TEXT))
    return (tuple(pairs), p.get("contentType"), p.get("responseTopic") is not None)


@rule("A2M-ERR-3: a request answered -32005 (binding metadata invalid) is not sent again "
      "unless its metadata is corrected; -32003 and -32004 may be retried")
def protocol_errors_not_retried_unchanged(h: History, c: Collector) -> None:
    """Off a requester's wire: once a SendMessage of a task got -32005 transport_protocol_error
    on its correlation, no later SendMessage for the task carries the same binding metadata
    (`_binding`: what the requester put there, not what a fault on its link did) — the
    responder would refuse it again. After -32003 or -32004 (retry-eligible at the
    application's policy) a retry is welcome and counted, as is an operation ended there:
    the wire cannot show how a requester's application was told."""
    asks = h.memo(_asked_by_task)
    for chain in h.memo(_chains):
        e = chain.end
        if chain.method != "SendMessage" or e is None or not isinstance(e.event, Wire) \
                or e.code not in (*RETRY_ELIGIBLE, TRANSPORT_PROTOCOL_ERROR):
            continue
        mine = [a for a in asks.get((chain.node, chain.task), ())
                if a.method in ("SendMessage", "SendStreamingMessage")]
        later = [a for a in mine if a.event.seq > e.event.seq]
        if e.code in RETRY_ELIGIBLE:
            c.count("retry_eligible_errors")
            c.count("retry_eligible_errors_retried" if later else "ended_on_a_retry_eligible_error")
            continue
        c.count("protocol_errors")
        sent = next((a for a in reversed(mine) if a.correlation == e.correlation
                     and a.event.seq < e.event.seq), None)
        if sent is None or not later:
            continue
        again = next((a for a in later if _binding(a) == _binding(sent)), None)
        if again is None:
            c.count("protocol_errors_retried_corrected")
            continue
        c.violation(f"{chain.node} got -32005 transport_protocol_error for task {chain.task} at "
                    f"{e.t_ms:.0f} ms and sent it again at {again.t_ms:.0f} ms with the same "
                    f"binding metadata", sent.event, e.event, again.event)


#: How long after a reply crossed a requester's wire a request of its may still be one it
#: had written before it read that reply (the tap records each direction as it passes)
CROSSING_MS = 200.0
#: The same for a retry a timer of the requester's had already begun to send: the reply
#: reached its socket, the thread that reads it had not yet run. A clean-clone suite beside
#: a second one (2026-12-05) saw examples/a2a-requester do that; the gap was not kept, and
#: 500 ms is a bound chosen above CROSSING_MS, not a measurement. A requester that reads no
#: reply while it waits out its backoff (the EMQX SDK's) still shows whenever the reply came
#: earlier in the backoff than that.
RETRY_CROSSING_MS = 500.0


@rule("A2M-HAND-2, A2M-REQ-4, A2M-RETRY-8: once a reply named the agent answering for a "
      "task (a2a-responder-agent-id), every later operation on the task goes to that agent's "
      "direct topic; a pooled request's retries go to the pool until then")
def follow_ups_go_to_the_named_agent(h: History, c: Collector) -> None:
    """Per requester and Task.id, from what it published and received (its records, or its
    wire): after a reply for the task named an agent — a pool's member (A2M-REQ-4) or a
    delegate the task was handed over to (A2M-HAND-2: the latest name holds) — each
    request for the task goes to `$a2a/v1/request/{org}/{unit}/{that agent}`; before any
    name, a task first asked of a pool is asked of the pool again (A2M-RETRY-8), not of a
    member guessed. On the wire, a request within CROSSING_MS of the naming reply may have
    been written before it was read: not judged."""
    events: list[tuple[int, Asked | Heard]] = [(a.event.seq, a) for a in h.memo(asked)]
    events += [(x.event.seq, x) for x in h.memo(heard)]
    task_of: dict[tuple[str, str], str] = {}          # (node, correlation) -> Task.id
    named: dict[tuple[str, str], tuple[str, float]] = {}   # (node, Task.id) -> agent, when
    pooled: dict[tuple[str, str], str] = {}           # (node, Task.id) -> its first pool topic
    for _seq, x in sorted(events, key=lambda e: e[0]):
        if isinstance(x, Heard):
            task = task_of.get((x.node, x.correlation or ""))
            if task is not None and x.named:
                named[(x.node, task)] = (x.named, x.t_ms)
            continue
        if x.task_id is None:
            continue
        key = (x.node, x.task_id)
        if x.correlation is not None:
            task_of[(x.node, x.correlation)] = x.task_id
        if "/pool/" in x.topic:
            pooled.setdefault(key, x.topic)
        if key in named:
            agent, at = named[key]
            c.count("operations_after_a_name")
            if isinstance(x.event, Wire) and x.t_ms - at < CROSSING_MS:
                continue
            if "/pool/" in x.topic or x.topic.rsplit("/", 1)[-1] != agent:
                c.violation(f"{x.node} sent {x.method} for task {x.task_id} to {x.topic} after "
                            f"a reply named {agent} as the agent answering for it (its direct "
                            "topic was due)", x.event)
        elif key in pooled and "/pool/" not in x.topic:
            c.violation(f"{x.node} sent {x.method} for task {x.task_id} to {x.topic} before any "
                        f"reply named a member: a pooled request is retried to its pool "
                        f"({pooled[key]})", x.event)
    if pooled and not named:
        c.unknown("pooled_tasks_no_reply_named")   # the pool never answered: nothing to follow


def _tokens_required(h: History) -> bool:
    """Whether the run's responders required bearer tokens (run_started.bearerTokens)."""
    started = h.of(RunStarted)
    return bool(started and started[0].bearer_tokens)


@rule("A2M-REQ-5: where responders require bearer tokens, every request carries one in "
      "a2a-authorization")
def requests_carry_a_token(h: History, c: Collector) -> None:
    """In a run whose responders required bearer tokens (run_started.bearerTokens), every
    request a requester published (its record, or its wire) carried `a2a-authorization:
    Bearer ...` — the first attempt and every retry. A run without tokens required has
    nothing to judge here (the checker's other rules still do)."""
    if not _tokens_required(h):
        return
    for a in h.memo(asked):
        c.count("requests_published")
        if a.bearer is None:
            c.unknown("requests_whose_token_no_record_tells")
        elif a.bearer:
            c.count("requests_with_a_token")
        else:
            c.violation(f"{a.node} published a request to {a.topic} without a bearer token "
                        "in a2a-authorization, to a responder that requires one", a.event)


#: How soon after it was minted a token the bench's requester sent is still good for sure:
#: well within the shortest lifetime a topology gives its tokens (`token_ttl_s`, 60 s on the
#: shipped a2a-oauth topology), whatever the broker's delay
TOKEN_FRESH_MS = 10_000.0
#: JSON-RPC 2.0 invalid request: what a responder of the profile answers a token it refuses
INVALID_REQUEST = -32600


@rule("A2M-RSP-7: a request carrying a good bearer token is processed, not refused as "
      "unauthorized")
def good_tokens_honoured(h: History, c: Collector) -> None:
    """Where responders require tokens, each request the bench's requester sent with a
    token it had just minted (good: signed by the server, for this audience and scope) is
    not answered 'invalid request' (-32600, the refusal of a token) within TOKEN_FRESH_MS
    of its sending. Explained: a fault that may have held the request past its token's
    lifetime (a pause, a partition, latency or loss on either agent's link, a redelivery,
    the broker's restart, the responder's crash) or altered its token (property
    tampering) acted meanwhile. A responder that refuses good tokens — its clock read
    in the wrong unit, the audience compared with another name — answers every request
    with an error, which every other rule takes as an answer."""
    if not _tokens_required(h):
        return
    by_path = h.memo(_answers_by_path)
    crashes = h.memo(Transit).crashes
    # what may hold a request past its token's lifetime (a link fault: a pause, a partition;
    # a redelivery, the broker's restart) or alter its token (property tampering)
    held = [w for w in h.memo(fault_windows) if w.fault in LINK_FAULTS or w.fault in (
        "property_tampering", "qos1_redelivery", "broker_restart")]
    for a in h.memo(asked):
        # the bench's requester (its records say the request carried the token it minted)
        if not isinstance(a.event, A2mAttempt) or a.bearer is not True or a.correlation is None:
            continue
        refused = [x for x in by_path.get((a.response_topic, a.correlation), ())
                   if _code(x) == INVALID_REQUEST and x.t_ms - a.t_ms <= TOKEN_FRESH_MS]
        if not refused:
            c.count("requests_with_a_good_token_not_refused")
            continue
        x = refused[0]
        if any(w.acts_on(a.t_ms, x.t_ms, x.node, a.node) for w in held) \
                or any(a.t_ms <= t <= x.t_ms for t in crashes.get(x.node, ())):
            c.count("refused_after_a_fault_held_or_altered_it")
            continue
        c.violation(f"{x.node} refused {a.node}'s {a.method or 'request'} for task "
                    f"{a.task_id}, whose token was minted {x.t_ms - a.t_ms:.0f} ms before, as "
                    "an invalid request (-32600)", a.event, x.event)


@rule("A2M-RSP-6: a bearer token is echoed nowhere: no reply, stream item or other message "
      "an agent publishes carries one, in its payload or its properties")
def tokens_never_echoed(h: History, c: Collector) -> None:
    """Off the wire tap (the tap fingerprints every JWT anywhere in a PUBLISH and records
    none): no PUBLISH a tapped agent sends, other than its own requests' a2a-authorization,
    carries a bearer token — a reply that copies the request's User Properties, an error
    that quotes the header, a stream item with the caller's claims."""
    required = _tokens_required(h)
    received: dict[str, set[str]] = defaultdict(set)
    for w in h.of(Wire):
        if w.packet != "PUBLISH" or not w.tokens:
            continue
        if w.direction == "in":
            received[w.node].update(w.tokens)
            continue
        topic = w.topic or ""
        # a request's own header carries its token: the one place a token belongs
        own = _user(w, "a2a-authorization") if topic.startswith(REQUEST_PREFIX) else None
        echoed = [t for t in w.tokens if own is None or t not in own]
        c.count("token_carrying_publishes")
        if echoed:
            whose = "a token it was sent" if set(echoed) & received[w.node] else "a token"
            c.violation(f"{w.node} published {whose} on {topic} (fingerprint {echoed[0]}): "
                        "a bearer token is never echoed", w)
    if required and not received:
        c.unknown("no_token_reached_a_tapped_agent")   # tokens were due, none was seen


@rule("A2M-SESS-6: a connection that carries bearer tokens uses TLS")
def tokens_travel_over_tls(h: History, c: Collector) -> None:
    """Off the wire tap: every PUBLISH carrying a bearer token — a request as its requester
    sent it, the same request as the broker delivered it to its responder — crossed a
    connection that came by TLS (its CONNECT, as the tap stamped it). A token on plain TCP
    can be read by anyone on the path and replayed until it expires."""
    crossed = 0
    for node, ws in sorted(h.memo(_tapped).items()):
        connect: Wire | None = None      # the CONNECT of the connection the packets cross
        plain: list[Wire] = []           # what crossed it with a token, where it was plain
        for w in [*ws, None]:
            if w is None or (w.packet == "CONNECT" and w.direction == "out"):
                if connect is not None and plain:
                    first = plain[0]
                    verb = "sent" if first.direction == "out" else "was delivered"
                    c.violation(f"{node} {verb} a bearer token (fingerprint "
                                f"{(first.tokens or ['?'])[0]})"
                                f" on {first.topic} over plain TCP, and {len(plain)} in all on "
                                "that connection: it did not come by TLS", connect, first)
                connect, plain = w, []
            elif w.packet == "PUBLISH" and w.tokens:
                crossed += 1
                if connect is None:
                    c.unknown("tokens_on_a_connection_whose_connect_was_not_seen")
                elif not connect.tls:
                    plain.append(w)
    c.count("tokens_crossing_taps", crossed)
    if _tokens_required(h) and not crossed:
        c.unknown("no_token_crossed_a_tapped_connection")


@rule("A2M-RETRY-2, A2M-RETRY-4, A2M-RETRY-6: once a reply came, the request is not sent "
      "again; each attempt has Correlation Data of its own")
def no_request_again_after_a_reply(h: History, c: Collector) -> None:
    """Per requester and Task.id, read from what it published and received (its records,
    or its wire): a SendMessage for the task is not published again once a correlated
    reply to an earlier one came — a result, a stream item or an error — unless that reply
    asked for the next turn (input-required, auth-required) or was an error the profile
    lets it retry (-32003, -32004); and no attempt reuses Correlation Data an earlier
    request for the task had. A reply to a pooled request that names no responder is a
    protocol error (A2M-REQ-3): it stops nothing."""
    events: list[tuple[int, Asked | Heard]] = [(a.event.seq, a) for a in h.memo(asked)]
    events += [(x.event.seq, x) for x in h.memo(heard)]
    task_of: dict[tuple[str, str], str] = {}          # (node, correlation) -> Task.id
    used: dict[tuple[str, str], set[str]] = defaultdict(set)
    answered: dict[tuple[str, str], Heard] = {}       # (node, task) -> the reply that stops
    unnamed = h.memo(_unnamed_pooled)
    for _seq, x in sorted(events, key=lambda e: e[0]):
        if isinstance(x, Heard):
            task = task_of.get((x.node, x.correlation or ""))
            if task is None or x.event.seq in unnamed:    # a protocol error stops nothing
                continue
            if x.state in NEXT_TURN_STATES or x.code in RETRY_ELIGIBLE:
                answered.pop((x.node, task), None)
            else:
                answered.setdefault((x.node, task), x)
            continue
        if x.task_id is None or x.correlation is None \
                or x.method not in ("SendMessage", "SendStreamingMessage"):
            continue
        key = (x.node, x.task_id)
        task_of[(x.node, x.correlation)] = x.task_id
        c.count("sends")
        if x.correlation in used[key]:
            c.violation(f"{x.node} sent task {x.task_id} again under Correlation Data "
                        f"{x.correlation} an earlier attempt had", x.event)
        used[key].add(x.correlation)
        stop = answered.get(key)
        if stop is not None and isinstance(x.event, Wire) and isinstance(stop.event, Wire) \
                and x.t_ms - stop.t_ms < RETRY_CROSSING_MS:
            c.count("retries_that_crossed_a_reply")   # written before the reply was read
        elif stop is not None:
            c.violation(f"{x.node} sent task {x.task_id} again after a reply to it came "
                        f"({'error ' + str(stop.code) if stop.code is not None else stop.state})",
                        stop.event, x.event)
            answered.pop(key)


@rule("A2M-RR-3, A2M-STREAM-1, A2M-ERR-1: a reply goes to its request's Response Topic with "
      "its Correlation Data")
def replies_answer_a_request(h: History, c: Collector) -> None:
    """Every reply, stream item and error a responder published carries the Correlation
    Data of a request it took in, and goes to that request's Response Topic; and every
    request it took in was one a requester sent (or an injection a fault journaled).
    A responder that answers on a fixed topic, or drops or rewrites the Correlation Data,
    answers nobody. A requester's reply without Correlation Data is accounted for by a
    responder's refusal without any sent before it, a stripping fault, or a copy of one
    such — MQTT's own re-delivery (DUP, the same packet id) or the redelivery fault's."""
    taken: dict[str, set[tuple[str | None, str | None]]] = defaultdict(set)
    took = h.memo(intake)
    for t in took:
        taken[t.node].add((t.correlation, t.response_topic))
    sent_out = h.memo(answers)
    stripped = _tampering(h, "correlation_data", "strip")
    altered = _tampering(h, "correlation_data", "alter")
    for r in sent_out:
        c.count("replies")
        # the tap reads what crossed, after the proxy's faults acted: a reply it saw without
        # Correlation Data, or with it altered, while a fault did that to its node's
        # publishes, left the node with it
        if isinstance(r.event, Wire) and any(a <= r.t_ms <= b for a, b in (
                stripped[r.node] if r.correlation is None
                else altered[r.node] if r.correlation.endswith(TAMPERED) else ())):
            c.count("tampered_on_the_tap")
            continue
        if (r.correlation, r.topic) not in taken[r.node]:
            c.violation(f"{r.node} published a {r.kind} to {r.topic!r} with Correlation "
                        f"Data {r.correlation!r}: no request it took in had that reply path",
                        r.event)
    injected = bool(h.of(AttackSent))
    # a responder that took a request without Correlation Data may refuse it on its Response
    # Topic with none (A2M-RSP-2): the requester gets a reply it ignores (A2M-REQ-2)
    echoed_none: dict[str, list[int]] = defaultdict(list)     # topic -> those refusals' seqs
    for r in sent_out:
        if r.correlation is None and (None, r.topic) in taken[r.node]:
            echoed_none[r.topic].append(r.event.seq)
    # replies with Correlation Data a responder published while a fault stripped it from its
    # publishes: each may reach its requester without any
    # (one handed to its client before the fault healed; it may cross the link while the
    # fault acts — later than it was recorded, if the link held it or a reconnect resent it)
    strippable: dict[str, list[float]] = defaultdict(list)     # topic -> faults' starts
    for r in sent_out:
        starts = [a for a, b in stripped[r.node] if r.t_ms <= b]
        # (off the tap, one already seen stripped)
        if starts and (r.correlation is not None or isinstance(r.event, Wire)):
            strippable[r.topic].append(min(starts))
    # the qos1_redelivery fault delivers a PUBLISH to its node again (the broker resends it,
    # or the link duplicates it): while it acts on a requester (and as long after as a copy
    # may still come), a reply without Correlation Data once more is a copy of one that came
    # before it, one copy each (explore, seed 7 run 1193 and seed 8 run 1558)
    copying = h.memo(_copying)
    copyable: dict[str, int] = defaultdict(int)      # topic -> replies not yet copied

    def copied(got: A2mReplyTaken) -> bool:
        return any((not nodes or got.node in nodes) and start <= got.t_ms <= end
                   for nodes, start, end in copying)
    # what requesters got: a reply without Correlation Data was sent by somebody breaking
    # A2M-RR-3, whatever the responders recorded of themselves
    seen_packets: set[tuple[str, str, int | None]] = set()
    for got in h.of(A2mReplyTaken):
        if got.correlation is not None or injected:
            continue
        refusals = echoed_none[got.topic]
        packet = (got.node, got.topic, got.packet_id)
        if got.dup and packet in seen_packets:
            # MQTT's own re-delivery of a PUBLISH it already handed over (DUP, the same packet
            # id: the PUBACK lost, the session resumed): the same reply (explore, seed 26 run
            # 1207)
            c.count("redelivered_copy_of_a_reply_without_correlation")
            continue
        seen_packets.add(packet)
        if refusals and min(refusals) < got.seq:     # one of the refusals sent before it
            refusals.remove(min(refusals))
            copyable[got.topic] += 1
            c.count("refusals_of_requests_without_correlation")
        elif (i := next((k for k, start in enumerate(strippable[got.topic])
                         if start <= got.t_ms), None)) is not None:
            strippable[got.topic].pop(i)
            copyable[got.topic] += 1
            c.count("correlation_stripped_in_flight")
        elif copyable[got.topic] > 0 and copied(got):
            copyable[got.topic] -= 1
            c.count("copy_the_redelivery_fault_made")
        elif refusals:   # live, two processes' records may reach the history out of order
            refusals.remove(min(refusals))
            c.count("refusals_of_requests_without_correlation")
        else:
            c.violation(f"{got.node} got a reply on {got.topic!r} without Correlation Data", got)
    # Correlation Data is unique on one reply topic only (A2M-REQ-1): by both
    reply_topics = h.memo(_reply_topics)
    published: list[Asked] = h.memo(asked)
    sent: dict[tuple[str, str], Asked] = {
        (topic, a.correlation): a for a in published if a.correlation is not None
        for topic in (reply_topics[a.node] if isinstance(a.event, A2mAttempt)
                      else [a.response_topic or ""])}
    sent_any = {a.correlation for a in published}
    forwarders = sorted({t.node for t in h.of(A2mRequestTaken)
                         if t.intake is Intake.HANDED_OVER})
    for t in took:
        if t.correlation is None or t.correlation in sent_any or injected:
            continue
        # sent with the Correlation Data it had before a fault on its sender's link altered it
        a = sent.get((t.response_topic or "", t.correlation.removesuffix(TAMPERED))) \
            if t.correlation.endswith(TAMPERED) else None
        # handed to its client before the fault healed, taken in after it started — on
        # its requester's link, or on the link of a card owner that sent it on
        if a is not None and any(a.t_ms <= y and t.t_ms >= x for node in (a.node, *forwarders)
                                 for x, y in altered[node]):
            c.count("correlation_altered_in_flight")
            continue
        c.violation(f"{t.node} took in a request with Correlation Data {t.correlation!r} "
                    "that no requester sent", t.event)


#: property_tampering's mark on altered Correlation Data ("|tampered" appended, as
#: docs/faults.md documents the fault), as the history writes it: hex. Written out here, not
#: imported: a judge shares no code with what it judges.
TAMPERED = b"|tampered".hex()
#: ... and what it appends to a text value it alters (a User Property), or is the value of
#: one it adds (the fault's documented mark, written out here)
TAMPER_TEXT = "|tampered"
#: How long before a tampering fault started a publish it acted on may have been recorded:
#: journaled as it is handed to the client, it reaches the node's link a little later
#: (a commit, a slow link, the client's queue while it reconnects).
TAMPER_LEAD_MS = 2_000.0


def _copying(h: History) -> list[tuple[tuple[str, ...], float, float]]:
    """When each qos1_redelivery fault may have handed a node a copy of a delivery: from its
    start until its heal, or until the last copy it scheduled was due (a simulated broker
    journals each with its delay, up to seconds past the heal: explore, seed 13 run 1782),
    and a copy's flight after that. (nodes it acts on — none: every node —, from, until)"""
    healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
    due: dict[int, float] = defaultdict(float)
    for x in h.of(FaultFired):
        delay = x.details.get("delayMs") if isinstance(x.details, dict) else None
        if x.fault == "qos1_redelivery" and x.fault_index is not None \
                and isinstance(delay, int | float):
            due[x.fault_index] = max(due[x.fault_index], x.t_ms + delay)
    out: list[tuple[tuple[str, ...], float, float]] = []
    for f in h.of(FaultStart):
        if f.fault == "qos1_redelivery":
            params = f.params if isinstance(f.params, dict) else {}
            node = params.get("node")
            end = max(healed.get(f.fault_index, h.end_ms), due[f.fault_index])
            out.append(((str(node),) if node else (), f.t_ms, end + IN_FLIGHT_AT_END_MS))
    return out


def _tampering(h: History, prop: str, action: str,
               key: Callable[[str], bool] = lambda _key: True
               ) -> dict[str, list[tuple[float, float]]]:
    """Node -> when a property_tampering fault on `prop` with `action` (a User Property:
    one whose `key` passes) acted on its publishes (journaled start to heal: a publish it
    tampered with left meanwhile, or was recorded up to TAMPER_LEAD_MS before the start and
    was still on its way)."""
    healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for f in h.of(FaultStart):
        params = f.params if isinstance(f.params, dict) else {}
        if f.fault == "property_tampering" and params.get("property") == prop \
                and params.get("action") == action and key(str(params.get("key"))):
            out[str(params.get("node"))].append((f.t_ms - TAMPER_LEAD_MS,
                                                 healed.get(f.fault_index, h.end_ms)))
    return out


@rule("A2M-RR-6, A2M-RR-4: every reply and stream item of a task echoes the requester's "
      "Task.id (never one of its own, nor the Correlation Data taken for one)")
def replies_echo_the_task_id(h: History, c: Collector) -> None:
    """A result, status or artifact a responder sent for a request that named a Task.id
    carries that Task.id, not one of its own making: the requester tracks the task by it
    (and retries under it). An error may name none."""
    # Correlation Data is unique on one reply topic only (A2M-REQ-1): keyed by both
    asked: dict[tuple[str, str | None, str | None], str] = {}
    for t in h.memo(intake):
        if t.task_id is not None and t.correlation is not None:
            asked.setdefault((t.node, t.response_topic, t.correlation), t.task_id)
    for a in h.memo(answers):
        want = asked.get((a.node, a.topic, a.correlation))
        if want is None or a.kind == "ERROR":
            continue
        c.count("answers_of_a_task")
        if a.task_id != want:
            c.violation(f"{a.node} answered a request for task {want} with Task.id "
                        f"{a.task_id!r}", a.event)


@rule("A2M-STREAM-2, A2M-STREAM-3: nothing follows a correlation's final answer")
def nothing_after_the_final_answer(h: History, c: Collector) -> None:
    """Once a responder sent a correlation its final answer (a terminal state, an
    input-required, an error), it sends that correlation nothing more — unless the request
    came to it again (a QoS1 redelivery of the same PUBLISH): then it may answer again."""
    events: list[tuple[int, str, Took | Answer]] = []
    for t in h.memo(intake):
        events.append((t.event.seq, "took", t))
    for a in h.memo(answers):
        events.append((a.event.seq, "answer", a))
    closed: dict[tuple[str, str | None, str | None], Answer] = {}
    for _seq, what, x in sorted(events, key=lambda e: e[0]):
        if x.correlation is None:
            continue      # no correlation to end (replies_answer_a_request judges those)
        # Correlation Data is unique on one reply topic only (A2M-REQ-1)
        key = (x.node, x.response_topic if isinstance(x, Took) else x.topic, x.correlation)
        if what == "took":
            closed.pop(key, None)
            continue
        assert isinstance(x, Answer)
        final = closed.get(key)
        if final is not None:
            c.violation(f"{x.node} sent correlation {x.correlation} a {x.kind} after its "
                        f"final {final.kind}", final.event, x.event)
        elif x.final:
            c.count("correlations_ended")
            closed[key] = x


#: A request a responder took in has, within the requester's first-reply wait (A2M-RETRY-1),
#: its final answer or its task's work begun: one that did neither has left its requester
#: retrying into nothing.
WORK_BEGINS_WITHIN_MS = REPLY_FIRST_MS
#: How soon after its agent answered a responder must have published the task's final
#: answer: nothing stands between the two but the responder itself (a loaded machine's
#: scheduling included).
ANSWER_AFTER_ITS_AGENT_MS = 3_000.0
#: Faults that stop a node: a request it took in before is lost with the process (its
#: retry, taken in after the restart, is owed an answer of its own).
NODE_FAULTS = frozenset({"restart", "crash"})


@rule("A2M-RR-3, A2M-RETRY-3: every request a responder took in ends in a final answer on "
      "its reply path, or in a loss the run explains")
def every_request_answered(h: History, c: Collector) -> None:
    """Liveness, from what the responder took in (its wire, or its records) and what it
    published: every request a requester sent that reached a responder is answered — a
    SendMessage by a final answer of its task (a terminal state, input-required, an error)
    published after it came under its own Correlation Data — a retry that joined a task
    still running is owed the task's end too, not only its state at once (a final answer
    to an earlier attempt does not answer it); a GetTask or CancelTask by any answer under
    its Correlation Data.
    It is owed `ANSWER_AFTER_ITS_AGENT_MS` after the task's work ended (the bench's agent
    answered it, or, of the reference, the task's state ended), or the first-reply wait
    after it came when no work on the task began (the agent called) and none had ended.
    Explained, not owed: the responder stopped (crashed, restarted) before it was due, or
    a fault on its link or the broker's acted meanwhile; it passed the request on to a
    delegate (whose answer it is then); its agent never answered; the run ended first
    (undecided). A responder that takes requests in and lets them lie is FALSE here, with
    no fault in sight."""
    sent, by_corr = h.memo(_sent), h.memo(_answers_by_path)
    crashes = h.memo(Transit).crashes
    windows = [w for w in h.memo(fault_windows) if w.fault not in NODE_FAULTS]
    ended: dict[tuple[str, str], list[float]] = defaultdict(list)   # (node, task) -> when
    for e in h.of(AgentAnswered):
        ended[(e.node, e.task_id)].append(e.t_ms)
    for st in h.of(A2mTaskState):
        if st.state in FINAL_STATES:
            ended[(st.node, st.task_id)].append(st.t_ms)
    began: set[tuple[str, str]] = {(e.node, e.task_id) for e in h.of(AgentCalled)}
    began |= {(e.node, e.task_id) for e in h.of(TaskExecuted)}
    grace = ANSWER_AFTER_ITS_AGENT_MS + records_late_ms(h)
    took = h.memo(intake)
    # a request a card owner sent on to its delegate is the delegate's to answer from there
    passed_on = {id(t) for t in took if isinstance(t.event, A2mRequestTaken)
                 and t.event.intake is Intake.HANDED_OVER}
    last_taker: dict[tuple[str | None, str | None], str] = {}
    for t in took:
        last_taker[(t.response_topic, t.correlation)] = t.node
    for t in took:
        if t.refused or t.task_id is None or t.correlation is None \
                or (t.response_topic, t.correlation) not in sent:
            continue
        if id(t) in passed_on or last_taker[(t.response_topic, t.correlation)] != t.node:
            c.count("passed_on_to_another_agent")
            continue
        c.count("requests_taken")
        mine = by_corr.get((t.response_topic, t.correlation), [])
        if t.method in ("GetTask", "CancelTask"):
            if any(a.t_ms >= t.t_ms - EARLY_MS for a in mine):
                continue
        elif any(a.final and a.t_ms >= t.t_ms - EARLY_MS for a in mine):
            continue
        work = sorted(ended.get((t.node, t.task_id), ()))
        later = [x for x in work if x >= t.t_ms]
        if later or work:
            due = (later[0] if later else t.t_ms) + grace
        elif (t.node, t.task_id) in began:
            c.count("its_agent_never_answered")
            continue
        else:
            due = t.t_ms + WORK_BEGINS_WITHIN_MS
        if any(t.t_ms <= x <= due for x in crashes.get(t.node, ())):
            c.count("lost_with_its_process")
        elif any(w.acts_on(t.t_ms, due, t.node) for w in windows):
            c.count("while_a_fault_acted")
        elif due > h.end_ms:
            c.unknown("still_owed_when_the_run_ended")
        else:
            what = "answer" if t.method in ("GetTask", "CancelTask") else "final answer"
            why = "its agent answered" if work else "no work began"
            c.violation(f"{t.node} took {t.method or 'a request'} for task {t.task_id} at "
                        f"{t.t_ms:.0f} ms and published no {what} for it by {due:.0f} ms "
                        f"({why}; the run went on to {h.end_ms:.0f} ms with no fault on its "
                        "way)", t.event)


#: JSON-RPC (A2A): the error a CancelTask of a task that already ended may get
TASK_NOT_CANCELABLE = -32002
#: Errors that refuse the request itself, not the task it names: invalid request (a token
#: refused, A2M-RSP-7), expired (-32003), responder unavailable (-32004)
REFUSES_THE_REQUEST = frozenset({-32600, -32003, -32004})


@rule("A2M-RETRY-3: a task a responder said it has stays known to it: a GetTask or "
      "CancelTask for it is answered with the task, not an error that denies it")
def known_tasks_stay_known(h: History, c: Collector) -> None:
    """Once a responder published a state of a task (it has the task), a GetTask for it, or
    a CancelTask (but for 'not cancelable' once the task ended), that reaches it later is
    answered with the task, or refused for what is wrong with the request itself (its
    token, its expiry: `REFUSES_THE_REQUEST`) — across its restarts too: a responder that
    forgets its tasks (a table in memory) or does not implement GetTask and CancelTask
    answers the requester that follows a task up with an error about a task it said it
    had."""
    has: dict[tuple[str, str], Answer] = {}       # (node, Task.id) -> its first state
    for a in h.memo(answers):
        if a.task_id is not None and a.state is not None:
            has.setdefault((a.node, a.task_id), a)
    sent, by_corr = h.memo(_sent), h.memo(_answers_by_path)
    for t in h.memo(intake):
        if t.method not in ("GetTask", "CancelTask") or t.task_id is None \
                or t.correlation is None or (t.response_topic, t.correlation) not in sent:
            continue
        said = has.get((t.node, t.task_id))
        if said is None or said.t_ms > t.t_ms:
            continue
        c.count("follow_ups_of_a_task_it_had")
        for a in by_corr.get((t.response_topic, t.correlation), ()):
            code = _code(a)
            if a.t_ms < t.t_ms - EARLY_MS or a.kind != "ERROR" or code in REFUSES_THE_REQUEST \
                    or (t.method == "CancelTask" and code == TASK_NOT_CANCELABLE):
                continue
            c.violation(f"{t.node} answered {t.method} for task {t.task_id} with error {code} "
                        f"at {a.t_ms:.0f} ms, after it said the task was "
                        f"{said.state} at {said.t_ms:.0f} ms", said.event, t.event, a.event)
            break


@rule("A2M-CTX-1, A2M-CTX-3: a task keeps the context it was created in: every answer echoes "
      "it; a request naming another is refused (-32602)")
def contexts_are_kept(h: History, c: Collector) -> None:
    """A task's context is the contextId of the request that created it (its first request
    a responder took in and did not refuse), or, if that named none, the first its
    responder answered with. Every later result, status or artifact of the task carries
    that context; a request for the task that names another context is answered with
    JSON-RPC -32602 and changes nothing (the task's answers keep the first context). A
    responder that echoes the latest request's context, or drops it from stream items,
    fails this."""
    took: list[Took] = h.memo(intake)
    sent: list[Answer] = h.memo(answers)
    # Correlation Data is unique on one reply topic only (A2M-REQ-1): keyed by both
    answer_to: dict[tuple[str, str | None, str | None], list[Answer]] = defaultdict(list)
    for a in sent:
        answer_to[(a.node, a.topic, a.correlation)].append(a)
    context: dict[tuple[str, str], str | None] = {}
    events: list[tuple[int, Took | Answer]] = [(t.event.seq, t) for t in took]
    events += [(a.event.seq, a) for a in sent]
    for _seq, x in sorted(events, key=lambda e: e[0]):
        if x.task_id is None:
            continue
        task = (x.node, x.task_id)
        if isinstance(x, Took):
            if x.method in ("GetTask", "CancelTask"):
                continue
            if task not in context:
                if not x.refused:
                    context[task] = x.context_id
                continue
            was = context[task]
            if x.context_id is None or was is None or x.context_id == was:
                continue
            c.count("requests_naming_another_context")
            got = answer_to[(x.node, x.response_topic, x.correlation)]
            codes = [_code(a) for a in got if a.t_ms >= x.t_ms]
            if codes and INVALID_PARAMS not in codes:
                c.violation(f"{x.node} took a request for task {x.task_id} in context "
                            f"{x.context_id!r}, created in {was!r}, and answered "
                            f"{codes[0] if codes[0] is not None else 'it'} (the profile "
                            f"says error {INVALID_PARAMS})", x.event, got[0].event)
            continue
        if x.kind == "ERROR":
            continue
        c.count("answers_of_a_task")
        want = context.get(task)
        if want is None:
            context[task] = x.context_id
        elif x.context_id != want:
            c.violation(f"{x.node} answered for task {x.task_id} with context "
                        f"{x.context_id!r}; the task was created in {want!r}", x.event)


@rule("A2M-RETRY-3: a task that ended stays ended: no later answer of it says another state")
def ended_tasks_stay_ended(h: History, c: Collector) -> None:
    """Once a responder answered a task with a terminal state (completed, failed,
    canceled, rejected), every later answer it gives about that task — to a retry, a
    GetTask, a CancelTask, a redelivery — says that same state: a task is never
    completed after it was canceled, nor run again after it failed. A responder whose
    CancelTask answers 'canceled' but lets the work finish, or that forgets a finished
    task on a restart, fails this."""
    ended: dict[tuple[str, str], Answer] = {}
    for a in h.memo(answers):
        if a.task_id is None or a.state is None or a.kind == "ERROR":
            continue
        task = (a.node, a.task_id)
        first = ended.get(task)
        if first is None:
            if a.state in TERMINAL_STATES:
                ended[task] = a
                c.count("tasks_ended")
            continue
        c.count("answers_after_the_end")
        if a.state != first.state:
            c.violation(f"{a.node} said task {a.task_id} was {a.state} after it had said "
                        f"{first.state}", first.event, a.event)


@rule("A2M-BASE-1: a task ends as its agent did: COMPLETED when the agent succeeded, FAILED "
      "when it failed, INPUT_REQUIRED when it asked for input")
def tasks_end_as_their_agent_did(h: History, c: Collector) -> None:
    """The bench plays every responder's agent and journals each answer it gives
    (`AgentAnswered`: ok or failed, and whether it asked for input) — its own observation,
    never the responder's word. The first stream-final answer the responder publishes about
    that task afterwards (off its wire, or from its records) says what the agent did:
    `TASK_STATE_COMPLETED` for a success, `TASK_STATE_FAILED` for a failure,
    `TASK_STATE_INPUT_REQUIRED` for a question. Explained, not judged: the task had ended
    before the agent answered (cancelled, failed by its watchdog: the answer comes too
    late to count), the responder crashed in between, or a CancelTask for the task came
    first (`TASK_STATE_CANCELED`). A responder that reports a failed task COMPLETED (or a
    successful one FAILED, or a finished one still waiting for input) fails this; the
    liveness of the answer is `every_request_answered`'s."""
    crashes = h.memo(Transit).crashes
    finals: dict[tuple[str, str], list[Answer]] = defaultdict(list)
    for a in h.memo(answers):
        if a.task_id is not None and a.kind != "ERROR" and a.state in FINAL_STATES:
            finals[(a.node, a.task_id)].append(a)
    cancels: dict[str, list[float]] = defaultdict(list)
    for t in h.memo(intake):
        if t.method == "CancelTask" and t.task_id is not None and not t.refused:
            cancels[t.task_id].append(t.t_ms)
    for e in h.of(AgentAnswered):
        mine = finals.get((e.node, e.task_id), [])
        if any(a.event.seq < e.seq and a.state in TERMINAL_STATES for a in mine):
            c.count("answered_after_its_task_ended")
            continue
        after = next((a for a in mine if a.event.seq > e.seq), None)
        if after is None:
            c.count("no_final_answer_after_it")     # every_request_answered judges that
            continue
        if any(e.t_ms <= x <= after.t_ms for x in crashes.get(e.node, ())):
            c.count("its_responder_crashed_meanwhile")
            continue
        if after.state == CANCELED \
                and any(x <= after.t_ms for x in cancels.get(e.task_id, ())):
            c.count("canceled_meanwhile")
            continue
        agent = ("asked for input" if e.asks_input else "succeeded") if e.ok else "failed"
        want = (INPUT_REQUIRED if e.asks_input else COMPLETED) if e.ok else FAILED
        c.count(f"agent_{agent.replace(' ', '_')}")
        if after.state != want:
            c.violation(f"{e.node}'s agent {agent} on task {e.task_id} at {e.t_ms:.0f} ms and "
                        f"its next final answer about the task, at {after.t_ms:.0f} ms, said "
                        f"{after.state} (A2A: {want})", e, after.event)


@rule("A2M-ERR-2: a responder the topology bounds to N tasks at once never runs more; "
      "beyond them it answers -32004 responder_unavailable")
def capacity_kept(h: History, c: Collector) -> None:
    """Where a topology gives a responder a `capacity` (the tasks it may run at once), no task
    of it starts while that many run. A task runs from its start — the responder's record
    of a new task or a next turn (`A2mRequestTaken` NEW or CONTINUED), or, for an agent
    written elsewhere, its call to the agent the bench plays (`AgentCalled`) — until the
    bench's agent answered it (`AgentAnswered`) or the responder published a stream-final
    answer about it (an end, a cancel, a question). A next turn of a task that asked for
    input runs again and counts, but is not judged: the bound is on new tasks (the
    topology's word: "refuse a new one beyond it"). A crash or restart of the responder
    forgets what it ran: a count from there on is only ever lower, never a false alarm."""
    started = h.of(RunStarted)
    caps = (started[0].capacities if started else None) or {}
    if not caps:
        return
    marks: list[tuple[int, str, str, str, Event]] = []     # (seq, what, node, task, event)
    for t in h.of(A2mRequestTaken):
        if t.node in caps and t.task_id is not None \
                and t.intake in (Intake.NEW, Intake.CONTINUED):
            marks.append((t.seq, "start", t.node, t.task_id, t))
    for called in h.of(AgentCalled):
        if called.node in caps:
            marks.append((called.seq, "start", called.node, called.task_id, called))
    for e in h.of(AgentAnswered):
        if e.node in caps:
            marks.append((e.seq, "end", e.node, e.task_id, e))
    for a in h.memo(answers):
        if a.node in caps and a.task_id is not None and a.kind != "ERROR" \
                and a.state in FINAL_STATES:
            marks.append((a.event.seq, "end", a.node, a.task_id, a.event))
    for x in (*h.of(NodeCrashed), *h.of(NodeStarted)):
        if x.node in caps:
            marks.append((x.seq, "forget", x.node, "", x))
    running: dict[str, dict[str, Event]] = defaultdict(dict)
    seen: set[tuple[str, str]] = set()
    for _seq, what, node, task, event in sorted(marks, key=lambda m: m[0]):
        now = running[node]
        if what == "forget":
            now.clear()
        elif what == "end":
            now.pop(task, None)
        elif (node, task) in seen:
            now[task] = event
            c.count("next_turns_started_where_bounded")
        else:
            seen.add((node, task))
            c.count("tasks_started_where_bounded")
            if len(now) >= caps[node]:
                c.violation(f"{node} started task {task} at {event.t_ms:.0f} ms while it ran "
                            f"{len(now)} ({', '.join(sorted(now))}): its capacity is "
                            f"{caps[node]}", *now.values(), event)
            now[task] = event
    c.count("responders_bounded", len(caps))


#: What a responder answers each request the malformed_request fault sends (attack_sent.how),
#: as the profile and JSON-RPC 2.0 prescribe: the error codes it may answer with; () where
#: there is no reply path (A2M-RSP-2: dropped); ANSWERED for the one valid request (binary
#: Correlation Data), which gets a reply that is no error. Written out here, from the spec.
#: Where the spec names no code — Responder Behavior 4's "invalid protocol input" for a bad
#: Task.id, a context User Property that differs from the payload's (A2M-CTX-4: binding
#: metadata) — invalid params and the binding's transport_protocol_error both answer it.
ANSWERED = 0
MALFORMED_ANSWER: dict[str, tuple[int, ...]] = {
    "not_json": (-32700,), "not_utf8": (-32700,),                  # parse error
    "array": (-32600,), "null": (-32600,), "no_jsonrpc": (-32600,),  # invalid request
    "unknown_method": (-32601,),                                   # method not found
    "bad_task_id": (-32602, -32005), "no_task_id": (-32602, -32005),   # A2M-RSP-4
    "context_mismatch": (-32602, -32005),                          # A2M-CTX-4
    "no_correlation": (-32005,),                                   # A2M-ERR-2
    "no_response_topic": (),                                       # A2M-RSP-2
    "context_switch": (-32602,),                                   # A2M-CTX-3
    "empty": (-32700, -32600, -32005),                             # A2M-RSP-3: some error
    "binary_correlation": (ANSWERED,),                             # A2M-RR-3: answered
    # MQTT 5 properties in a form the profile forbids: a Response Topic nobody can publish to
    # is no reply path (A2M-RSP-2: dropped, never run); a context property empty, or repeated
    # with a value that differs, is invalid binding metadata (A2M-CTX-4); a payload its
    # Payload Format Indicator calls UTF-8 that is not cannot be parsed (A2M-RSP-3)
    "prop:response_topic:empty": (), "prop:response_topic:wildcard": (),
    "prop:a2a-context-id:empty": (-32602, -32005), "prop:a2a-context-id:twice": (-32602, -32005),
    "prop:payload_format:not_utf8": (-32700,),
}
#: Valid requests carrying metadata the profile says changes nothing, each answered as any
#: request is: an a2a- User Property it does not define is ignored (A2M-PROP-2), an
#: a2a-artifact-mode nobody supports leaves the reply in JSON (A2M-BIN-1)
IGNORED_ANSWER: dict[str, tuple[int, ...]] = {"prop:a2a-unknown:present": (ANSWERED,)}
ARTIFACT_MODE_ANSWER: dict[str, tuple[int, ...]] = {
    "prop:a2a-artifact-mode:unknown": (ANSWERED,)}
#: A field of the wrong JSON type (the malformed_request fault's `type:<field>:<type>`
#: cases), by field: JSON-RPC 2.0 §5.1 — not a valid Request object (jsonrpc, id, method,
#: or params not structured) is -32600 Invalid Request, a method's parameters that are not
#: what it takes -32602 Invalid params (A2M-RSP-3: "validate request payloads"); a Task.id
#: not a string is a missing one (A2M-RSP-4), answered as no_task_id is.
WRONG_TYPE_ANSWER: dict[str, tuple[int, ...]] = {
    "jsonrpc": (-32600,), "id": (-32600,), "method": (-32600,), "params": (-32600, -32602),
    "params.message": (-32602,), "params.message.messageId": (-32602,),
    "params.message.role": (-32602,), "params.message.parts": (-32602,),
    "params.message.contextId": (-32602,), "params.message.taskId": (-32602, -32005),
    # (-32601 too: a responder without GetTask or CancelTask has no such method to run)
    "GetTask.params.id": (-32602, -32601), "CancelTask.params.id": (-32602, -32601),
}


#: A field given a value of its own type that the rules forbid (the fault's
#: `value:<field>:<name>` cases), by field: jsonrpc not "2.0" is no JSON-RPC 2.0 Request
#: (-32600); a method the server does not have is -32601 (an empty one, -32600 too); a
#: message's messageId empty, its role no Role, its parts no Parts: -32602; a Task.id
#: empty or a UUID of another version than 4 is what A2M-RSP-4 rejects (-32602, or the
#: binding's -32005); a GetTask's or CancelTask's empty params.id names no task (-32602,
#: A2A's -32001 TaskNotFound, or -32005 as for a SendMessage's missing Task.id; -32601
#: from a responder that has no such method).
WRONG_VALUE_ANSWER: dict[str, tuple[int, ...]] = {
    "jsonrpc": (-32600,), "method": (-32601, -32600), "params.message.messageId": (-32602,),
    "params.message.role": (-32602,), "params.message.parts": (-32602,),
    "params.message.taskId": (-32602, -32005),
    "GetTask.params.id": (-32602, -32001, -32005, -32601),
    "CancelTask.params.id": (-32602, -32001, -32005, -32601),
}


def answer_to(case: str) -> tuple[int, ...] | None:
    """What the profile says a malformed request of `case` gets (MALFORMED_ANSWER, or by
    its field for a wrong-type or a malformed-value case); None: not a malformed case."""
    if case.startswith("type:"):
        return WRONG_TYPE_ANSWER.get(case.split(":")[1])
    if case.startswith("value:"):
        return WRONG_VALUE_ANSWER.get(case.split(":")[1])
    return MALFORMED_ANSWER.get(case)


#: A request whose bearer token a responder that requires tokens must refuse (A2M-RSP-7): the
#: spec names no code (A2A v1.0 has none for a failed authentication; "follow the core
#: A2A/JSON-RPC definitions"), so any JSON-RPC error answers it — never a result.
ANY_ERROR = 1
TOKEN_ANSWER: dict[str, tuple[int, ...]] = {
    case: (ANY_ERROR,) for case in ("no_token", "not_bearer", "not_a_jwt", "expired_token",
                                    "wrong_audience", "wrong_issuer", "forged_token",
                                    "missing_scope")}
#: The requests whose Task.id a valid request ran: the fault's opening (context_switch), or
#: the request itself (binary_correlation) — that one execution is not a malformed one's
OPENED = frozenset({"context_switch", "binary_correlation", *IGNORED_ANSWER,
                    *ARTIFACT_MODE_ANSWER})
#: How long a responder has to answer a malformed request before it counts as unanswered
MALFORMED_WITHIN_MS = 5_000.0


@rule("A2M-RSP-2, A2M-RSP-3, A2M-RSP-4, A2M-CTX-3, A2M-CTX-4, A2M-ERR-1, A2M-ERR-2: a "
      "malformed request gets the error the profile names, runs nothing, and the responder "
      "goes on serving")
def malformed_requests_refused(h: History, c: Collector) -> None:
    """Each malformed request the bench sent (malformed_request) is answered, on its own
    Response Topic, with a JSON-RPC error of the code MALFORMED_ANSWER names — or not at
    all where it has no Response Topic — within MALFORMED_WITHIN_MS while its responder was
    up; nothing executes its Task.id; and the responder does not die of it (a process
    that ends by itself, or raises, after taking one in). Undecided where the responder
    was down, a fault acted on it or on the broker, or the run ended, before it could
    answer."""
    _hostile(h, c, answer_to, "a malformed request")


@rule("A2M-RSP-7: where bearer tokens are required, a request whose token is "
      "missing, expired, for another audience, from another issuer, forged or short of the "
      "scope is refused before it is processed")
def unauthorized_requests_refused(h: History, c: Collector) -> None:
    """Each request of the malformed_request fault's token cases (valid in every other way,
    to a responder that requires tokens) is answered with a JSON-RPC error — the spec names
    no code — and its Task.id is executed nowhere; judged as malformed requests are."""
    _hostile(h, c, TOKEN_ANSWER.get, "a request with a bad token")


@rule("A2M-PROP-2: a valid request carrying an a2a- User Property the profile does not "
      "define is served as if it were not there")
def unknown_properties_ignored(h: History, c: Collector) -> None:
    """Each request of the malformed_request fault's case prop:a2a-unknown:present (valid,
    with an a2a- User Property no part of the profile defines) is answered with no error,
    judged as malformed requests are (SHOULD: Error Handling and Deduplication 3)."""
    _hostile(h, c, IGNORED_ANSWER.get, "a request with an a2a- property unknown to it")


@rule("A2M-BIN-1: a request asking for an artifact mode nobody supports is answered in JSON")
def unknown_artifact_modes_answered_in_json(h: History, c: Collector) -> None:
    """Each request of the malformed_request fault's case prop:a2a-artifact-mode:unknown
    (valid, `a2a-artifact-mode: hologram`) is answered with no error, judged as malformed
    requests are, and nothing published to its Response Topic is other than JSON (the
    tap's reading of the PUBLISH: a payload that is no JSON text is a binary artifact
    chunk, which only a supported `binary` request may get)."""
    _hostile(h, c, ARTIFACT_MODE_ANSWER.get, "a request with an unsupported artifact mode")
    asked = {a.message_id: a for a in h.of(AttackSent)
             if a.attack == "malformed_request" and a.how in ARTIFACT_MODE_ANSWER}
    for a in h.memo(answers):
        token = a.topic.rsplit("/", 1)[-1]
        if token in asked and isinstance(a.event, Wire) and a.event.not_json:
            c.violation(f"{a.node} published a payload that is no JSON to the reply path of "
                        f"a request asking for an unsupported artifact mode", asked[token],
                        a.event)


def _hostile(h: History, c: Collector, table: Callable[[str], tuple[int, ...] | None],
             what: str) -> None:
    """The malformed_request fault's requests of the cases `table` knows, each answered as
    it says, run nowhere, and the responder alive after them."""
    out: dict[tuple[str, str], list[Answer]] = defaultdict(list)
    for a in h.memo(answers):
        out[(a.node, a.topic.rsplit("/", 1)[-1])].append(a)
    # a request the target handed over is answered by the agent it handed it to
    node_of = {agent: node for node, agent in h.memo(_agent_of).items()}
    handed: dict[tuple[str, str], set[str]] = defaultdict(set)
    for t in h.of(A2mRequestTaken):
        if t.intake is Intake.HANDED_OVER and t.handed_to and t.response_topic:
            handed[(t.node, t.response_topic.rsplit("/", 1)[-1])].add(
                node_of.get(t.handed_to, t.handed_to))
    ran: dict[str, str] = {e.task_id: e.node for e in h.of(TaskExecuted)}
    crashes = h.memo(Transit).crashes
    windows = h.memo(fault_windows)     # a fault on its node or the broker may lose it
    died = [x for x in h.of(NodeCrashed) if x.fault_index is None]
    lives = sorted([(x.seq, x.node, False) for x in h.of(NodeCrashed)]
                   + [(x.seq, x.node, True) for x in h.of(NodeStarted)])

    def down_at(node: str, seq: int) -> bool:
        """Whether `node` had crashed, and not started again, by history position `seq`."""
        up = True
        for at, who, started in lives:
            if at > seq:
                break
            if who == node:
                up = started
        return not up
    sent = [a for a in h.of(AttackSent) if a.attack == "malformed_request"]
    last_before = {d.seq: max((a for a in sent if a.target_node_id == d.node
                               and a.seq < d.seq), key=lambda a: a.seq, default=None)
                   for d in died}
    for attack in h.of(AttackSent):
        want = table(attack.how) if attack.attack == "malformed_request" else None
        if want is None:
            continue
        node, token = attack.target_node_id or "", attack.message_id
        c.count("malformed_wrong_type" if attack.how.startswith("type:")
                else "malformed_wrong_value" if attack.how.startswith("value:")
                else f"malformed_{attack.how}")
        got = out[(node, token)] + [a for d in sorted(handed[(node, token)])
                                    for a in out[(d, token)]]
        if attack.request_id in ran and attack.how not in OPENED:
            c.violation(f"{ran[attack.request_id]} executed the task of {what} sent to "
                        f"{node} ({attack.how})", attack)
        # a death is put down to the last request the fault sent the node before it
        killed = [d for d in died if d.node == node and last_before.get(d.seq) is attack
                  and d.t_ms <= attack.t_ms + MALFORMED_WITHIN_MS]
        if killed and not got:
            c.violation(f"{node} died after {what} ({attack.how}): {killed[0].how}",
                        attack, killed[0])
            continue
        if not want:
            if got:
                c.violation(f"{node} answered a request with no Response Topic it could "
                            f"publish to ({attack.how})", attack, got[0].event)
            continue
        says = " or ".join("a reply that is no error" if w == ANSWERED else
                           "some JSON-RPC error" if w == ANY_ERROR else f"error {w}"
                           for w in want)
        if not got:
            until = attack.t_ms + MALFORMED_WITHIN_MS
            busy = down_at(node, attack.seq) or any(
                attack.t_ms <= t <= until for t in crashes[node]) or any(
                w.fault != "malformed_request" and (not w.nodes or node in w.nodes)
                and w.start_ms <= until and held_until(h, w, node) >= attack.t_ms
                for w in windows)   # (a lossy link until it caught up: explore, seed 38)
            if busy or until > h.end_ms:
                c.unknown("malformed_unanswered_while_down_or_at_the_end")
            else:
                c.violation(f"{node} never answered {what} ({attack.how}); "
                            f"the profile says {says}", attack)
            continue
        codes = [_code(a) or ANSWERED for a in got]
        if not any(code in want or (ANY_ERROR in want and code != ANSWERED) for code in codes):
            c.violation(f"{node} answered {what} ({attack.how}) with "
                        f"{'error ' + str(codes[0]) if codes[0] else 'no error'}; the "
                        f"profile says {says}", attack, got[0].event)


def _code(a: Answer) -> int | None:
    """An answer's JSON-RPC error code (None: not an error)."""
    if isinstance(a.event, A2mReplied):
        return a.event.code
    if isinstance(a.event, Wire):
        return a.event.rpc_error
    return None


@rule("A2M-RETRY-4, A2M-REQ-2: a requester gives up only on a request nobody answered")
def no_answer_lost(h: History, c: Collector) -> None:
    """An operation that ended NO_REPLY got no reply because none came: no responder
    published a final answer to any of its attempts' Correlation Data before it gave up,
    unless a fault on the way explains the loss (a link cut or lossy, a node or the broker
    down, while the answer travelled)."""
    replied: dict[tuple[str, str], Answer] = {}
    for r in h.memo(answers):
        # a result (a Task, finished or not) or an error; off the wire, a final answer
        if r.correlation is not None and (r.final or r.kind in ("RESULT", "ERROR")):
            replied.setdefault((r.topic, r.correlation), r)
    reply_topics = h.memo(_reply_topics)
    attempts: dict[tuple[str, str], list[A2mAttempt]] = defaultdict(list)
    for a in h.of(A2mAttempt):
        attempts[(a.node, a.op_id)].append(a)
    windows = h.memo(fault_windows)
    crashed = {x.node for x in h.of(NodeCrashed)}
    for s in h.of(A2mSettled):
        if s.outcome is not A2mOutcome.NO_REPLY:
            continue
        c.count("given_up")
        came = [got for a in attempts[(s.node, s.op_id)] for topic in reply_topics[s.node]
                if (got := replied.get((topic, a.correlation))) is not None
                and got.t_ms < s.t_ms]
        if not came:
            continue
        answer = came[0]
        if windows or crashed:
            c.count("answer_lost_while_a_fault_acted")
        else:
            c.violation(f"{s.node} gave {s.op_id} up (NO_REPLY) although {answer.node} had "
                        f"answered it at {answer.t_ms:.0f} ms", answer.event, s)


@rule("A2M-RSP-2, A2M-RSP-4: a refused or dropped request runs nothing")
def refused_requests_run_nothing(h: History, c: Collector) -> None:
    """A request the responder refused (a JSON-RPC error) or dropped (no reply path) is
    never executed: no execution there carries its Correlation Data. A responder that runs
    a request and only then finds it malformed fails this. Of an agent judged from its
    wire, a request is refused when the agent's answer to its Correlation Data was an
    error; it ran that request if it executed the request's Task.id afterwards without
    having taken the task in any other way first."""
    executed = {(e.node, e.message_id) for e in h.of(TaskExecuted)}
    # an execution under the same Correlation Data is the refused request's only if no
    # request that was taken in (NEW) had it: Correlation Data is unique on one reply topic
    # only (A2M-REQ-1), and another requester's may coincide
    started = {(t.node, t.correlation) for t in h.of(A2mRequestTaken)
               if t.intake is Intake.NEW}
    for own in h.of(A2mRequestTaken):
        if own.intake not in (Intake.REFUSED, Intake.DROPPED):
            continue
        c.count("refused" if own.intake is Intake.REFUSED else "dropped")
        if (own.node, own.correlation or "") in executed \
                and (own.node, own.correlation) not in started:
            c.violation(f"{own.node} {own.intake.value.lower()} a request ({own.reason}) and "
                        "executed it all the same", own)
    errors = {(a.node, a.correlation) for a in h.memo(answers)
              if a.kind == "ERROR" and isinstance(a.event, Wire)}
    first_run: dict[tuple[str, str], TaskExecuted] = {}
    for e in h.of(TaskExecuted):
        first_run.setdefault((e.node, e.task_id), e)
    # (before and after by the history's order: a tap's packet and a node's record often
    # share a millisecond)
    served: dict[tuple[str, str], int] = {}      # a task taken in and not refused: its line
    wire_took = [t for t in h.memo(intake) if t.refused is None]
    for t in wire_took:
        if t.task_id is not None and (t.node, t.correlation) not in errors:
            served.setdefault((t.node, t.task_id), t.event.seq)
    for t in wire_took:
        if (t.node, t.correlation) not in errors:
            continue
        c.count("refused")
        run = first_run.get((t.node, t.task_id or ""))
        if run is not None and run.seq > t.event.seq \
                and served.get((t.node, t.task_id or ""), run.seq + 1) > run.seq:
            c.violation(f"{t.node} answered a request for task {t.task_id} with an error and "
                        "executed the task all the same", t.event, run)


def _pool_of(topic: str) -> str | None:
    """The pool a request topic names: `$a2a/v1/request/{org}/{unit}/pool/{pool}` (the
    profile's canonical pool topic, read here on its own, not with the agents' code)."""
    parts = topic.split("/")
    if len(parts) == 7 and parts[:3] == ["$a2a", "v1", "request"] and parts[5] == "pool":
        return topic
    return None


@rule("A2M-RSP-5, A2M-REQ-3: a reply to a pooled request names the responder that answered")
def pooled_replies_name_their_responder(h: History, c: Collector) -> None:
    """Every reply a requester took for a request it sent to a pool carries User Property
    a2a-responder-agent-id: without it the requester cannot send the task's follow-ups to
    the member that holds it. Judged per attempt (by its Correlation Data): a follow-up of
    a pooled task sent to the member's own topic gets a plain reply. A reply taken while a
    property_tampering fault stripped User Properties on the way is not its responder's
    doing (counted)."""
    pooled = {(a.node, a.correlation) for a in h.of(A2mAttempt) if _pool_of(a.topic)}
    stripping = [w for ws in _tampering(h, "user_property", "strip").values() for w in ws]
    for r in h.of(A2mReplyTaken):
        if r.op_id is None or (r.node, r.correlation) not in pooled:
            continue
        if r.responder_agent_id is None and any(a <= r.t_ms <= b for a, b in stripping):
            c.count("pooled_replies_stripped_on_the_way")
            continue
        c.count("pooled_replies")
        if r.responder_agent_id is None:
            c.violation(f"{r.node} got a reply to pooled {r.op_id} naming no responder", r)


#: A pool member's filter: `$share/{group_id}/$a2a/v1/request/{org}/{unit}/pool/{pool_id}`
POOL_FILTER = re.compile(r"^\$share/([^/]+)/(\$a2a/v1/request/[^/]+/[^/]+/pool/[^/]+)$")


@rule("A2M-POOL-1: the members of one pool share one group_id")
def pool_members_share_a_group(h: History, c: Collector) -> None:
    """Every agent subscribed to a pool's request topic (its SUBSCRIBE off the wire, or the
    filters it recorded subscribing) uses the same `$share/{group_id}/` for it as every
    other member: two groups on one pool topic each get a copy of every request — the pool
    runs each twice."""
    groups: dict[str, dict[str, tuple[str, Event]]] = defaultdict(dict)  # pool -> group -> first
    filters: list[tuple[str, str, Event]] = [
        (r.node, f, r) for r in h.of(ExecutorsRegistered) for f in r.subscribed]
    filters += [(w.node, f, w) for w in h.of(Wire)
                if w.packet == "SUBSCRIBE" and w.direction == "out" for f in w.filters or ()]
    for node, f, event in filters:
        m = POOL_FILTER.match(f)
        if m is None:
            continue
        group, pool = m.groups()
        c.count("pool_subscriptions")
        groups[pool].setdefault(group, (node, event))
    for pool, by_group in sorted(groups.items()):
        if len(by_group) > 1:
            (g1, (n1, e1)), (g2, (n2, e2)) = sorted(by_group.items())[:2]
            c.violation(f"{n1} joined pool {pool} as group {g1!r} and {n2} as group {g2!r}: "
                        "one pool, one group_id", e1, e2)


#: JSON-RPC errors that say nothing about the request's context: expired, unavailable
TRANSIENT_ERRORS = frozenset({-32003, -32004})


@rule("A2M-CTX-2: a request that names a context the responder does not know opens it; it "
      "is not an error")
def new_contexts_are_welcome(h: History, c: Collector) -> None:
    """A SendMessage a requester sent for a task new to the responder, naming a context
    the responder has not seen, is answered as any other (the context begins there), never
    with an error about it: only an expired request or an unavailable responder
    (-32003, -32004) may be refused then."""
    sent, by_corr = h.memo(_sent), h.memo(_answers_by_path)
    seen_contexts: set[tuple[str, str]] = set()
    seen_tasks: set[tuple[str, str]] = set()
    for t in h.memo(intake):
        fresh_task = t.task_id is not None and (t.node, t.task_id) not in seen_tasks
        fresh_context = t.context_id is not None and (t.node, t.context_id) not in seen_contexts
        if t.task_id is not None:
            seen_tasks.add((t.node, t.task_id))
        if t.context_id is not None:
            seen_contexts.add((t.node, t.context_id))
        if not (fresh_task and fresh_context) or t.correlation is None \
                or t.method not in ("SendMessage", "SendStreamingMessage") \
                or (t.response_topic, t.correlation) not in sent:
            continue
        c.count("contexts_opened")
        for a in by_corr.get((t.response_topic, t.correlation), ()):
            code = _code(a)
            if a.kind == "ERROR" and a.t_ms >= t.t_ms - EARLY_MS and code not in TRANSIENT_ERRORS:
                c.violation(f"{t.node} answered a request opening context {t.context_id} "
                            f"(task {t.task_id}) with error {code}", t.event, a.event)
                break


@rule("A2M-POOL-1, A2M-QOS-1; MQTT 5 §4.8.2: a request to a pool reaches a member of its "
      "shared group")
def pooled_requests_reach_the_pool(h: History, c: Collector) -> None:
    """A request published to a pool's topic after a responder subscribed the pool's shared
    filter (`$share/{group}/{pool topic}`) is routed to a member: the broker does not answer
    it 0x10 "no matching subscribers", nor accept request after request (POOL_SILENCE_AFTER
    of them) that no member ever takes. A broker that cannot route a shared filter on a
    topic that starts with `$` — every profile pool's — serves no pool at all."""
    joined: dict[str, float] = {}
    members: dict[str, set[str]] = defaultdict(set)
    for r in h.of(ExecutorsRegistered):
        for f in r.subscribed:
            if f.startswith("$share/"):
                pool = _pool_of(f.split("/", 2)[2])
                if pool is not None:
                    joined.setdefault(pool, r.t_ms)
                    members[pool].add(r.node)
    answered: set[str] = set()     # pools a PUBACK with a reason code was heard from
    for p in h.of(A2mPuback):
        pool = _pool_of(p.topic)
        if pool is None:
            continue
        c.count("pooled_pubacks_with_a_reason")
        answered.add(pool)
        if p.reason_code == NO_MATCHING_SUBSCRIBERS and pool in joined \
                and joined[pool] <= p.t_ms:
            c.violation(f"the broker answered {p.node}'s request to {pool!r} 0x10 (no matching "
                        f"subscribers), though a responder had subscribed its shared filter", p)
    c.count("pools_joined", len(joined))
    # a broker may say success and route it nowhere: not one of many accepted requests
    # taken (a requester records a PUBACK that says more than success: none here did)
    taken = {_pool_of(t.topic) for t in h.of(A2mRequestTaken)}
    sent: dict[str, list[A2mAttempt]] = defaultdict(list)
    for a in h.of(A2mAttempt):
        pool = _pool_of(a.topic)
        if pool is not None and pool in joined and joined[pool] <= a.t_ms:
            sent[pool].append(a)
    away = {e.node for e in h.of(MqttDisconnected)} | {e.node for e in h.of(NodeCrashed)}
    for pool, attempts in sent.items():
        if len(attempts) >= POOL_SILENCE_AFTER and pool not in taken | answered:
            if members[pool] <= away:      # every member was away at some time: its doing?
                c.unknown("no_member_took_a_request_and_every_member_was_away_once")
                continue
            c.violation(f"the broker accepted {len(attempts)} requests to {pool!r} (no PUBACK "
                        "refused one) and not one reached a member of its shared group",
                        attempts[0], attempts[-1])


@rule("MQTT 5 §4.8.2 (a shared subscription's message goes to one session of the group); "
      "A2M-POOL-1: a request to a pool reaches one member")
def pooled_requests_reach_one_member(h: History, c: Collector) -> None:
    """A request published to a pool (one attempt: one Correlation Data) is taken by one
    member of the pool, not by several: a broker that hands a shared subscription's message
    to every member makes each of them run the task. Allowed: a second member taking it
    after the first one's connection or process died (MQTT 5 §4.8.2 lets the broker send
    a lost member's unacknowledged message to another)."""
    takers: dict[tuple[str | None, str], list[Took]] = defaultdict(list)
    for t in h.memo(intake):
        if t.correlation is not None and _pool_of(t.topic):
            # Correlation Data is unique on one reply topic only (A2M-REQ-1)
            takers[(t.response_topic, t.correlation)].append(t)
    transit = h.memo(Transit)
    gone: dict[str, list[float]] = defaultdict(list)
    for d in h.of(MqttDisconnected):
        gone[d.node].append(d.t_ms)
    sender: dict[tuple[str | None, str], A2mAttempt] = {}
    reply_topics = h.memo(_reply_topics)
    for a in h.of(A2mAttempt):
        for topic in reply_topics[a.node]:
            sender.setdefault((topic, a.correlation or ""), a)
    for (reply_topic, corr), taken in sorted(takers.items(), key=lambda kv: (str(kv[0][0]),
                                                                               kv[0][1])):
        c.count("pooled_requests_taken")
        first = taken[0]
        others = sorted({t.node for t in taken} - {first.node})
        if not others:
            continue
        lost = [t for t in (*transit.crashes[first.node], *gone[first.node]) if t >= first.t_ms]
        if lost:
            c.count("taken_again_after_its_member_was_lost")
            continue
        # QoS 1 is at least once: a requester whose connection dropped before the broker's
        # PUBACK reached it sends the PUBLISH again, and the broker routes the copy anew
        by = sender.get((reply_topic, corr))
        if by is not None and any(by.t_ms <= t <= taken[-1].t_ms for t in (
                *gone[by.node], *transit.crashes[by.node])):
            c.count("sent_again_across_its_requesters_reconnect")
            continue
        c.violation(f"pooled request {corr} went to {first.node} and also to "
                    f"{', '.join(others)}: the broker gave one shared-group message to "
                    f"{len(others) + 1} members", *(t.event for t in taken))


#: Failure reason codes of a PUBACK start here (MQTT 5 §3.4.2.1)
PUBACK_FAILURE = 0x80
#: How long after a refusing fault's heal a refusal may still be heard: the PUBACK of a
#: publish refused just before it, on its way back
REFUSED_IN_FLIGHT_MS = 1_000.0


@rule("MQTT 5 §3.4.2.1 (a PUBACK failure reason code says why the broker refused): a "
      "request publish is refused only while a fault that refuses its sender's publishes acts")
def refusals_have_a_cause(h: History, c: Collector) -> None:
    """The bench configures no quota, ACL or limit that would make a broker refuse a
    requester's PUBLISH: every PUBACK failure (0x80 and above) a requester hears — its own
    record (`A2mPuback`), or off its wire tap the PUBACK that reached it — falls inside the
    window of a `puback_refused` fault naming it, or within REFUSED_IN_FLIGHT_MS after its
    heal. A refusal outside is a broker refusing what it had no reason to refuse (a profile
    request on a `$a2a/...` topic), or a fault that went on acting after the history says it
    healed — and then every rule that excuses what happened in the window excused the wrong
    span."""
    windows = [w for w in h.memo(fault_windows) if w.fault == "puback_refused"]
    own = h.memo(_askers)
    heard: list[tuple[str, float, int, str, Event]] = [
        (p.node, p.t_ms, p.reason_code, p.topic, p) for p in h.of(A2mPuback)
        if p.reason_code >= PUBACK_FAILURE]
    heard += [(w.node, w.t_ms, code, "", w) for w in h.of(Wire)
              if w.node not in own and w.direction == "in" and w.packet == "PUBACK"
              for code in (w.reason_codes or ())[:1] if code >= PUBACK_FAILURE]
    for node, t, code, topic, event in heard:
        c.count("publishes_refused")
        if any(w.acts_on(t - REFUSED_IN_FLIGHT_MS, t, node) for w in windows):
            continue
        where = f" to {topic}" if topic else ""
        c.violation(f"the broker refused {node}'s publish{where} at {t:.0f} ms with 0x{code:02x} "
                    f"while no fault refused its publishes", event)


@rule("MQTT 5 §3.3.2.3.3 [MQTT-3.3.2-5]: a message past its Message Expiry Interval is not "
      "delivered; A2M-RETRY-9, A2M-DUP-2")
def expired_requests_not_delivered(h: History, c: Collector) -> None:
    """A request published with a Message Expiry Interval reaches no responder after that
    interval: a broker keeping it for a responder that is away (its session queues it) must
    drop it once it expires, not hand a stale request to the responder when it comes back.
    The broker counts whole seconds: a delivery within a second past the interval passes.
    Undecided where a slow link (latency, loss, a partition, a pause) on the requester's or
    the responder's side held the request out of the broker's sight meanwhile."""
    reply_topics = h.memo(_reply_topics)
    windows = h.memo(fault_windows)
    sent = {(topic, a.correlation): a for a in h.of(A2mAttempt) if a.expiry_s is not None
            for topic in reply_topics[a.node]}
    taken: dict[tuple[str | None, str | None], Took] = {}
    for t in h.memo(intake):
        if (t.response_topic, t.correlation) in sent:
            taken.setdefault((t.response_topic, t.correlation), t)
    for (topic, corr), a in sorted(sent.items()):
        assert a.expiry_s is not None
        c.count("requests_with_an_expiry")
        due = a.t_ms + a.expiry_s * 1000.0
        got = taken.get((topic, corr))
        if got is None:
            if due < h.end_ms:
                c.count("outlived_their_expiry")
            continue
        if got.t_ms > due + EXPIRY_SLACK_MS:
            c.count("outlived_their_expiry")
            # the broker's clock starts when the PUBLISH reaches it and stops when it sends
            # it on: a slow link on either side moves both out of sight
            # (a lossy link holds what follows a loss until it has caught up: _drained)
            if any(w.fault in LINK_FAULTS and {a.node, got.node} & set(w.nodes)
                   and w.start_ms <= got.t_ms and a.t_ms <= max(
                       [w.end_ms] if w.fault != "loss" else
                       [_drained(h, n, w.end_ms) for n in w.nodes])
                   for w in windows):
                c.unknown("delivered_late_across_a_slow_link")
                continue
            c.violation(f"{got.node} took request {corr} {(got.t_ms - a.t_ms) / 1000:.1f} s "
                        f"after it was published with a Message Expiry Interval of "
                        f"{a.expiry_s} s", a, got.event)


@rule("MQTT 5 §3.3.2.3.5 [MQTT-3.3.2-15], §3.3.2.3.6 [MQTT-3.3.2-16]: the Server MUST send the "
      "Response Topic and the Correlation Data unaltered; A2M-RSP-2, A2M-RR-2")
def requests_keep_their_reply_path(h: History, c: Collector) -> None:
    """A request reaches its responder with the Response Topic and the Correlation Data it
    was published with. The bench's requesters publish every attempt with both
    (a2m_attempt); a responder that took a request without one, on a topic only they
    published to, got it from a broker that dropped it — and can answer nothing. Not
    judged for a responder an attack was sent to (the nemesis sends requests without them
    on purpose), nor from the moment a property_tampering fault began (a request it
    stripped may be delivered again after it healed)."""
    attempted = {a.topic for a in h.of(A2mAttempt)}
    attacked = {a.target_node_id for a in h.of(AttackSent)}
    tampering = [w for w in h.memo(fault_windows) if w.fault == "property_tampering"]
    for t in h.of(A2mRequestTaken):
        if t.topic not in attempted:
            continue
        c.count("requests_taken")
        if t.response_topic is not None and t.correlation is not None:
            continue
        if t.node in attacked:
            c.count("taken_by_an_attacked_responder")
            continue
        # (a request it stripped may come again after it healed: a redelivery's copy)
        if any(w.start_ms <= t.t_ms for w in tampering):
            c.count("taken_after_a_fault_tampered_with_properties")   # the nemesis's doing
            continue
        lost = " and ".join(name for name, v in (("Response Topic", t.response_topic),
                                                 ("Correlation Data", t.correlation))
                            if v is None)
        c.violation(f"{t.node} took a request on {t.topic} at {t.t_ms:.0f} ms without its "
                    f"{lost}: the bench's requesters publish every request with both", t)


# -- task handover (user story 07) -----------------------------------------------------------------
#: Faults that refuse or alter what a node publishes on its way to the broker
PUBLISH_FAULTS = frozenset({"puback_refused", "property_tampering"})
#: How long a request a card owner sent on may take to reach its delegate, on a link no
#: fault slowed: a delegate that took other requests in later than that, and not this one,
#: lost it (a broker hop, two group commits and a busy event loop are well under it).
HANDOVER_REACH_MS = 5_000.0


def _direct_agent(topic: str) -> str | None:
    """The agent a direct request topic names: `$a2a/v1/request/{org}/{unit}/{agent}`."""
    parts = topic.split("/")
    if len(parts) == 6 and parts[:3] == ["$a2a", "v1", "request"]:
        return parts[5]
    return None


@dataclass(frozen=True, slots=True)
class FromAnother:
    """A reply a requester took for a request it sent to one agent's direct topic, when the
    correlation was answered by another agent (a task handed over): who was asked, who
    answered."""

    taken: A2mReplyTaken
    asked: str
    by: str


def _from_another(h: History) -> tuple[list[FromAnother], int]:
    """The replies taken that another agent than the one asked published; and how many
    taken replies' correlations several agents answered (whose reply each was is unknown)."""
    agent_of: dict[str, str] = h.memo(_agent_of)
    reply_topics = h.memo(_reply_topics)
    asked_of: dict[tuple[str, str], str] = {}
    for a in h.of(A2mAttempt):
        agent = _direct_agent(a.topic)
        if agent is not None and a.correlation is not None:
            for topic in reply_topics[a.node]:
                asked_of[(topic, a.correlation)] = agent
    publishers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for x in h.memo(answers):
        if x.correlation is not None:
            publishers[(x.topic, x.correlation)].add(agent_of.get(x.node, x.node))
    out, several = [], 0
    for r in h.of(A2mReplyTaken):
        key = (r.topic, r.correlation or "")
        asked = asked_of.get(key)
        by = publishers.get(key, set())
        if asked is None or not by - {asked}:
            continue
        if len(by) > 1:
            several += 1
            continue
        out.append(FromAnother(r, asked, next(iter(by))))
    return out, several


@rule("A2M-HAND-1: a reply from another agent than the one asked — the task was handed over "
      "— names that agent in a2a-responder-agent-id")
def handed_over_replies_name_their_agent(h: History, c: Collector) -> None:
    """Every reply a requester took for a request it sent to one agent's direct topic, that
    another agent published (the card owner handed the task over to it), carries User
    Property a2a-responder-agent-id naming the agent that published it: without it the
    requester keeps sending the task's follow-ups to the card owner; naming another, it
    sends them where the task is not. A correlation several agents answered is not
    judged (counted)."""
    found, several = h.memo(_from_another)
    c.count("correlations_answered_by_several_agents", several)
    for x in found:
        c.count("replies_from_another_agent")
        named = x.taken.responder_agent_id
        if named != x.by:
            c.violation(f"{x.taken.node} asked {x.asked} and took a reply {x.by} published "
                        + ("naming no responder" if named is None else f"naming {named}")
                        + f" (a2a-responder-agent-id should say {x.by})", x.taken)


@rule("A2M-HAND-1, A2M-RR-3: a request handed over reaches the agent it was handed to with "
      "its Response Topic and Correlation Data")
def handed_over_requests_reach_their_agent(h: History, c: Collector) -> None:
    """Each request a card owner recorded handing over (intake HANDED_OVER) is taken in by
    the agent it names with the same Response Topic and Correlation Data: that agent
    answers the requester on them. A forward that loses either — rebuilt from the payload,
    its properties dropped — answers nobody. Judged where the delegate took other requests
    in more than HANDOVER_REACH_MS later, and neither a crash of the card owner right after
    (its forward may have died with it; the requester's retry is sent on again) nor a
    link fault on either side held it back, nor a fault refused or altered the card owner's
    publishes meanwhile (its broker refusing the forward: the requester's retry recovers
    it), nor the network's account explains the loss (delivery.Transit: a broker restarted
    without persistence forwards to no delegate until it subscribes again); else
    undecided (counted)."""
    node_of = {agent: node for node, agent in h.memo(_agent_of).items()}
    took = h.memo(intake)
    reached: dict[str, set[tuple[str | None, str | None]]] = defaultdict(set)
    later: dict[str, list[float]] = defaultdict(list)
    for t in took:
        reached[t.node].add((t.response_topic, t.correlation))
        later[t.node].append(t.t_ms)
    transit = h.memo(Transit)
    crashes = transit.crashes
    windows = [w for w in h.memo(fault_windows) if w.fault in LINK_FAULTS | PUBLISH_FAULTS]

    # (a lossy link holds what is sent after its heal behind what it is still retransmitting:
    # explore, seed 15 run 213, a forward 146 ms after the heal)
    for ho in h.of(A2mRequestTaken):
        if ho.intake is not Intake.HANDED_OVER or ho.handed_to is None:
            continue
        c.count("handed_over")
        to = node_of.get(ho.handed_to)
        if to is not None and (ho.response_topic, ho.correlation) in reached[to]:
            continue
        due = ho.t_ms + HANDOVER_REACH_MS
        if to is None or not any(x > due for x in later[to]) \
                or any(ho.t_ms <= x <= due for x in crashes[ho.node]) \
                or any(n in (ho.node, to) and w.start_ms <= due
                       and held_until(h, w, n) >= ho.t_ms for w in windows for n in w.nodes):
            c.count("handovers_undecided")
            continue
        if (why := transit.lost(ho.node, ho.t_ms, to)) is not None:
            c.count(f"handover_{why}")
            continue
        c.violation(f"{ho.node} handed request {ho.correlation} (task {ho.task_id}) over to "
                    f"{ho.handed_to}, which took requests in until {max(later[to]) / 1000:.1f} s "
                    "but never this one with its Response Topic and Correlation Data", ho)


# -- an agent's session and presence, from its wire tap --------------------------------------------
#: A2M-SESS-3's client id, read here on its own: three A2M-ID-1 identifiers (a run isolated on
#: a shared broker appends "-<run id>" to the last, which keeps it one identifier)
CLIENT_ID = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def _tapped(h: History) -> dict[str, list[Wire]]:
    """Each node behind a wire tap -> the packets the tap saw cross its connection."""
    out: dict[str, list[Wire]] = defaultdict(list)
    for w in h.of(Wire):
        out[w.node].append(w)
    return out


def _user_pairs(w: Wire) -> list[tuple[object, object]]:
    """A tapped PUBLISH's User Properties, (name, value) in order, the well-formed ones."""
    pairs = _props(w).get("userProperties")
    return [(p[0], p[1]) for p in (pairs if isinstance(pairs, list) else [])
            if isinstance(p, list) and len(p) == 2]


def _user(w: Wire, key: str) -> str | None:
    """The last value of User Property `key` on a tapped PUBLISH."""
    found = None
    for name, value in _user_pairs(w):
        if name == key:
            found = value
    return found if isinstance(found, str) else None


def _responders(tapped: dict[str, list[Wire]]) -> set[str]:
    """The tapped nodes that subscribed a request topic of the profile: responders."""
    return {n for n, ws in tapped.items() if any(
        f.startswith(REQUEST_PREFIX) or (f.startswith("$share/") and REQUEST_PREFIX in f)
        for w in ws if w.packet == "SUBSCRIBE" for f in (w.filters or ()))}


@rule("A2M-SESS-1: MQTT 5")
def connects_with_mqtt5(h: History, c: Collector) -> None:
    """Every CONNECT a tapped agent sent speaks MQTT 5: the profile's Response Topic,
    Correlation Data and User Properties do not exist in 3.1.1."""
    for node, ws in sorted(h.memo(_tapped).items()):
        for w in ws:
            if w.packet == "CONNECT" and w.direction == "out":
                c.count("connects")
                if w.mqtt != "5":
                    c.violation(f"{node} connected with MQTT {w.mqtt or '3.1.1'}, not 5", w)


@rule("A2M-SESS-5 (SHOULD): a session that outlives a connection (clean start 0, a Session "
      "Expiry Interval above 0)")
def connects_with_a_persistent_session(h: History, c: Collector) -> None:
    """Every MQTT 5 CONNECT a tapped agent sent asks to resume its session (clean start 0)
    and gives it a Session Expiry Interval above 0: with clean start 1, or an expiry of 0,
    what the broker queued for it while it was away — requests, replies — is gone when it
    comes back."""
    for node, ws in sorted(h.memo(_tapped).items()):
        for w in ws:
            if w.packet != "CONNECT" or w.direction != "out" or w.mqtt != "5":
                continue
            if w.clean_session or not w.session_expiry_s:
                c.violation(f"{node} connected with clean start {int(bool(w.clean_session))} "
                            f"and a Session Expiry Interval of {w.session_expiry_s or 0} s: "
                            "its session does not outlive the connection", w)


@rule("A2M-RSP-1: a responder subscribes its direct request topic")
def subscribes_its_request_topic(h: History, c: Collector) -> None:
    """A tapped responder's SUBSCRIBE names `$a2a/v1/request/{org}/{unit}/{agent}` for the
    org, unit and agent of its client id: a responder only in a pool, or under another
    agent's topic, cannot be asked directly (a pooled task's follow-ups go there)."""
    tapped = h.memo(_tapped)
    for node in sorted(_responders(tapped)):
        ws = tapped[node]
        c.count("responders_subscribed")
        ids = [w.client_id or "" for w in ws if w.packet == "CONNECT" and w.direction == "out"]
        parts = ids[-1].split("/") if ids else []
        if len(parts) != 3:
            continue          # connects_as_org_unit_agent says so
        org, unit, agent = parts
        # a run isolated on a shared broker appends "-<run id>" to the client id
        want = {f"{REQUEST_PREFIX}{org}/{unit}/{a}" for a in (agent, agent.rsplit("-", 1)[0])}
        filters = {f for w in ws if w.packet == "SUBSCRIBE" for f in (w.filters or ())}
        if not filters & want:
            c.violation(f"{node} ({ids[-1]}) never subscribed its request topic "
                        f"{sorted(want)[0]!r}; it subscribed {sorted(filters)}", ws[0])


#: A2M-ID-1's alphabet, for a pool's and a shared group's ids
PROFILE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@rule("A2M-SESS-3, A2M-ID-1: the client id is {org_id}/{unit_id}/{agent_id}; every id the "
      "profile names (org, unit, agent, pool, group) is of [A-Za-z0-9_.-]")
def connects_as_org_unit_agent(h: History, c: Collector) -> None:
    """Every CONNECT a tapped agent sent names it {org}/{unit}/{agent}, each of the three
    of A2M-ID-1's alphabet: the broker's ACLs and the other agents find it by that id, and
    two agents never share one; and a pool it subscribes names its group and its pool in
    the same alphabet (`$share/{group}/$a2a/v1/request/{org}/{unit}/pool/{pool}`)."""
    for node, ws in sorted(h.memo(_tapped).items()):
        for w in ws:
            if w.packet == "CONNECT" and w.direction == "out":
                c.count("client_ids")
                if not CLIENT_ID.match(w.client_id or ""):
                    c.violation(f"{node} connected as {w.client_id!r}, not "
                                "{org}/{unit}/{agent}", w)
            elif w.packet == "SUBSCRIBE" and w.direction == "out":
                for f in w.filters or ():
                    if not f.startswith("$share/") or REQUEST_PREFIX not in f:
                        continue
                    group, _, rest = f.removeprefix("$share/").partition("/")
                    pool = rest.rsplit("/", 1)[-1]
                    c.count("pool_ids")
                    if not (PROFILE_ID.match(group) and PROFILE_ID.match(pool)):
                        c.violation(f"{node} subscribed pool {pool!r} of group {group!r}: "
                                    "ids of [A-Za-z0-9_.-] only (A2M-ID-1)", w)


@rule("A2M-TOPIC-1, A2M-DISC-1, A2M-PRES-1, A2M-PRES-2: a responder's card is retained at "
      "QoS 1 on its own discovery topic, online once it serves, and its Last Will is the card "
      "on the same topic")
def announces_its_card_with_a_will(h: History, c: Collector) -> None:
    """A tapped responder's CONNECT carries a will on a discovery topic; once subscribed it
    publishes its card there retained, at QoS 1, with a2a-status=online — on
    `$a2a/v1/discovery/{org}/{unit}/{agent}` of its own client id. A responder that never
    says it is online is invisible to discovery; one without a will stays 'online' after
    it died; a card on another agent's topic, or one without the org and unit, is found by
    nobody looking for this agent."""
    tapped = h.memo(_tapped)
    for node in sorted(_responders(tapped)):
        ws = tapped[node]
        c.count("responders")
        wills = [w for w in ws if w.packet == "CONNECT" and w.direction == "out"]
        parts = (wills[-1].client_id or "").split("/") if wills else []
        if len(parts) == 3:
            org, unit, agent = parts
            # a run isolated on a shared broker appends "-<run id>" to the client id
            own = {f"{DISCOVERY_PREFIX}{org}/{unit}/{a}" for a in (agent, agent.rsplit("-", 1)[0])}
            for w in ws:
                if w.direction == "out" and w.packet == "PUBLISH" and w.retain \
                        and (w.topic or "").startswith(DISCOVERY_PREFIX) and w.topic not in own:
                    c.violation(f"{node} ({wills[-1].client_id}) published its card on "
                                f"{w.topic!r}, not on {sorted(own)[0]!r}", w)
        for w in wills:
            if not (w.will_topic or "").startswith(DISCOVERY_PREFIX):
                c.violation(f"{node} connected with no will on its discovery topic "
                            f"(will: {w.will_topic!r})", w)
        cards = [w for w in ws if w.packet == "PUBLISH" and w.direction == "out"
                 and (w.topic or "").startswith(DISCOVERY_PREFIX)]
        online = [w for w in cards if _user(w, "a2a-status") == "online"]
        if not online:
            c.violation(f"{node} served requests and never published its card online", *wills[:1])
            continue
        for w in online:
            if not w.retain or w.qos != 1:
                c.violation(f"{node} published its card online with retain={w.retain}, "
                            f"QoS {w.qos} (retained, QoS 1)", w)


#: The User Properties the binding defines (its specification at e533bd7), each `a2a-...`
BINDING_PROPERTIES = frozenset({
    "a2a-artifact-id", "a2a-artifact-mode", "a2a-authorization", "a2a-chunk-seqno",
    "a2a-context-id", "a2a-event-type", "a2a-last-chunk", "a2a-protocol",
    "a2a-recipient-agent-id", "a2a-recipient-kid", "a2a-requester-agent-id",
    "a2a-responder-agent-id", "a2a-security-profile", "a2a-status", "a2a-status-source",
    "a2a-task-id"})
#: `$a2a/v1/{method}/{org_id}/{unit_id}/{agent_id}` (a reply topic may add its suffix, a
#: pool's request topic is `.../pool/{pool_id}`), each id of A2M-ID-1's alphabet
INTERACTION_TOPIC = re.compile(r"^\$a2a/v1/(request|reply|event|discovery)/[A-Za-z0-9_.-]+/"
                               r"[A-Za-z0-9_.+-]+/[A-Za-z0-9_.+#-]+(/[A-Za-z0-9_.+#-]+)*$")


@rule("A2M-PROP-1: the User Properties the binding defines carry their a2a- prefix")
def binding_properties_carry_the_prefix(h: History, c: Collector) -> None:
    """Off its wire: no message an agent publishes under `$a2a/` carries one of the
    binding's User Properties without its `a2a-` prefix (`status` for `a2a-status`): a peer
    reading the binding's names finds nothing there."""
    bare = {name.removeprefix("a2a-"): name for name in BINDING_PROPERTIES}
    for node, wire in sorted(h.memo(_tapped).items()):
        for w in wire:
            if w.direction != "out" or w.packet != "PUBLISH" \
                    or not (w.topic or "").startswith("$a2a/"):
                continue
            users = _props(w).get("userProperties") or []
            c.count("publishes_read")
            for pair in users if isinstance(users, list) else []:
                name = str(pair[0]).lower() if isinstance(pair, list) and pair else ""
                if name in bare:
                    c.violation(f"{node} published {w.topic} with User Property {pair[0]!r}: "
                                f"the binding names it {bare[name]!r}", w)


@rule("A2M-TOPIC-2 (SHOULD), A2M-ID-1: what an agent publishes and subscribes under $a2a/ is "
      "an interaction topic $a2a/v1/{method}/{org_id}/{unit_id}/{agent_id}")
def interaction_topics_keep_the_shape(h: History, c: Collector) -> None:
    """Off its wire: every topic an agent publishes to under `$a2a/`, and every filter it
    subscribes under `$a2a/` (a shared one's after its `$share/{group}/`), is
    `$a2a/v1/{request|reply|event|discovery}/{org_id}/{unit_id}/{agent_id}`, a reply topic
    with its suffix, or a pool's request topic."""
    for node, wire in sorted(h.memo(_tapped).items()):
        for w in wire:
            if w.direction != "out":
                continue
            if w.packet == "PUBLISH":
                topics = [w.topic or ""]
            elif w.packet == "SUBSCRIBE":
                topics = [re.sub(r"^\$share/[^/]+/", "", f) for f in w.filters or ()]
            else:
                continue
            for topic in topics:
                if not topic.startswith("$a2a/"):
                    continue
                c.count("topics_read")
                if not INTERACTION_TOPIC.match(topic):
                    did = "published to" if w.packet == "PUBLISH" else "subscribed"
                    c.violation(f"{node} {did} {topic!r}: not $a2a/v1/{{method}}/{{org_id}}/"
                                "{unit_id}/{agent_id}", w)


@rule("A2M-PRES-3 (SHOULD): a responder that leaves on purpose says so: its card offline, said "
      "by the agent, before its DISCONNECT")
def leaves_offline(h: History, c: Collector) -> None:
    """A tapped responder that ends a connection with a DISCONNECT (a graceful stop: the
    broker then publishes no will) has, on that connection, since its card last said
    online, published its card again retained with a2a-status=offline and
    a2a-status-source=agent — or cleared it (an empty retained card: unregistered,
    A2M-DISC-2). One that just disconnects leaves a retained card saying online for an agent
    that is gone, and no will corrects it.

    A responder the bench stopped as an operator does (the restart fault's `graceful`:
    SIGTERM) that sent no DISCONNECT before its process ended did not leave gracefully:
    its will speaks for it, and this clause is undecided for that stop (UNKNOWN, not TRUE)."""
    tapped = h.memo(_tapped)
    began = {f.fault_index: f.seq for f in h.of(FaultStart)     # graceful stop -> its start
             if f.fault == "restart" and isinstance(f.params, dict) and f.params.get("graceful")}
    responders = _responders(tapped)
    for stop in h.of(NodeCrashed):
        if stop.fault_index in began and stop.node in responders:
            if not any(w.direction == "out" and w.packet == "DISCONNECT"
                       and began[stop.fault_index] < w.seq < stop.seq
                       for w in tapped[stop.node]):
                c.unknown("stops_without_a_disconnect")
    for node in sorted(responders):
        said: str | None = None       # what its card says now, as this connection set it
        for w in tapped[node]:
            if w.direction != "out":
                continue
            if w.packet == "CONNECT":
                said = None
            elif w.packet == "PUBLISH" and (w.topic or "").startswith(DISCOVERY_PREFIX) \
                    and w.retain:
                status = _user(w, "a2a-status")
                said = "cleared" if not w.size_bytes else \
                    "offline" if status == "offline" and _user(w, "a2a-status-source") == "agent" \
                    else status or "no status"
            elif w.packet == "DISCONNECT" and said is not None:
                c.count("graceful_leaves")
                if said not in ("offline", "cleared"):
                    c.violation(f"{node} disconnected on purpose while its card still said "
                                f"{said!r}: no offline card before its DISCONNECT", w)


def _no_pool(h: History) -> str | None:
    pooled = {(a.node, a.op_id) for a in h.of(A2mAttempt) if _pool_of(a.topic)}
    if not pooled:
        return "no request was sent to a pool"
    if any((r.node, r.op_id) in pooled for r in h.of(A2mReplyTaken)):
        return None
    return "no reply to a pooled request came back"


def _no_broker_promise(h: History) -> str | None:
    if any(_pool_of(a.topic) or a.expiry_s is not None for a in h.of(A2mAttempt)):
        return None
    attempted = {a.topic for a in h.of(A2mAttempt)}
    if any(t.topic in attempted for t in h.of(A2mRequestTaken)):
        return None      # a request of the bench's taken: its properties are judged
    if any(p.reason_code >= PUBACK_FAILURE for p in h.of(A2mPuback)) or any(
            w.packet == "PUBACK" and w.direction == "in" and w.reason_codes
            and w.reason_codes[0] >= PUBACK_FAILURE for w in h.of(Wire)):
        return None
    return ("no request went to a pool, none carried a Message Expiry Interval, none of "
            "the bench's requesters' reached a responder, and the broker refused none")


def _no_intake(h: History) -> str | None:
    took: list[Took] = h.memo(intake)
    sent: list[Answer] = h.memo(answers)
    if took or sent:
        return None
    return "no responder took a request in or answered one"


def _untapped(h: History) -> str | None:
    if h.of(Wire):
        return None
    return ("no agent was behind a wire tap (agents started by --node-command are; "
            "--wire-tap taps every agent)")


def _no_operation(h: History) -> str | None:
    published: list[Asked] = h.memo(asked)
    if published:
        return None
    if h.of(A2mRequestTaken):
        return None
    return "no requester began an operation and no responder took a request"


A2A_REQUESTS = Checker(
    "a2a_requests", "A2A over MQTT, requester side: every operation ends; retries keep the "
    "profile (new Correlation Data, same Task.id, the waits, three attempts, none after a "
    "reply); nothing is given up that was answered; a task's next turn keeps its context.",
    (every_operation_settles, retries_keep_the_profile, no_answer_lost,
     turns_keep_the_task_and_context, requests_carry_a_reply_path,
     no_request_again_after_a_reply, follow_ups_go_to_the_named_agent,
     requests_go_to_request_topics, correlations_are_the_requesters_own,
     request_expiry_outlasts_the_wait, context_property_matches_the_payload,
     nothing_settled_twice, reply_suffixes_resist_collisions,
     uncorrelated_replies_answer_nothing, unnamed_pooled_replies_answer_nothing,
     final_statuses_end_the_operation, stalled_streams_recovered_with_get_task,
     protocol_errors_not_retried_unchanged, replies_with_unknown_properties_taken,
     refused_publishes_retried),
    _no_operation,
    protocols=frozenset({A2A_MQTT}))
A2A_REPLIES = Checker(
    "a2a_replies", "A2A over MQTT, responder side: every reply answers a request that was "
    "sent, on its Response Topic, with its Correlation Data; every request taken in is "
    "answered (liveness); refused input runs nothing; a task keeps its context, a task that "
    "ended stays ended, and a task it has is never denied; a task ends as its agent did; one "
    "bounded to N tasks at once runs no more; an a2a- property it does not know, or an "
    "artifact mode it does not support, changes nothing.",
    (replies_answer_a_request, replies_echo_the_task_id, nothing_after_the_final_answer,
     refused_requests_run_nothing, malformed_requests_refused, contexts_are_kept,
     ended_tasks_stay_ended, every_request_answered, known_tasks_stay_known,
     new_contexts_are_welcome, unknown_properties_ignored,
     unknown_artifact_modes_answered_in_json, tasks_end_as_their_agent_did,
     capacity_kept), _no_intake,
    protocols=frozenset({A2A_MQTT}))

A2A_POOLS = Checker(
    "a2a_pools", "A2A over MQTT, shared-subscription pools: a reply to a pooled request names "
    "the member that answered.",
    (pooled_replies_name_their_responder, pool_members_share_a_group), _no_pool,
    protocols=frozenset({A2A_MQTT}))
A2A_BROKER = Checker(
    "a2a_broker", "A2A over MQTT, what the profile relies on of its MQTT 5 broker: a pooled "
    "request reaches one member of the pool's shared group (a broker that answers 'no "
    "matching subscribers' serves no pool; one that copies it to every member runs it "
    "twice); a request past its Message Expiry Interval is not delivered; a request is "
    "refused only while a fault refuses its sender's publishes; a request reaches its "
    "responder with its Response Topic and Correlation Data.",
    (pooled_requests_reach_the_pool, pooled_requests_reach_one_member,
     expired_requests_not_delivered, refusals_have_a_cause, requests_keep_their_reply_path),
    _no_broker_promise,
    protocols=frozenset({A2A_MQTT}))

A2A_SESSION = Checker(
    "a2a_session", "A2A over MQTT, an agent's session and presence as its wire shows them: "
    "MQTT 5 with a session that outlives its connection, the client id {org}/{unit}/{agent}, "
    "a responder's card retained online with a will on it, and offline when it leaves on "
    "purpose; no bearer token echoed in anything it publishes, none over plain TCP.",
    (connects_with_mqtt5, connects_with_a_persistent_session, connects_as_org_unit_agent,
     subscribes_its_request_topic, announces_its_card_with_a_will, leaves_offline,
     tokens_never_echoed, tokens_travel_over_tls, binding_properties_carry_the_prefix,
     interaction_topics_keep_the_shape), _untapped,
    needs="wire",
    protocols=frozenset({A2A_MQTT}))

def _no_tokens(h: History) -> str | None:
    if _tokens_required(h):
        return None
    return "its responders required no bearer tokens (a topology's [a2a.oauth] asks for them)"


A2A_OAUTH = Checker(
    "a2a_oauth", "A2A over MQTT, bearer tokens: where responders require them, every request "
    "carries one; a request whose token is missing, expired, for another audience, from "
    "another issuer, forged or short of the scope is refused and runs nothing, one whose "
    "token is good is not refused (that no agent echoes a token is a2a_session's, off the "
    "wire).",
    (requests_carry_a_token, unauthorized_requests_refused, good_tokens_honoured), _no_tokens,
    protocols=frozenset({A2A_MQTT}))


def _no_handover(h: History) -> str | None:
    found, several = h.memo(_from_another)
    if found or several or any(t.intake is Intake.HANDED_OVER for t in h.of(A2mRequestTaken)):
        return None
    return ("no task was handed over: no reply came from another agent than the one asked "
            "(a topology's hands_over_to makes a card owner hand its tasks over)")


A2A_HANDOVER = Checker(
    "a2a_handover", "A2A over MQTT, task handover: a card owner's delegate names itself on "
    "every reply to a task handed to it, and what was handed over reaches it with its reply "
    "path (the requester's side, follow-ups to the named agent, is a2a_requests').",
    (handed_over_replies_name_their_agent, handed_over_requests_reach_their_agent),
    _no_handover, protocols=frozenset({A2A_MQTT}))


def _no_agent(h: History) -> str | None:
    up = bool(h.of(ExecutorsRegistered)) or bool(h.of(NodeStarted))
    return None if up else "no agent came up"


@rule("DESIGN §3, A2M-RSP-3: whatever an agent is given, it answers with a recorded outcome, "
      "never by dying of its own exception")
def agents_never_raise(h: History, c: Collector) -> None:
    """No requester or responder of the profile raises while handling an input (the seed
    protocol's `never_raises`, on the profile's agents: one rule, two checkers)."""
    never_raises.fn(h, c)


A2A_ROBUSTNESS = Checker(
    "a2a_robustness", "A2A over MQTT: no agent dies of its own exception — whatever it is "
    "given, a requester or a responder answers with a recorded outcome (the seed protocol's "
    "robustness rule, on the profile's agents).",
    (agents_never_raise,), _no_agent, protocols=frozenset({A2A_MQTT}))

CHECKERS = (A2A_REQUESTS, A2A_REPLIES, A2A_POOLS, A2A_HANDOVER, A2A_BROKER, A2A_SESSION,
            A2A_OAUTH, A2A_ROBUSTNESS)


# -- the profile's situations (coverage: reached or not, never a verdict) ------------------------
def _taken(intake_kind: Intake) -> Callable[[History], int]:
    def count(h: History) -> int:
        return sum(t.intake is intake_kind for t in h.of(A2mRequestTaken))
    return count


def _retried_after_its_responder_restarted(h: History) -> int:
    """Requests for a Task.id a responder had taken in before it went down (and came back:
    it took this one in)."""
    began: dict[tuple[str, str], float] = {}
    restarts = h.memo(Transit).crashes
    n = 0
    for t in h.of(A2mRequestTaken):
        if t.task_id is None:
            continue
        if t.intake is Intake.NEW:
            began.setdefault((t.node, t.task_id), t.t_ms)
        elif t.intake is Intake.DUPLICATE and (t.node, t.task_id) in began:
            n += any(began[(t.node, t.task_id)] < x < t.t_ms for x in restarts[t.node])
    return n


def _attempts(why: AttemptWhy) -> Callable[[History], int]:
    def count(h: History) -> int:
        return sum(a.why is why for a in h.of(A2mAttempt))
    return count


#: (name, what it is, how often a history reached it): the coverage table counts these
#: beside the seed protocol's situations (bench/checks/coverage.py)
SITUATIONS: tuple[tuple[str, str, Callable[[History], int]], ...] = (
    ("a2a_retry_answered_from_the_task_table", "a responder took a request for a Task.id it "
     "had, and answered from its task table (nothing ran again)", _taken(Intake.DUPLICATE)),
    ("a2a_retry_after_its_responder_restarted", "a request reached a responder for a Task.id "
     "it took in before it restarted", _retried_after_its_responder_restarted),
    ("a2a_retried_for_no_first_reply", "a requester retried an operation no reply came to in "
     "its first-reply wait", _attempts(AttemptWhy.NO_FIRST_REPLY)),
    ("a2a_sent_again_after_a_requester_restart", "a requester restarted with an operation "
     "open and sent it again", _attempts(AttemptWhy.RESTART)),
    ("a2a_next_turn", "a task that asked for input got its next turn", _taken(Intake.CONTINUED)),
    ("a2a_cancelled_while_running", "a CancelTask reached a task not yet ended",
     _taken(Intake.CANCEL)),
    ("a2a_task_handed_over", "a card owner handed a request's task over to its delegate",
     _taken(Intake.HANDED_OVER)),
    ("a2a_spoilt_token_sent", "a responder that requires bearer tokens was sent a request "
     "whose token it must refuse", lambda h: sum(
         a.attack == "malformed_request" and a.how in TOKEN_ANSWER for a in h.of(AttackSent))),
)
