"""The profile's reference responder, driven input by input (no broker, no clock): each
test names the clause it holds the responder to (docs/profiles/a2a-mqtt.md)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core import events as ev
from bench.core.commands import Connect, Execute, PersistRecord, Publish, Record, Subscribe
from bench.core.inputs import (
    AgentEmitted,
    ConnectionUp,
    MessageReceived,
    Restored,
    Started,
    Subscribed,
    TaskFinished,
)
from bench.core.vocabulary import INPUT_REQUIRED, FlowKind
from bench.protocols.a2a_mqtt.responder import Responder, ResponderConfig
from bench.protocols.a2a_mqtt.wire import (
    CONTEXT_ID,
    RESPONDER_AGENT_ID,
    STATUS,
    Props,
    Topics,
)

TOPICS = Topics("acme", "billing")
REPLY = TOPICS.reply("client", "r1")
TASK = str(uuid.UUID(int=1, version=4))
CTX = str(uuid.UUID(int=2, version=4))


def responder(pool: str | None = None) -> tuple[Responder, list[object]]:
    r = Responder(ResponderConfig(TOPICS, "tax", {"name": "tax"}, pool_id=pool))
    return r, r.handle(Started(0, "b1"))


def send(task_id: str = TASK, *, corr: bytes = b"c1", method: str = "SendMessage",
         context: str | None = CTX, text: str = "hello", topic: str | None = None,
         props: Props | None = None, rpc_id: object = "1") -> MessageReceived:
    message: dict[str, Any] = {"messageId": "m1", "taskId": task_id, "role": "ROLE_USER",
                               "parts": [{"text": text}]}
    if context is not None:
        message["contextId"] = context
    body = {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": {"message": message}}
    return raw(json.dumps(body).encode(), corr=corr, topic=topic, props=props)


def call(method: str, task_id: str = TASK, corr: bytes = b"q1") -> MessageReceived:
    body = {"jsonrpc": "2.0", "id": "q", "method": method, "params": {"id": task_id}}
    return raw(json.dumps(body).encode(), corr=corr)


def raw(payload: bytes, *, corr: bytes | None = b"c1", topic: str | None = None,
        props: Props | None = None, reply: str | None = REPLY) -> MessageReceived:
    p = props or Props(response_topic=reply, correlation_data=corr)
    return MessageReceived(1, topic or TOPICS.request("tax"), payload, 1, props=p)


def task(reply: dict[str, Any]) -> dict[str, Any]:
    """The Task a reply carries: SendMessage's wrapped ({"task": …}, A2A v1.0
    SendMessageResponse), GetTask's and CancelTask's bare."""
    result: dict[str, Any] = reply["result"]
    return result.get("task", result)


def publishes(commands: list[object]) -> list[Publish]:
    return [c for c in commands if isinstance(c, Publish)]


def replies(commands: list[object]) -> list[dict[str, Any]]:
    return [json.loads(m.payload) for m in publishes(commands)]


def records(commands: list[object], kind: type[ev.Event]) -> list[Any]:
    return [c.event for c in commands if isinstance(c, Record) and isinstance(c.event, kind)]


def executes(commands: list[object]) -> list[Execute]:
    return [c for c in commands if isinstance(c, Execute)]


def done(r: Responder, text: str = "42", *, asks: bool = False,
         task_id: str = TASK) -> list[object]:
    return r.handle(TaskFinished(5, task_id, True, {INPUT_REQUIRED: text} if asks else text))


# -- presence (A2M-PRES-1, A2M-PRES-2, A2M-SESS-3, A2M-RSP-1) -------------------------------------
def test_it_connects_with_a_will_subscribes_then_announces_itself() -> None:
    r, started = responder()
    connect = next(c for c in started if isinstance(c, Connect))
    assert connect.client_id == "acme/billing/tax" and not connect.clean_session
    assert connect.will_topic == "$a2a/v1/discovery/acme/billing/tax" and connect.will_retain
    assert connect.will_props is not None and connect.will_props.user(STATUS) == "offline"
    subscribe = r.handle(ConnectionUp(1, False))
    assert subscribe == [Subscribe(("$a2a/v1/request/acme/billing/tax",), 1)]
    card = publishes(r.handle(Subscribed(2, subscribe[0].filters)))
    assert [m.topic for m in card] == [connect.will_topic] and card[0].retain
    assert card[0].props is not None and card[0].props.user(STATUS) == "online"


# -- a task, its answer, and its retries (A2M-RR-3, A2M-RR-6, A2M-CTX-1, A2M-RETRY-3) ---------------
def test_a_task_runs_once_and_its_answer_echoes_correlation_task_and_context() -> None:
    r, _ = responder()
    took = r.handle(send())
    assert [(e.task_id, e.payload["turn"], e.payload["text"]) for e in executes(took)] == \
        [(TASK, 1, "hello")]
    assert not publishes(took)                 # SendMessage: one answer, when there is one
    assert records(took, ev.TaskExecuted)[0].task_id == TASK
    answer = done(r)
    [msg] = publishes(answer)
    assert msg.topic == REPLY and msg.props and msg.props.correlation_data == b"c1"
    assert msg.qos == 1
    answered = json.loads(msg.payload)["result"]["task"]     # A2A v1.0 SendMessageResponse
    assert (answered["id"], answered["contextId"], answered["status"]["state"]) == \
        (TASK, CTX, "TASK_STATE_COMPLETED")
    assert answered["artifacts"][0]["parts"] == [{"text": "42"}]


def test_a_retry_after_the_answer_returns_it_and_runs_nothing() -> None:
    r, _ = responder()
    r.handle(send())
    done(r)
    again = r.handle(send(corr=b"c2", rpc_id="2"))
    assert not executes(again)
    [msg] = publishes(again)
    assert msg.props.correlation_data == b"c2"
    assert task(json.loads(msg.payload))["status"]["state"] == "TASK_STATE_COMPLETED"
    assert records(again, ev.A2mRequestTaken)[0].intake is ev.Intake.DUPLICATE


def test_a_retry_while_it_runs_is_told_so_and_gets_the_answer_too() -> None:
    r, _ = responder()
    r.handle(send())
    again = r.handle(send(corr=b"c2"))
    assert not executes(again)
    assert [task(m)["status"]["state"] for m in replies(again)] == ["TASK_STATE_WORKING"]
    answer = done(r)
    assert sorted(m.props.correlation_data for m in publishes(answer)) == [b"c1", b"c2"]


def test_a_redelivered_copy_while_it_runs_gets_one_final_answer_not_two() -> None:
    """The same PUBLISH again (QoS1, DUP): the same reply path, so no second watcher — its
    correlation gets one final answer (A2M-STREAM-2). Found by explore: the copy was kept
    as a second watcher and the correlation answered COMPLETED twice."""
    r, _ = responder()
    r.handle(send())
    r.handle(send())
    answer = done(r)
    assert [m.props.correlation_data for m in publishes(answer)] == [b"c1"]


def test_a_restart_ends_unfinished_work_and_a_retry_after_it_runs_nothing() -> None:
    r, _ = responder()
    took = r.handle(send())
    table = {c.key: c.value for c in took if isinstance(c, PersistRecord)}
    again = Responder(ResponderConfig(TOPICS, "tax"))
    restarted = again.handle(Started(10, "b2", Restored(tasks=table)))
    told = replies(restarted)
    assert [task(m)["status"]["state"] for m in told] == ["TASK_STATE_FAILED"]
    retry = again.handle(send(corr=b"c3"))
    assert not executes(retry)
    assert task(replies(retry)[0])["status"]["state"] == "TASK_STATE_FAILED"


# -- bad input (A2M-RSP-2..4, A2M-RR-2, A2M-ERR-1..2, A2M-CTX-3..4) ---------------------------------
def _error(commands: list[object]) -> dict[str, Any]:
    [body] = replies(commands)
    assert not executes(commands)
    error: dict[str, Any] = body["error"]
    return error


def test_hostile_payloads_are_answered_with_their_json_rpc_error_and_never_run() -> None:
    r, _ = responder()
    assert _error(r.handle(raw(b"\xff\xfe")))["code"] == -32700
    assert _error(r.handle(raw(b"{")))["code"] == -32700
    assert _error(r.handle(raw(b"[]")))["code"] == -32600
    assert _error(r.handle(raw(b"null")))["code"] == -32600
    assert _error(r.handle(raw(b'{"jsonrpc":"2.0","id":"1","method":"Nope","params":{}}')))[
        "code"] == -32601
    assert _error(r.handle(send(task_id="not-a-uuid")))["code"] == -32602
    assert _error(r.handle(send(task_id=str(uuid.UUID(int=9, version=1)))))["code"] == -32602
    mismatch = Props(response_topic=REPLY, correlation_data=b"c1",
                     user_properties=((CONTEXT_ID, "other"),))
    assert _error(r.handle(send(props=mismatch)))["code"] == -32005   # binding metadata


def test_no_correlation_is_a_transport_protocol_error_and_no_reply_path_a_recorded_drop() -> None:
    r, _ = responder()
    no_corr = r.handle(send(props=Props(response_topic=REPLY)))
    error = _error(no_corr)
    assert error["code"] == -32005 and error["data"] == {"a2a_error": "transport_protocol_error"}
    assert publishes(no_corr)[0].props.correlation_data is None
    dropped = r.handle(send(props=Props(correlation_data=b"c1")))
    assert not publishes(dropped) and not executes(dropped)
    assert records(dropped, ev.A2mRequestTaken)[0].intake is ev.Intake.DROPPED


def test_a_context_mismatch_is_refused_and_changes_nothing() -> None:
    r, _ = responder()
    r.handle(send())
    refused = r.handle(send(corr=b"c2", context=str(uuid.UUID(int=3, version=4))))
    assert _error(refused)["code"] == -32602
    assert r.tasks[TASK].context_id == CTX and len(r.tasks[TASK].watchers) == 1


# -- streaming (A2M-STREAM-1, A2M-STREAM-2) --------------------------------------------------------
def test_a_stream_is_items_on_one_correlation_ending_with_the_terminal_status() -> None:
    r, _ = responder()
    took = r.handle(send(method="SendStreamingMessage"))
    assert executes(took)[0].payload["streaming"]
    items = publishes(took)
    items += publishes(r.handle(AgentEmitted(2, TASK, FlowKind.TOKEN, "4")))
    assert not publishes(r.handle(AgentEmitted(2, TASK, FlowKind.THINKING, "hmm")))
    items += publishes(r.handle(AgentEmitted(3, TASK, FlowKind.TOKEN, "2")))
    items += publishes(done(r))
    assert {m.props.correlation_data for m in items} == {b"c1"}
    kinds = [next(iter(json.loads(m.payload)["result"])) for m in items]
    assert kinds == ["statusUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"]
    last = json.loads(items[-1].payload)["result"]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_COMPLETED" and last["taskId"] == TASK
    assert not publishes(r.handle(AgentEmitted(9, TASK, FlowKind.TOKEN, "late")))


# -- cancel, get, multi-turn, pools ----------------------------------------------------------------
def test_cancel_ends_the_work_and_answers_everyone_waiting() -> None:
    r, _ = responder()
    r.handle(send())
    cancel = r.handle(call("CancelTask"))
    states = {m.props.correlation_data: task(json.loads(m.payload))["status"]["state"]
              for m in publishes(cancel)}
    assert states == {b"c1": "TASK_STATE_CANCELED", b"q1": "TASK_STATE_CANCELED"}
    assert _error(r.handle(call("CancelTask", corr=b"q2")))["code"] == -32002
    assert _error(r.handle(call("CancelTask", str(uuid.UUID(int=7, version=4)))))["code"] == -32001
    assert records(done(r), ev.TaskLateResult)        # the work that still came is late


def test_get_task_reports_the_stored_state() -> None:
    r, _ = responder()
    assert _error(r.handle(call("GetTask")))["code"] == -32001
    r.handle(send())
    assert task(replies(r.handle(call("GetTask")))[0])["status"]["state"] == \
        "TASK_STATE_WORKING"


def test_an_interrupted_task_continues_under_the_same_task_id() -> None:
    r, _ = responder()
    r.handle(send())
    asked = done(r, "which year?", asks=True)
    assert task(replies(asked)[0])["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    turn = r.handle(send(corr=b"c2", text="2026"))
    assert [(e.payload["turn"], e.payload["text"]) for e in executes(turn)] == [(2, "2026")]
    assert publishes(done(r))[0].props.correlation_data == b"c2"


def test_the_asking_turns_request_redelivered_is_no_answer_to_the_question() -> None:
    r, _ = responder()
    r.handle(send())
    done(r, "which year?", asks=True)
    again = r.handle(send())               # QoS 1 redelivers the first turn's request
    assert not executes(again)
    assert [task(m)["status"]["state"] for m in replies(again)] == [
        "TASK_STATE_INPUT_REQUIRED"]
    turn = r.handle(send(corr=b"c2", text="2026"))
    assert [e.turn for e in executes(turn)] == [2]


def test_a_request_naming_another_context_is_refused_and_changes_nothing() -> None:
    r, _ = responder()
    r.handle(send())
    refused = replies(r.handle(send(corr=b"c2", context="ctx-other")))
    assert refused[0]["error"]["code"] == -32602
    assert task(replies(done(r))[0])["contextId"] == CTX


def test_a_pooled_request_is_answered_in_the_responders_name() -> None:
    r, _ = responder(pool="p1")
    assert r.handle(ConnectionUp(1, False)) == [Subscribe((
        "$a2a/v1/request/acme/billing/tax",
        "$share/a2a.acme.billing.p1/$a2a/v1/request/acme/billing/pool/p1"), 1)]
    r.handle(send(topic=TOPICS.pool("p1")))
    [msg] = publishes(done(r))
    assert msg.props.user(RESPONDER_AGENT_ID) == "tax"


# -- one execution per turn, whatever the redeliveries, retries and restarts (A2M-DUP-1) -----------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["redeliver", "retry", "finish", "restart", "stream"]),
                max_size=12))
def test_nothing_runs_twice(steps: list[str]) -> None:
    r, _ = responder()
    table: dict[str, Any] = {}
    executed = 0

    def feed(inp: object) -> None:
        nonlocal executed
        out = r.handle(inp)  # type: ignore[arg-type]
        executed += len(executes(out))
        table.update({c.key: c.value for c in out if isinstance(c, PersistRecord)})

    feed(send())
    for i, step in enumerate(steps):
        if step == "redeliver":
            feed(send())
        elif step == "retry":
            feed(send(corr=f"r{i}".encode()))
        elif step == "stream":
            feed(send(corr=f"s{i}".encode(), method="SendStreamingMessage"))
        elif step == "finish":
            feed(TaskFinished(i, TASK, True, "ok"))
        else:
            r = Responder(ResponderConfig(TOPICS, "tax"))
            feed(Started(i, f"b{i}", Restored(tasks=dict(table))))
    assert executed == 1


def test_a_responder_at_its_capacity_refuses_a_new_task_with_responder_unavailable() -> None:
    """A2M-ERR-2: a responder that runs `capacity` tasks at once answers a new one -32004
    responder_unavailable (error.data.a2a_error exactly) and runs nothing of it; a retry of
    a task it has is still answered from its table, and once a task ends a new one runs."""
    r = Responder(ResponderConfig(TOPICS, "tax", {"name": "tax"}, capacity=1))
    r.handle(Started(0, "b1"))
    assert executes(r.handle(send()))
    other = str(uuid.UUID(int=3, version=4))
    error = _error(r.handle(send(other, corr=b"c2")))
    assert error["code"] == -32004 and error["data"]["a2a_error"] == "responder_unavailable"
    assert "result" in replies(r.handle(send(corr=b"c3")))[0]     # its own task: the state
    r.handle(TaskFinished(5, TASK, True, "ok"))
    assert executes(r.handle(send(other, corr=b"c4")))


def test_a_pools_only_member_may_subscribe_the_pool_topic_itself() -> None:
    """Optional Shared Subscription Dispatch 4 (MAY): a member not sharing its pool
    subscribes the pool's own topic — and answers a pooled request naming itself."""
    r = Responder(ResponderConfig(TOPICS, "tax", {"name": "tax"}, pool_id="p1",
                                  pool_shared=False))
    r.handle(Started(0, "b1"))
    [sub] = [c for c in r.handle(ConnectionUp(1)) if isinstance(c, Subscribe)]
    assert TOPICS.pool("p1") in sub.filters and not any(f.startswith("$share/")
                                                        for f in sub.filters)
    r.handle(send(topic=TOPICS.pool("p1")))
    [answer] = [p for p in publishes(r.handle(TaskFinished(5, TASK, True, "ok")))
                if p.topic == REPLY]
    assert answer.props is not None and answer.props.user(RESPONDER_AGENT_ID) == "tax"
