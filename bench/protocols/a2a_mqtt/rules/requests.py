"""A2A over MQTT, the requester's side (`a2a_requests`): every operation ends, retries keep the profile, nothing given up that was answered."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from bench.checks import Checker, Collector, rule
from bench.checks.network import Transit, fault_windows
from bench.checks.terms import records_late_ms, timers_late_ms
from bench.core.events import (
    A2mAttempt,
    A2mOutcome,
    A2mPuback,
    A2mReplyTaken,
    A2mRequestTaken,
    A2mSettled,
    AttemptWhy,
    NodeCrashed,
    ReplyKind,
    RequestSent,
    RequestSettled,
    RunStarted,
    Wire,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC
from bench.protocols.a2a_mqtt.rules.common import (
    BINDING_PROPERTIES,
    EARLY_MS,
    FINAL_STATES,
    REPLY_FIRST_MS,
    TERMINAL_STATES,
    Answer,
    Asked,
    Heard,
    _asked_off_the_wire,
    _askers,
    _heard_off_the_wire,
    _pool_of,
    _props,
    _reply_topics,
    _subscribed_at,
    _tampering,
    _user,
    _user_pairs,
    answers,
    asked,
    heard,
    intake,
)

MAX_ATTEMPTS = 3


BACKOFF_MS = (1_000.0, 2_000.0, 4_000.0)


JITTER = 0.2


#: The longest an operation may take to end with nobody answering: every attempt's wait
#: and every backoff at its longest, and a stream's idle wait (A2M-RETRY-7).
STREAM_IDLE_MS = 30_000.0


OPERATION_BUDGET_MS = MAX_ATTEMPTS * REPLY_FIRST_MS + sum(BACKOFF_MS[:MAX_ATTEMPTS - 1]) \
    * (1 + JITTER) + STREAM_IDLE_MS


def wire_asked(h: History) -> list[Asked]:
    """Every request a requester's wire tap saw it publish, the reference's too where it was
    tapped (a grid, --wire-tap): what the rules that read only wires judge."""
    return [a for _seq, a in sorted(_asked_off_the_wire(h, set()), key=lambda x: x[0])]


def wire_heard(h: History) -> list[Heard]:
    """Every reply a requester's wire tap saw reach it, the reference's too where tapped."""
    return [x for _seq, x in sorted(_heard_off_the_wire(h, set()), key=lambda x: x[0])]


def _unnamed_pooled(h: History) -> set[int]:
    """The replies (their events' seq) a requester got off its wire to a request it had sent
    to a pool's topic, naming no responder: protocol errors (A2M-REQ-3) that answer nothing
    (`unnamed_pooled_replies_answer_nothing` judges that the requester knew)."""
    pooled = {(a.node, a.correlation) for a in h.memo(wire_asked)
              if a.correlation is not None and _pool_of(a.topic)}
    return {x.event.seq for x in h.memo(wire_heard) if x.named is None
            and (x.node, x.correlation) in pooled}


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
    and no later than that (give or take how late the substrate's timers may fire),
    unless a fault acted on the requester (or on every node) or it crashed meanwhile;
    and no attempt at all once a correlated reply or stream item
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
    # and a retry is a timer's doing: on a wall clock it may fire as late as the substrate
    # says its timers may (CI, 2026-12-06, ten workers on two cores: a retry 124 ms past
    # its 16.2 s was FALSE on the reference); simulated, not at all
    late = timers_late_ms(h)
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
            if gap > latest + slack + late:
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
    broker refused the last; on a wall clock, less how late the host may run a process: the
    last attempt's stamp may be that late); held to the profile's defaults (A2M-RETRY-1
    lets a deployment configure others: a requester under test runs with the defaults, as
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
    # the tap stamps a packet when the bench's proxy reads it, and on a wall clock the
    # requester's write and the proxy's read run as late as a busy host runs a process — as
    # late as a timer may fire there (timers_late_ms; 0 simulated): an attempt stamped late
    # makes the retry after it look early (CI on two cores with ten workers: 120 ms,
    # 2026-12-06; 557 ms after the requester recorded sending it, 2026-12-07), so an early
    # retry is one earlier than that. On a wall clock a retry up to that much early passes.
    early_ms = EARLY_MS + timers_late_ms(h)
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

#: ... and a reply that reached the requester right behind others (a burst: each within
#: BURST_GAP_MS of the one before, as a partition's end or a broker's resend brings them) is
#: read after them: READ_EACH_MS more for each one ahead of it in its burst. A bound chosen
#: for a loaded Python process (a JSON reply parsed, a lock taken, a line written): a clean
#: clone's suite (2026-12-07, ten workers and a build on two cores) saw examples/a2a-requester
#: retry 550 ms after a reply that came in a burst of about fifty as a2a_stream_stall's
#: partition ended. A reply that comes alone gets RETRY_CROSSING_MS, as before.
BURST_GAP_MS = 50.0
BURST_SPAN_MS = 1_000.0
READ_EACH_MS = 20.0


def _arrivals(h: History) -> tuple[dict[str, list[Wire]], dict[int, int]]:
    """The PUBLISHes that reached each node, in order, and each one's place among them (by
    its event's seq)."""
    arrivals: dict[str, list[Wire]] = defaultdict(list)
    place: dict[int, int] = {}
    for e in h.of(Wire):
        if e.packet == "PUBLISH" and e.direction == "in":
            place[e.seq] = len(arrivals[e.node])
            arrivals[e.node].append(e)
    return arrivals, place


def _ahead_in_burst(h: History, w: Wire) -> int:
    """How many PUBLISHes reached a node right before `w` in the burst it came in: on that
    node's wire, each within BURST_GAP_MS of the one before and all within BURST_SPAN_MS
    of `w` (what came earlier than that it has had the time to read)."""
    arrivals, place = h.memo(_arrivals)
    came, i = arrivals[w.node], place.get(w.seq, 0)
    n = 0
    while n < i and came[i - n].t_ms - came[i - n - 1].t_ms <= BURST_GAP_MS \
            and w.t_ms - came[i - n - 1].t_ms <= BURST_SPAN_MS:
        n += 1
    return n


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


@rule("A2M-RETRY-2, A2M-RETRY-4, A2M-RETRY-6: once a reply came, the request is not sent "
      "again; each attempt has Correlation Data of its own")
def no_request_again_after_a_reply(h: History, c: Collector) -> None:
    """Per requester and Task.id, read from what it published and received (its records,
    or its wire): a SendMessage for the task is not published again once a correlated
    reply to an earlier one came — a result, a stream item or an error — unless that reply
    asked for the next turn (input-required, auth-required) or was an error the profile
    lets it retry (-32003, -32004); and no attempt reuses Correlation Data an earlier
    request for the task had. A reply to a pooled request that names no responder is a
    protocol error (A2M-REQ-3): it stops nothing. On the wire, a retry within
    RETRY_CROSSING_MS of the reply (READ_EACH_MS more for each reply that came right before
    it in a burst) may have been written before the reply was read: counted."""
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
                and x.t_ms - stop.t_ms < RETRY_CROSSING_MS \
                + READ_EACH_MS * _ahead_in_burst(h, stop.event):
            c.count("retries_that_crossed_a_reply")   # written before the reply was read
        elif stop is not None:
            c.violation(f"{x.node} sent task {x.task_id} again after a reply to it came "
                        f"({'error ' + str(stop.code) if stop.code is not None else stop.state})",
                        stop.event, x.event)
            answered.pop(key)


#: ... and what it appends to a text value it alters (a User Property), or is the value of
#: one it adds (the fault's documented mark, written out here)
TAMPER_TEXT = "|tampered"


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
    protocols=frozenset({SPEC.name}))
