"""The profile's reference requester, alone and back to back with the reference responder
through a few lines of broker (as h11's tests wire two connections): each test names the
clause it holds the requester to (docs/profiles/a2a-mqtt.md)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

from bench.core import events as ev
from bench.core.commands import (
    CancelTimer,
    Execute,
    PersistRecord,
    Publish,
    Record,
    StartTimer,
    Subscribe,
)
from bench.core.inputs import (
    AgentEmitted,
    ConnectionUp,
    MessageReceived,
    PublishSettled,
    Restored,
    Started,
    Subscribed,
    TaskFinished,
    TaskRequested,
    TimerFired,
    TimerId,
    TimerKind,
)
from bench.core.vocabulary import INPUT_REQUIRED, FlowKind
from bench.protocols.a2a_mqtt.requester import Requester, RequesterConfig
from bench.protocols.a2a_mqtt.responder import Responder, ResponderConfig
from bench.protocols.a2a_mqtt.wire import RESPONDER_AGENT_ID, Method, Props, Topics
from bench.substrates.filters import matches

TOPICS = Topics("acme", "billing")
TASK = str(uuid.UUID(int=1, version=4))


def requester() -> Requester:
    return Requester(RequesterConfig(TOPICS, "client", "r1"))


class Wire:
    """Two agents and a broker in a dozen lines: exact filters and `+`, `$share` groups in
    turn, a PUBACK for every tracked publish; timers kept until the test fires them; the
    agent's work played by the test. `drop` loses the next messages matching it."""

    def __init__(self, *agents: Any) -> None:
        self.agents = list(agents)
        self.subs: dict[int, list[str]] = {}
        self.timers: dict[Any, tuple[int, int]] = {}      # timer -> (agent index, at)
        self.work: list[Execute] = []
        self.now = 0
        self.drop: Callable[[Publish], bool] = lambda m: False
        self.turn = itertools.count()
        self.log: list[tuple[int, Any]] = []

    def start(self) -> None:
        for i in range(len(self.agents)):
            self.feed(i, Started(self.now, f"b{i}"))
            self.feed(i, ConnectionUp(self.now, False))

    def feed(self, i: int, inp: Any) -> None:
        for cmd in self.agents[i].handle(inp):
            self.log.append((i, cmd))
            match cmd:
                case Subscribe():
                    self.subs[i] = list(cmd.filters)
                    self.feed(i, Subscribed(self.now, cmd.filters))
                case Publish():
                    self.route(cmd)
                    if cmd.message_id is not None:
                        self.feed(i, PublishSettled(self.now, cmd.message_id, True, None, 0))
                case StartTimer():
                    self.timers[cmd.timer] = (i, cmd.at_ms)
                case CancelTimer():
                    self.timers.pop(cmd.timer, None)
                case Execute():
                    self.work.append(cmd)

    def route(self, msg: Publish) -> None:
        if msg.retain or self.drop(msg):
            return
        shared: dict[str, list[int]] = {}
        for i, filters in self.subs.items():
            for f in filters:
                if f.startswith("$share/"):
                    _, group, real = f.split("/", 2)
                    if matches(real, msg.topic):
                        shared.setdefault(group, []).append(i)
                elif f == msg.topic or matches(f, msg.topic):
                    self.feed(i, self.received(msg))
        for members in shared.values():
            self.feed(members[next(self.turn) % len(members)], self.received(msg))

    def received(self, msg: Publish) -> MessageReceived:
        return MessageReceived(self.now, msg.topic, msg.payload, msg.qos, props=msg.props)

    def advance(self, ms: int) -> None:
        """Let `ms` pass, firing timers in time order."""
        end = self.now + ms
        while True:
            due = sorted((at, str(t), t, i) for t, (i, at) in self.timers.items() if at <= end)
            if not due:
                break
            at, _, timer, i = due[0]
            self.now = max(self.now, at)
            del self.timers[timer]
            self.feed(i, TimerFired(self.now, timer))
        self.now = end

    def finish(self, responder: int, text: str = "42") -> None:
        job = self.work.pop(0)
        self.feed(responder, TaskFinished(self.now, job.task_id, True, text))

    def events(self, kind: type[ev.Event], agent: int | None = None) -> list[Any]:
        return [c.event for i, c in self.log if isinstance(c, Record)
                and isinstance(c.event, kind) and agent in (None, i)]


def ask(method: Method = Method.SEND, *, op: str = "op1", agent: str | None = "tax",
        pool: str | None = None, text: str = "hi", now: int = 0) -> TaskRequested:
    return TaskRequested(now, op, f"{op}.m", "client", agent or f"pool:{pool}",
                         {"method": method.value, "taskId": TASK, "text": text})


def pair() -> tuple[Wire, Requester, Responder]:
    req, rsp = requester(), Responder(ResponderConfig(TOPICS, "tax"))
    w = Wire(req, rsp)
    w.start()
    return w, req, rsp


# -- the happy path, and the order of things (A2M-SESS-2, A2M-RR-2, A2M-REQ-1) ----------------------
def test_a_request_is_answered_once_back_to_back() -> None:
    w, _, _ = pair()
    w.feed(0, ask())
    assert [e.task_id for e in w.work] == [TASK]
    w.finish(1)
    [settled] = w.events(ev.A2mSettled)
    assert (settled.outcome, settled.attempts, settled.text) == (ev.A2mOutcome.COMPLETED, 1, "42")


def test_nothing_is_published_before_the_reply_topic_is_subscribed() -> None:
    req = requester()
    req.handle(Started(0, "b1"))
    early = req.handle(ask())
    assert not [c for c in early if isinstance(c, Publish)]
    assert req.handle(ConnectionUp(1, False)) == [Subscribe(("$a2a/v1/reply/acme/billing/client/r1",), 1)]
    sent = [c for c in req.handle(Subscribed(2, ("x",))) if isinstance(c, Publish)]
    assert len(sent) == 1
    props = sent[0].props
    assert props is not None and props.response_topic == "$a2a/v1/reply/acme/billing/client/r1"
    assert props.correlation_data and json.loads(sent[0].payload)[
        "params"]["message"]["taskId"] == TASK


# -- the retry profile (A2M-RETRY-1..6) ----------------------------------------------------------
def test_a_lost_reply_is_retried_under_new_correlation_and_the_task_runs_once() -> None:
    w, _, _ = pair()
    lost = {"n": 1}

    def drop_first_reply(m: Publish) -> bool:
        if m.topic.startswith("$a2a/v1/reply/") and lost["n"]:
            lost["n"] -= 1
            return True
        return False
    w.drop = drop_first_reply
    w.feed(0, ask())
    w.finish(1)                                   # the answer is lost
    assert not w.events(ev.A2mSettled)
    w.advance(15_000 + 1_200)                     # first-reply timeout, then the backoff
    attempts = w.events(ev.A2mAttempt)
    assert [a.attempt for a in attempts] == [1, 2]
    assert attempts[0].correlation != attempts[1].correlation
    assert {a.task_id for a in attempts} == {TASK}
    [settled] = w.events(ev.A2mSettled)
    assert settled.outcome is ev.A2mOutcome.COMPLETED and settled.attempts == 2
    assert len(w.events(ev.TaskExecuted)) == 1    # the responder deduplicated on Task.id


def test_with_nobody_answering_three_attempts_then_no_reply_with_the_backoffs_jittered() -> None:
    req = requester()
    w = Wire(req)
    w.start()
    w.feed(0, ask())
    w.advance(200_000)
    attempts = [c for i, c in w.log if isinstance(c, StartTimer)
                and c.timer.kind is TimerKind.BACKOFF]
    assert [a.attempt for a in w.events(ev.A2mAttempt)] == [1, 2, 3]
    assert len(attempts) == 2
    [settled] = w.events(ev.A2mSettled)
    assert settled.outcome is ev.A2mOutcome.NO_REPLY and settled.attempts == 3


def test_backoffs_are_one_then_two_seconds_within_their_jitter() -> None:
    req = requester()
    for inp in (Started(0, "b1"), ConnectionUp(0, False), Subscribed(0, ("x",)), ask()):
        req.handle(inp)
    now = 15_000
    for expected in (1_000, 2_000):
        out = req.handle(TimerFired(now, TimerId(TimerKind.FIRST_REPLY, "op1")))
        backoff = next(c for c in out if isinstance(c, StartTimer)
                       and c.timer.kind is TimerKind.BACKOFF)
        assert 0.8 * expected <= backoff.at_ms - now <= 1.2 * expected
        now = backoff.at_ms
        req.handle(TimerFired(now, backoff.timer))
        now += 15_000


def test_a_publish_the_broker_refuses_is_retried() -> None:
    req = requester()
    req.handle(Started(0, "b1"))
    req.handle(ConnectionUp(0, False))
    req.handle(Subscribed(0, ("x",)))
    sent = [c for c in req.handle(ask()) if isinstance(c, Publish)]
    out = req.handle(PublishSettled(1, sent[0].message_id or "", True, None, 0x97))
    backoff = next(c for c in out if isinstance(c, StartTimer))
    assert backoff.timer.kind is TimerKind.BACKOFF
    again = [c for c in req.handle(TimerFired(backoff.at_ms, backoff.timer))
             if isinstance(c, Publish)]
    assert len(again) == 1 and again[0].props != sent[0].props


def test_once_a_stream_item_came_nothing_is_published_again_and_a_stall_asks_get_task() -> None:
    w, _, rsp = pair()
    w.feed(0, ask(Method.SEND_STREAMING))
    w.feed(1, AgentEmitted(w.now, TASK, FlowKind.TOKEN, "4"))
    w.advance(40_000)                              # no more items: the stream stalled
    attempts = w.events(ev.A2mAttempt)
    assert [(a.method, a.attempt) for a in attempts] == [("SendStreamingMessage", 1),
                                                        ("GetTask", 1)]
    settled = {s.op_id: s for s in w.events(ev.A2mSettled)}
    assert settled["op1"].outcome is ev.A2mOutcome.NO_REPLY
    assert settled["op1.get"].outcome is ev.A2mOutcome.WORKING


def test_a_stream_ends_at_its_terminal_status_with_the_text_it_carried() -> None:
    w, _, _ = pair()
    w.feed(0, ask(Method.SEND_STREAMING))
    w.feed(1, AgentEmitted(w.now, TASK, FlowKind.TOKEN, "4"))
    w.feed(1, AgentEmitted(w.now, TASK, FlowKind.TOKEN, "2"))
    w.finish(1, "42")
    [settled] = w.events(ev.A2mSettled)
    assert settled.outcome is ev.A2mOutcome.COMPLETED and settled.text == "42"


# -- protocol errors ignored (A2M-REQ-2, A2M-REQ-3); who answers for a task (A2M-REQ-4, HAND-2) -----
def test_a_reply_with_unknown_or_no_correlation_settles_nothing() -> None:
    w, req, _ = pair()
    w.feed(0, ask())
    body = json.dumps({"jsonrpc": "2.0", "id": "x", "result": {
        "id": TASK, "status": {"state": "TASK_STATE_COMPLETED"}}}).encode()
    for props in (Props(correlation_data=b"nope"), Props()):
        w.feed(0, MessageReceived(w.now, req.reply_topic, body, 1, props=props))
    assert not w.events(ev.A2mSettled)
    assert len([e for e in w.events(ev.A2mReplyTaken) if e.reason]) == 2


def test_a_pooled_task_is_followed_up_at_the_responder_that_answered() -> None:
    req = requester()
    a = Responder(ResponderConfig(TOPICS, "tax-a", pool_id="p1"))
    b = Responder(ResponderConfig(TOPICS, "tax-b", pool_id="p1"))
    w = Wire(req, a, b)
    w.start()
    w.feed(0, ask(agent=None, pool="p1"))
    [job] = w.work
    who = 1 if job.agent_id == "tax-a" else 2
    w.finish(who)
    [settled] = w.events(ev.A2mSettled)
    assert settled.responder_agent_id == job.agent_id
    w.feed(0, ask(Method.GET_TASK, op="op2", agent=None, pool="p1"))
    [get] = [e for e in w.events(ev.A2mAttempt) if e.op_id == "op2"]
    assert get.topic == TOPICS.request(job.agent_id)
    # the member's plain answer to a follow-up sent to its own topic is no pooled reply:
    # it settles the operation (found by explore: it was ignored for naming no responder)
    [answered] = [e for e in w.events(ev.A2mSettled) if e.op_id == "op2"]
    assert answered.outcome is ev.A2mOutcome.COMPLETED


def test_a_pooled_reply_naming_no_responder_is_ignored() -> None:
    w, req, _ = pair()
    w.feed(0, ask(agent=None, pool="p1"))         # nobody serves the pool: it stays in flight
    [attempt] = w.events(ev.A2mAttempt)
    body = json.dumps({"jsonrpc": "2.0", "id": "x", "result": {
        "id": TASK, "status": {"state": "TASK_STATE_COMPLETED"}}}).encode()
    props = Props(correlation_data=bytes.fromhex(attempt.correlation))
    w.feed(0, MessageReceived(w.now, req.reply_topic, body, 1, props=props))
    assert not w.events(ev.A2mSettled)
    props = Props(correlation_data=bytes.fromhex(attempt.correlation),
                  user_properties=((RESPONDER_AGENT_ID, "tax-z"),))
    w.feed(0, MessageReceived(w.now, req.reply_topic, body, 1, props=props))
    assert w.events(ev.A2mSettled)[0].responder_agent_id == "tax-z"


# -- a restart ------------------------------------------------------------------------------------
def test_a_restarted_requester_sends_what_was_in_flight_again_on_its_new_path() -> None:
    req = requester()
    w = Wire(req)
    w.start()
    w.feed(0, ask())
    table = {c.key: c.value for _, c in w.log if isinstance(c, PersistRecord)}
    again = Requester(RequesterConfig(TOPICS, "client", "r2"))
    w2 = Wire(again)
    w2.feed(0, Started(5, "b9", Restored(requests=table)))
    w2.feed(0, ConnectionUp(5, False))
    [attempt] = w2.events(ev.A2mAttempt)
    assert (attempt.attempt, attempt.why, attempt.task_id) == (2, ev.AttemptWhy.RESTART, TASK)


# -- multi-turn (A2M-CTX-1, A2M-CTX-5, A2M-STREAM-3) --------------------------------------------
def test_a_question_is_answered_as_the_next_turn_of_the_same_task_and_context() -> None:
    w, _, _ = pair()
    w.feed(0, TaskRequested(0, "op1", "op1.m", "client", "tax",
                            {"taskId": TASK, "contextId": "ctx-1", "text": "book it"}))
    job = w.work.pop(0)
    w.feed(1, TaskFinished(w.now, job.task_id, True, {INPUT_REQUIRED: "which day?"}))
    first, = w.events(ev.A2mSettled)
    assert first.outcome is ev.A2mOutcome.INPUT_REQUIRED
    # the next turn: a new operation, new Correlation Data, the same Task.id and context
    [turn2] = w.work
    assert (turn2.task_id, turn2.conversation_id, turn2.turn) == (TASK, "ctx-1", 2)
    attempts = w.events(ev.A2mAttempt, 0)
    assert [a.op_id for a in attempts] == ["op1", "op1.t2"]
    assert attempts[0].correlation != attempts[1].correlation
    assert all(a.context_id == "ctx-1" for a in attempts)
    w.finish(1)
    assert [(s.op_id, s.outcome) for s in w.events(ev.A2mSettled)] == [
        ("op1", ev.A2mOutcome.INPUT_REQUIRED), ("op1.t2", ev.A2mOutcome.COMPLETED)]
    assert [r.context_id for r in w.events(ev.A2mReplied, 1)] == ["ctx-1", "ctx-1"]
    assert len(w.events(ev.TaskExecuted, 1)) == 1      # one task, run once, in two turns


def test_an_agent_that_keeps_asking_gets_at_most_three_turns() -> None:
    w, _, _ = pair()
    w.feed(0, ask())
    for _ in range(5):
        if not w.work:
            break
        job = w.work.pop(0)
        w.feed(1, TaskFinished(w.now, job.task_id, True, {INPUT_REQUIRED: "and then?"}))
    assert [s.op_id for s in w.events(ev.A2mSettled)] == ["op1", "op1.t2", "op1.t3"]
    assert not w.work
