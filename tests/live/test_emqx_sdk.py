"""The EMQX A2A-over-MQTT SDK (`a2a-over-mqtt` 0.1.0, pinned in pyproject.toml) under test:
each finding of docs/findings/emqx-sdk.md shown two ways — the bench's verdict on a run with
the SDK's agent behind its adapter (examples/emqx-sdk), and a second, independent observation
made here with the SDK's own classes and a raw MQTT client on Mosquitto, with no bench code
and no adapter in the path. Each is expected FALSE on this SDK version: a release that fixes
one fails its test, and is noticed."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.checks import Value
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import Options
from bench.substrates.live.brokers import make_broker
from bench.variants import REFERENCE
from tests.live.conftest import MOSQUITTO

sdk = pytest.importorskip("a2a_over_mqtt",
                          reason="the SDK is a test extra: pip install -e '.[test]'")
aiomqtt = pytest.importorskip("aiomqtt")

pytestmark = pytest.mark.skipif(MOSQUITTO is None and not __import__("os").environ.get("CI"),
                                reason="mosquitto not installed (apt-get install mosquitto; "
                                       ".ci/run does)")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "emqx-sdk"
RESPONDER = (sys.executable, str(EXAMPLES / "responder.py"))
REQUESTER = (sys.executable, str(EXAMPLES / "requester.py"))
ORG, UNIT = "acme", "probe"


# -- the bench's verdicts on runs of the SDK's agents --------------------------------------------
def _run(tmp_path: Path, name: str, role: str, command: tuple[str, ...],
         squeezed_s: float | None = None) -> dict[str, Any]:
    """The scenario live with `command` in `role`; `squeezed_s`: shortened (its requests
    time out sooner, so a run whose responder died drains in seconds, not 30)."""
    scenario = load_scenario(SCENARIOS / f"{name}.toml").with_node_command(role, command)
    if squeezed_s is not None:
        scenario = scenario.squeezed(squeezed_s)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    return {v.name: v for v in result.verdicts}


def _rules(v: Any) -> set[str]:
    return {c["rule"] for c in v.counterexamples}


def test_the_sdk_responder_runs_a_task_again_after_a_restart(tmp_path: Path) -> None:
    """A2M-RETRY-3: its Task.id dedup is in memory (a 300 s TTL): a retry that reaches it
    after a restart runs the task a second time, and answers it SUBMITTED after it said
    COMPLETED. (The reference keeps its table on disk: TRUE on the same scenario.)"""
    v = _run(tmp_path, "a2a_lost_reply_restart", "responder", RESPONDER)
    assert v["duplicate_execution"].value is Value.FALSE
    assert v["a2a_replies"].value is Value.FALSE
    assert "ended_tasks_stay_ended" in _rules(v["a2a_replies"])


def test_the_sdk_responder_on_bad_input(tmp_path: Path) -> None:
    """A2M-RSP-3, A2M-RSP-4: non-UTF-8 and empty payloads dropped without a word; a request
    with no jsonrpc, an unknown method, a non-UUID Task.id, or a context User Property that
    differs from the payload run as if they were fine. A2M-SESS-5: clean start, no Session
    Expiry (its session dies with the connection)."""
    v = _run(tmp_path, "a2a_bad_input", "responder", RESPONDER)
    replies = v["a2a_replies"]
    assert replies.value is Value.FALSE
    assert replies.rules["malformed_requests_refused"]["violations"] >= 6
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    executed = {e["taskId"] for e in lines if e["kind"] == "task_executed"}
    ran = {e["how"] for e in lines if e["kind"] == "attack_sent" and e["requestId"] in executed
           and e["how"] not in ("context_switch", "context_opening")}
    assert ran == {"no_jsonrpc", "unknown_method", "bad_task_id", "context_mismatch"}, ran
    assert v["a2a_session"].value is Value.FALSE
    assert _rules(v["a2a_session"]) == {"connects_with_a_persistent_session"}


def test_the_sdk_responder_on_each_property_form(tmp_path: Path) -> None:
    """A2M-CTX-4 and A2M-RSP-3 on a2a_bad_properties (each MQTT 5 property a responder reads,
    in the forms the profile forbids): an a2a-context-id that is empty, or given twice, is
    run (the property is never read: finding 7); a non-UTF-8 payload whose Payload Format
    Indicator says UTF-8 is dropped without a word (finding 4). A Response Topic with a
    wildcard is not run: the SDK's handler fails at its first publish, and it goes on; the
    two valid cases are served."""
    v = _run(tmp_path, "a2a_bad_properties", "responder", RESPONDER)
    replies = v["a2a_replies"]
    assert replies.value is Value.FALSE
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    executed = {e["taskId"] for e in lines if e["kind"] == "task_executed"}
    ran = {e["how"] for e in lines if e["kind"] == "attack_sent" and e["requestId"] in executed}
    assert ran == {"prop:a2a-context-id:empty", "prop:a2a-context-id:twice",
                   "prop:a2a-unknown:present", "prop:a2a-artifact-mode:unknown"}, ran
    whys = [c["why"] for c in replies.counterexamples if c["rule"] == "malformed_requests_refused"]
    assert any("never answered" in w and "(prop:payload_format:not_utf8)" in w for w in whys), whys
    assert replies.rules["unknown_properties_ignored"]["violations"] == 0
    assert replies.rules["unknown_artifact_modes_answered_in_json"]["violations"] == 0


def test_the_sdk_responder_on_malformed_values(tmp_path: Path) -> None:
    """A2M-RSP-3, A2M-RSP-4 on a2a_bad_values (each field a responder reads, given a value of
    its type the rules forbid): it runs a request whose jsonrpc is "1.0", whose method is
    empty (findings 5), whose messageId is empty or role ROLE_ROBOT (finding 13), whose
    Task.id is a UUID of version 1 (finding 6); parts that are no Parts get -32700 (the JSON
    parsed; finding 13)."""
    v = _run(tmp_path, "a2a_bad_values", "responder", RESPONDER)
    assert v["a2a_replies"].value is Value.FALSE
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    executed = {e["taskId"] for e in lines if e["kind"] == "task_executed"}
    ran = {e["how"] for e in lines if e["kind"] == "attack_sent" and e["requestId"] in executed}
    assert ran == {"value:jsonrpc:1.0", "value:method:empty",
                   "value:params.message.messageId:empty",
                   "value:params.message.role:not_a_role",
                   "value:params.message.taskId:uuid1"}, ran
    whys = [c["why"] for c in v["a2a_replies"].counterexamples]
    assert not any("never answered" in w or "died" in w for w in whys), whys


def test_the_sdk_responder_on_fields_of_the_wrong_json_type(tmp_path: Path) -> None:
    """A2M-RSP-3 on a2a_bad_types (each field a responder reads, given each JSON type it
    may not have): it runs requests whose jsonrpc, method, messageId or role is of the
    wrong type as valid ones; it answers a params or a message that is no object with
    -32700 Parse error (the JSON parsed: JSON-RPC 2.0 says -32602 or -32600); and a Task.id
    that is a JSON object ends its message loop (both responders die)."""
    v = _run(tmp_path, "a2a_bad_types", "responder", RESPONDER, squeezed_s=14)
    assert v["a2a_replies"].value is Value.FALSE
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    executed = {e["taskId"] for e in lines if e["kind"] == "task_executed"}
    ran = {e["how"] for e in lines if e["kind"] == "attack_sent" and e["requestId"] in executed}
    assert {"type:jsonrpc:number", "type:method:number", "type:params.message.role:number",
            "type:params.message.messageId:number"} <= ran, sorted(ran)
    died = [e for e in lines if e["kind"] == "node_crashed" and e["faultIndex"] is None]
    assert died, "the responders outlived a Task.id that is an object"
    whys = [c["why"] for c in v["a2a_replies"].counterexamples]
    assert any("with error -32700" in why for why in whys) or \
        v["a2a_replies"].rules["malformed_requests_refused"]["violations"] > 10, whys


def test_the_sdk_responder_dies_of_a_json_array(tmp_path: Path) -> None:
    """A2M-RSP-3: a payload that is JSON but not an object ends its message loop (its
    process exits)."""
    v = _run(tmp_path, "a2a_malformed", "responder", RESPONDER, squeezed_s=6)
    died = [c["why"] for c in v["a2a_replies"].counterexamples if "died after" in c["why"]]
    assert died and all("(array)" in why or "(null)" in why for why in died), died


def test_the_sdk_responder_dies_of_binary_correlation_data(tmp_path: Path) -> None:
    """A2M-RR-3: it decodes Correlation Data as UTF-8; a valid request whose Correlation
    Data is binary (as MQTT 5 defines it) ends its message loop."""
    v = _run(tmp_path, "a2a_binary_correlation", "responder", RESPONDER, squeezed_s=4)
    died = [c["why"] for c in v["a2a_replies"].counterexamples if "died after" in c["why"]]
    assert died and all("(binary_correlation)" in why for why in died), died


def test_the_sdk_responder_answers_get_task_with_an_error(tmp_path: Path) -> None:
    """A2M-BASE-2 (GetTask, an A2A core operation, answers for a task the agent has): the
    SDK has no GetTask — it reads one as a SendMessage without a message and answers -32005, for a task
    it said a second before was SUBMITTED."""
    v = _run(tmp_path, "a2a_multiturn", "responder", RESPONDER, squeezed_s=14)
    assert v["a2a_replies"].value is Value.FALSE
    assert "known_tasks_stay_known" in _rules(v["a2a_replies"])
    assert all("GetTask" in c["why"] and "error -32005" in c["why"]
               for c in v["a2a_replies"].counterexamples if c["rule"] == "known_tasks_stay_known")


def test_the_sdk_requester_sends_again_after_the_reply_came(tmp_path: Path) -> None:
    """A2M-RETRY-4: a reply that arrives while it waits out a backoff does not stop the
    retry; the request is published again (the responder here keeps its dedup on disk: no
    harm done, but a responder whose dedup is the SDK's would run the task twice). The
    scenario's 14–16.2 s tasks place about 45 % of the replies in its 1 s backoff (19 judged,
    10 more forgiven as crossing the reply, of 62 on 2026-12-05): a2a_restart placed one
    there, or none when the restart was slow. Under ten workers on two cores more of them
    cross the reply (4 judged, 17 forgiven, in CI on 2026-12-06): two judged suffice."""
    v = _run(tmp_path, "a2a_reply_in_backoff", "requester", REQUESTER)
    assert v["a2a_requests"].value is Value.FALSE
    assert v["a2a_requests"].rules["no_request_again_after_a_reply"]["violations"] >= 2
    assert _rules(v["a2a_requests"]) == {"no_request_again_after_a_reply"}
    assert v["a2a_session"].value is Value.FALSE


# -- the same, seen without the bench: the SDK's classes and a raw client ------------------------
@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = make_broker("mosquitto", tmp_path)
    b.start()
    yield b
    b.stop()


class Probe(sdk.Responder):   # type: ignore[misc]
    """The SDK's Responder with an agent that answers at once and counts its calls."""

    calls: list[str]

    async def on_request(self, request: Any, stream: Any) -> str:
        self.calls.append(request.task_id)
        return "ok"


def _probe(broker: Any, agent: str = "probe") -> Probe:
    p = Probe(agent_id=agent, mqtt=sdk.MqttConfig(host=broker.host, port=broker.port),
              topics=sdk.TopicSpace(org=ORG, unit=UNIT), card={"name": agent})
    p.calls = []
    return p


@asynccontextmanager
async def _running(p: Probe) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(p.run())
    await asyncio.sleep(1.0)          # connected, subscribed, card out (a local broker)
    try:
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _request(task_id: str, *, method: str = "SendMessage", jsonrpc: bool = True,
             context: str | None = None) -> bytes:
    message: dict[str, Any] = {"messageId": "m", "role": "ROLE_USER", "taskId": task_id,
                               "parts": [{"text": "hi"}]}
    if context:
        message["contextId"] = context
    body: dict[str, Any] = {"id": "1", "method": method, "params": {"message": message}}
    if jsonrpc:
        body["jsonrpc"] = "2.0"
    return json.dumps(body).encode()


async def _ask(broker: Any, payload: bytes, correlation: bytes, *, agent: str = "probe",
               user: list[tuple[str, str]] | None = None, wait_s: float = 1.5) -> list[Any]:
    """Publish one request with a raw client; what came back on its reply topic."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    reply = f"$a2a/v1/reply/{ORG}/{UNIT}/raw/{uuid.uuid4().hex[:8]}"
    props = Properties(PacketTypes.PUBLISH)
    props.ResponseTopic, props.CorrelationData = reply, correlation
    if user:
        props.UserProperty = user
    got: list[Any] = []
    async with aiomqtt.Client(broker.host, broker.port,
                              protocol=aiomqtt.ProtocolVersion.V5) as raw:
        await raw.subscribe(reply, qos=1)
        await raw.publish(f"$a2a/v1/request/{ORG}/{UNIT}/{agent}", payload, qos=1,
                          properties=props)
        try:
            async with asyncio.timeout(wait_s):
                async for m in raw.messages:
                    got.append(json.loads(m.payload) if m.payload else None)
        except TimeoutError:
            pass
    return got


def _codes(got: list[Any]) -> list[Any]:
    return [g.get("error", {}).get("code") if isinstance(g, dict) and "error" in g else "reply"
            for g in got]


#: each case: its payload, its Correlation Data, and the finding as seen (the agent's calls,
#: whether the SDK's `run()` was still going, what came back)
RAW_CASES: dict[str, tuple[bytes, bytes, Callable[[Probe, bool, list[Any]], bool]]] = {
    # finding: the profile asks for an error on the reply path (A2M-RSP-3); none comes
    "not UTF-8": (b'{"jsonrpc":"2.0","id":"\xff\xfe"}', b"c1",
                  lambda p, alive, got: got == [] and alive),
    "empty": (b"", b"c1", lambda p, alive, got: got == [] and alive),
    # finding: its message loop raises; the responder is gone
    "a JSON array": (b'[{"jsonrpc": "2.0"}]', b"c1", lambda p, alive, got: not alive),
    "null": (b"null", b"c1", lambda p, alive, got: not alive),
    # finding: a valid request (MQTT 5 Correlation Data is binary) ends its message loop
    "binary Correlation Data": (_request(str(uuid.uuid4())), b"\xff\xfe01",
                                lambda p, alive, got: not alive and not got),
    # finding: run as if valid (A2M-RSP-4; JSON-RPC 2.0 -32600, -32601)
    "a non-UUID Task.id": (_request("task-1"), b"c1", lambda p, alive, got: p.calls == ["task-1"]),
    "no jsonrpc": (_request(str(uuid.uuid4()), jsonrpc=False), b"c1",
                   lambda p, alive, got: len(p.calls) == 1),
    "an unknown method": (_request(str(uuid.uuid4()), method="DeleteEverything"), b"c1",
                          lambda p, alive, got: len(p.calls) == 1),
    # finding (a2a_bad_types): fields of the wrong JSON type — a role that is a number runs;
    # a message that is a string gets -32700 (the JSON parsed); a Task.id that is an object
    # ends its message loop (`TypeError: unhashable type: 'dict'`)
    "a role that is a number": (_request(str(uuid.uuid4())).replace(b'"ROLE_USER"', b"7"),
                                b"c1", lambda p, alive, got: len(p.calls) == 1),
    "a message that is a string": (json.dumps({"jsonrpc": "2.0", "id": "1",
                                               "method": "SendMessage",
                                               "params": {"message": "hi"}}).encode(), b"c1",
                                   lambda p, alive, got: _codes(got) == [-32700]),
    # finding (a2a_bad_values): values of the right type the rules forbid — a role that is
    # no Role, a Task.id that is a UUID of version 1 — run
    "a role that is no Role": (_request(str(uuid.uuid4())).replace(b'"ROLE_USER"',
                                                                  b'"ROLE_ROBOT"'),
                               b"c1", lambda p, alive, got: len(p.calls) == 1),
    "a Task.id that is a UUID of version 1": (_request(str(uuid.uuid1())), b"c1",
                                              lambda p, alive, got: len(p.calls) == 1),
    # (an empty one, falsy, is refused -32005: the SDK tests `not task_id` first)
    "a Task.id that is an object": (_request("x").replace(b'"taskId": "x"',
                                                          b'"taskId": {"x": 1}'),
                                    b"c1", lambda p, alive, got: not alive and not got),
}


@pytest.mark.parametrize("case", sorted(RAW_CASES))
def test_a_raw_client_sees_the_sdk_responder_take_bad_input(broker: Any, case: str) -> None:
    payload, correlation, finding = RAW_CASES[case]

    async def go() -> tuple[Probe, bool, list[Any]]:
        p = _probe(broker)
        async with _running(p) as task:
            got = await _ask(broker, payload, correlation)
            await asyncio.sleep(0.2)
            return p, not task.done(), got
    p, alive, got = asyncio.run(go())
    assert finding(p, alive, got), (case, _codes(got), p.calls, alive)


@pytest.mark.parametrize("user", [[("a2a-context-id", "ctx-other")],
                                  [("a2a-context-id", "")],
                                  [("a2a-context-id", "ctx-other"), ("a2a-context-id", "ctx-a")]],
                         ids=["differs", "empty", "twice"])
def test_a_raw_client_sees_the_sdk_responder_run_a_request_whose_context_property_differs(
        broker: Any, user: list[tuple[str, str]]) -> None:
    """A2M-CTX-4 (finding 7): a request whose User Property a2a-context-id is not its
    payload's contextId — another value, an empty one, or the payload's value after another
    — is run and answered as if it were fine (the SDK reads no such property)."""
    task_id = str(uuid.uuid4())

    async def go() -> tuple[list[Any], list[str]]:
        p = _probe(broker)
        async with _running(p):
            got = await _ask(broker, _request(task_id, context="ctx-a"), b"c1", user=user)
        return got, p.calls
    got, calls = asyncio.run(go())
    assert calls == [task_id] and "reply" in _codes(got) and -32602 not in _codes(got), \
        (_codes(got), calls)


def test_a_raw_client_sees_a_task_run_again_after_the_sdk_responder_restarts(
        broker: Any) -> None:
    """The same Task.id under new Correlation Data: answered from memory while the
    process lives, run again once it was restarted (A2M-RETRY-3)."""
    task_id = str(uuid.uuid4())

    async def go() -> tuple[list[str], list[str]]:
        first = _probe(broker)
        async with _running(first):
            await _ask(broker, _request(task_id), b"c1")
            await _ask(broker, _request(task_id), b"c2")      # a retry: not run again
        second = _probe(broker)                              # the process restarted
        async with _running(second):
            await _ask(broker, _request(task_id), b"c3")
        return first.calls, second.calls
    first, second = asyncio.run(go())
    assert first == [task_id] and second == [task_id]


def test_a_raw_client_sees_the_sdk_responder_deny_a_task_it_has(broker: Any) -> None:
    """A2M-BASE-2: a SendMessage answered (its task SUBMITTED, then COMPLETED), then a
    GetTask for that Task.id: the SDK answers it with error -32005, and calls its agent
    for nothing."""
    task_id = str(uuid.uuid4())
    get = json.dumps({"jsonrpc": "2.0", "id": "2", "method": "GetTask",
                      "params": {"id": task_id}}).encode()

    async def go() -> tuple[list[Any], list[Any], list[str]]:
        p = _probe(broker)
        async with _running(p):
            sent = await _ask(broker, _request(task_id), b"c1")
            asked = await _ask(broker, get, b"c2")
        return sent, asked, p.calls
    sent, asked, calls = asyncio.run(go())
    assert sent and "reply" in _codes(sent) and calls == [task_id], (_codes(sent), calls)
    assert _codes(asked) == [-32005], asked


def test_a_request_published_while_the_sdk_responder_was_away_is_lost(broker: Any) -> None:
    """A2M-SESS-5: the SDK connects with clean start and no Session Expiry Interval, so the
    broker keeps nothing for it while it is away: a QoS1 request published then never
    reaches it when it is back."""
    task_id = str(uuid.uuid4())

    async def go() -> list[str]:
        p = _probe(broker)
        async with _running(p):
            pass                                             # it was here once
        await _ask(broker, _request(task_id), b"c1", wait_s=0.3)    # while it is away
        back = _probe(broker)
        async with _running(back):
            await asyncio.sleep(1.0)
        return back.calls
    assert asyncio.run(go()) == []


async def _answer_completed(raw: Any, m: Any, user: list[tuple[str, str]] | None = None,
                            state: str = "TASK_STATE_COMPLETED") -> None:
    """A raw responder's status update to request `m`: its task COMPLETED (or `state`), on
    its Response Topic with its Correlation Data (and these User Properties)."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    props = Properties(PacketTypes.PUBLISH)
    props.CorrelationData = m.properties.CorrelationData
    if user:
        props.UserProperty = user
    done = {"jsonrpc": "2.0", "id": "1", "result": {"statusUpdate": {
        "taskId": "t", "contextId": "", "status": {"state": state}}}}
    await raw.publish(m.properties.ResponseTopic, json.dumps(done), qos=1, properties=props)


async def _sdk_asks(broker: Any, target: str = "probe", after_s: float = 0.0,
                    **settings: float) -> list[str]:
    """The SDK's Requester (with these settings of its own) asks `target` once, as its
    README's client does: the kinds `stream()` yields, then `after_s` more of watching."""
    r = sdk.Requester(sdk.MqttConfig(host=broker.host, port=broker.port),
                      sdk.TopicSpace(org=ORG, unit=UNIT), **settings)
    payload = sdk.A2ARequest(text="hi", request_id="1").to_json()
    kinds = [kind async for kind, _ in r.stream(target, payload, uuid.uuid4().hex)]
    await asyncio.sleep(after_s)
    return kinds


@asynccontextmanager
async def _raw_responder(broker: Any, answer: Callable[[Any, Any], Any],
                         target: str = "probe") -> AsyncIterator[None]:
    """A raw MQTT 5 client on the request topic of `target` (the probe agent, or
    `pool/{id}`), each request handed to `answer(client, message)`: running, subscribed,
    for the body of the `async with`."""
    ready = asyncio.Event()

    async def serve() -> None:
        async with aiomqtt.Client(broker.host, broker.port,
                                  protocol=aiomqtt.ProtocolVersion.V5) as raw:
            await raw.subscribe(f"$a2a/v1/request/{ORG}/{UNIT}/{target}", qos=1)
            ready.set()
            async for m in raw.messages:
                await answer(raw, m)
    task = asyncio.create_task(serve())
    await ready.wait()
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_a_raw_responder_sees_the_sdk_requester_send_again_after_its_reply(
        broker: Any) -> None:
    """A2M-RETRY-4: the reply to the first attempt arrives during the backoff; the SDK
    publishes the second attempt anyway (then takes the reply)."""
    attempts: list[bytes] = []

    async def answer(raw: Any, m: Any) -> None:
        attempts.append(m.properties.CorrelationData)
        if len(attempts) == 1:
            await asyncio.sleep(0.7)      # past the 0.5 s wait: in the 1 s backoff
            await _answer_completed(raw, m)

    async def go() -> list[str]:
        async with _raw_responder(broker, answer):
            return await _sdk_asks(broker, after_s=0.3, first_reply_timeout=0.5)
    kinds = asyncio.run(go())
    assert kinds[-1] == "terminal"
    assert len(attempts) == 2 and attempts[0] != attempts[1]


def test_the_sdk_requester_sends_follow_ups_to_the_card_owner_after_a_handover(
        tmp_path: Path) -> None:
    """A2M-HAND-2: a reply names the delegate the card owner handed the task to; the
    SDK's requester sends the task's GetTask and CancelTask to the card owner again."""
    v = _run(tmp_path, "a2a_handover", "requester", REQUESTER, squeezed_s=25)
    assert v["a2a_requests"].value is Value.FALSE
    assert "follow_ups_go_to_the_named_agent" in _rules(v["a2a_requests"])
    assert v["a2a_handover"].value is Value.TRUE   # the reference responders did their part


def test_the_sdk_requester_gives_its_caller_no_named_agent(broker: Any) -> None:
    """A2M-HAND-2, seen without the bench: a raw responder answers with
    a2a-responder-agent-id naming another agent; nothing `stream()` yields, and nothing
    the Requester keeps, holds that name — a caller cannot follow the handover."""
    named = "probe-delegate-7f3a"

    async def answer(raw: Any, m: Any) -> None:
        await _answer_completed(raw, m, [("a2a-responder-agent-id", named)])

    async def go() -> tuple[list[Any], Any]:
        async with _raw_responder(broker, answer):
            r = sdk.Requester(sdk.MqttConfig(host=broker.host, port=broker.port),
                              sdk.TopicSpace(org=ORG, unit=UNIT))
            payload = sdk.A2ARequest(text="hi", request_id="1").to_json()
            got = [item async for item in r.stream("probe", payload, uuid.uuid4().hex)]
        return got, r
    got, requester = asyncio.run(go())
    assert got and got[-1][0] == "terminal"
    assert named not in repr(got)
    assert named not in repr(vars(requester))


def test_the_sdk_requester_takes_a_pooled_reply_that_names_no_responder(broker: Any) -> None:
    """A2M-REQ-3, seen without the bench: a raw member of pool p9 (subscribed to the pool's
    topic) answers without a2a-responder-agent-id; `stream("pool/p9", ...)` yields the
    reply as the task's end and asks nothing again — the protocol error is its answer."""
    asked: list[bytes] = []

    async def answer(raw: Any, m: Any) -> None:
        asked.append(m.properties.CorrelationData)
        await _answer_completed(raw, m)

    async def go() -> list[str]:
        async with _raw_responder(broker, answer, "pool/p9"):
            # watched past its first-reply wait: no second attempt
            return await _sdk_asks(broker, "pool/p9", after_s=2.5, first_reply_timeout=2.0)
    assert asyncio.run(go()) == ["terminal"]
    assert len(asked) == 1


def test_the_sdk_requester_ends_a_stalled_stream_without_get_task(broker: Any) -> None:
    """A2M-RETRY-7 (SHOULD), seen without the bench: a raw responder sends one WORKING
    status and then nothing; past the stream idle wait (1 s here, the SDK's own setting)
    the SDK yields a timeout and publishes nothing more — no GetTask on the task."""
    got: list[dict[str, Any]] = []

    async def answer(raw: Any, m: Any) -> None:
        got.append(json.loads(m.payload))
        if len(got) == 1:
            await _answer_completed(raw, m, state="TASK_STATE_WORKING")

    async def go() -> list[str]:
        async with _raw_responder(broker, answer):
            return await _sdk_asks(broker, after_s=1.5, stream_idle_timeout=1.0)
    assert asyncio.run(go())[-1] == "timeout"
    assert [g.get("method") for g in got] == [got[0].get("method")]   # the request, alone
