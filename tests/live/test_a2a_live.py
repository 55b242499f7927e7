"""The A2A-over-MQTT profile live on Mosquitto: MQTT 5 properties cross a real broker both
ways (Response Topic, Correlation Data, User Properties, a will's properties and delay);
the reference agents keep every rule across a real process kill, a seeded defect of them is
caught as in simulation, and Mosquitto's refusal of `$share` on `$a2a/…` is seen a second
way, on the wire tap's PUBACKs."""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.checks import Value, checkers
from bench.core.properties import Props
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.spec.topology import MqttVersion
from bench.substrates import Hosting, Options
from bench.substrates.live.brokers import make_broker
from bench.substrates.live.mqtt import Delivery, MqttLink
from bench.variants import REFERENCE, VARIANTS
from tests.helpers import from_lines
from tests.live.conftest import MOSQUITTO, compressed, loop_until

pytestmark = pytest.mark.skipif(MOSQUITTO is None and not __import__("os").environ.get("CI"),
                                reason="mosquitto not installed (apt-get install mosquitto; "
                                       ".ci/run does)")

PROPS = Props(response_topic="$a2a/v1/reply/acme/u/a/r1", correlation_data=b"\x00\x01corr",
              user_properties=(("a2a-status", "online"), ("k", "1"), ("k", "2")),
              content_type="application/json", message_expiry_s=600)


def test_v5_properties_and_a_wills_cross_mosquitto_unchanged(tmp_path: Path) -> None:
    """What one link publishes with properties another receives with the same properties
    (User Properties in order, repeats kept); a will's properties reach a subscriber once
    its holder's connection is cut and its Will Delay Interval has passed."""
    broker = make_broker("mosquitto", tmp_path)
    broker.start()
    loop = asyncio.new_event_loop()
    got: list[Delivery] = []
    up: dict[str, bool] = {}

    def link(client_id: str) -> MqttLink:
        return MqttLink(loop, broker.host, broker.port, client_id,
                        on_message=got.append, on_connected=lambda _p: up.update({client_id: True}),
                        on_disconnected=lambda _r: None, on_published=lambda _m, _rc: None,
                        version=MqttVersion.V5)

    until = functools.partial(loop_until, loop)
    try:
        sub, pub, dies = link("sub"), link("pub"), link("dies")
        sub.connect()
        pub.connect()
        dies.connect("w/dies", b"gone", will_retain=False,
                     will_props=Props(user_properties=(("a2a-status", "offline"),)),
                     will_delay_s=1)
        until("three CONNACKs", lambda: len(up) == 3)
        sub.subscribe(("t/#", "w/#"), 1)
        loop.run_until_complete(asyncio.sleep(0.5))     # the SUBACK (no callback asked for)
        pub.publish("t/1", b"{}", 1, False, PROPS)
        pub.publish("t/2", b"bare", 1, False)
        until("both messages", lambda: len(got) >= 2)
        by_topic = {d.topic: d for d in got}
        assert by_topic["t/1"].props == PROPS
        assert by_topic["t/2"].props is None
        cut = time.monotonic()
        dies.kill()
        until("the will", lambda: any(d.topic == "w/dies" for d in got))
        will = next(d for d in got if d.topic == "w/dies")
        assert will.payload == b"gone"
        assert will.props == Props(user_properties=(("a2a-status", "offline"),))
        assert time.monotonic() - cut >= 0.9       # held for its delay, not published at once
        for each in (sub, pub):
            each.close()
    finally:
        loop.close()
        broker.stop()


def _verdicts(result: Any) -> dict[str, Value]:
    return {v.name: v.value for v in result.verdicts}


@pytest.mark.parametrize("variant", ["reference", "a2m_dedup_in_memory"])
def test_a_responder_killed_mid_task_keeps_every_rule_live_and_its_defect_is_caught(
        tmp_path: Path, variant: str) -> None:
    """a2a_restart as shipped (a 20 s kill, so the requester's 15 s first-reply wait runs out
    and it retries under the same Task.id), node processes SIGKILLed. The reference keeps
    every rule; with Task.id dedup in memory only, a retry runs a task a second time."""
    result = run_scenario(load_scenario(SCENARIOS / "a2a_restart.toml"), VARIANTS[variant],
                          tmp_path, mode="live",
                          options=Options(broker="mosquitto", hosting=Hosting.PROCESS))
    verdicts = _verdicts(result)
    if variant == "reference":
        assert verdicts == {"duplicate_execution": Value.TRUE, "a2a_requests": Value.TRUE,
                            "a2a_replies": Value.TRUE, "a2a_pools": Value.UNKNOWN,
                            "a2a_broker": Value.TRUE, "a2a_session": Value.UNKNOWN,
                            "a2a_oauth": Value.UNKNOWN, "a2a_handover": Value.UNKNOWN,
                            "a2a_robustness": Value.TRUE}, \
            [(v.name, v.counterexamples[:2], v.note) for v in result.verdicts]
    else:
        assert verdicts["duplicate_execution"] is Value.FALSE
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    assert any(e["kind"] == "node_crashed" and e["node"] == "tax-1" for e in events)
    retries = [e for e in events if e["kind"] == "a2m_attempt" and e["attempt"] > 1]
    assert retries, "the kill outlasted no first-reply wait: nothing was retried"


def test_mosquittos_pool_refusal_is_seen_by_the_verdict_and_on_the_wire(tmp_path: Path) -> None:
    """Mosquitto 2.0.11 answers a publish to $a2a/v1/request/…/pool/p1 with PUBACK 0x10 (no
    matching subscribers) though two responders subscribed $share/…/pool/p1: a2a_broker says
    so from the nodes' records, and the wire tap in front of the requester reads the same
    reason code in the broker's own packets."""
    scenario = compressed("a2a_pool", 3)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto", wire_tap=True))
    pools = next(v for v in result.verdicts if v.name == "a2a_broker")
    assert pools.value is Value.FALSE
    assert pools.rules["pooled_requests_reach_the_pool"]["violations"] > 0
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    sent = {e["packetId"] for e in events if e["kind"] == "wire" and e["node"] == "client-1"
            and e["packet"] == "PUBLISH" and e["direction"] == "out"
            and e["topic"] == "$a2a/v1/request/acme/billing/pool/p1"}
    refused = [e for e in events if e["kind"] == "wire" and e["node"] == "client-1"
               and e["packet"] == "PUBACK" and e["direction"] == "in" and e["packetId"] in sent]
    assert sent and refused and all(e["reasonCodes"] == [0x10] for e in refused)
    assert not any(e["kind"] == "task_executed" for e in events)


def test_properties_stripped_and_altered_by_the_proxy_are_journaled_and_on_the_wire(
        tmp_path: Path) -> None:
    """a2a_tampered live: the fault proxy strips or alters Correlation Data on the way to
    Mosquitto (the packet re-encoded by the mqtt5 codec), each fault journals how many it
    acted on, the tap shows the packets as they crossed, and the agents keep every rule
    (a refused request runs nothing, an uncorrelated reply settles nothing)."""
    result = run_scenario(load_scenario(SCENARIOS / "a2a_tampered.toml"), REFERENCE, tmp_path,
                          mode="live", options=Options(broker="mosquitto", wire_tap=True))
    verdicts = _verdicts(result)
    assert {verdicts[n] for n in ("duplicate_execution", "a2a_requests", "a2a_replies")} == \
        {Value.TRUE}, [(v.name, v.counterexamples[:2]) for v in result.verdicts]
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    fired = {e["faultIndex"]: e["count"] for e in events if e["kind"] == "fault_fired"}
    assert fired.keys() == {0, 1, 2} and all(fired.values())
    crossed = [e.get("properties") or {} for e in events if e["kind"] == "wire"
               and e["node"] == "client-1" and e["packet"] == "PUBLISH"
               and e["direction"] == "out"]
    mark = b"|tampered".hex()
    assert sum("correlationData" not in p for p in crossed) == fired[0]
    assert sum(p.get("correlationData", "").endswith(mark) for p in crossed) == fired[1]
    refused = [e for e in events if e["kind"] == "a2m_request_taken" and e["intake"] == "REFUSED"]
    assert len(refused) == fired[0]


EXAMPLE = (sys.executable, str(Path(__file__).resolve().parents[2] / "examples" / "a2a-responder"
                                / "responder.py"))


@pytest.mark.parametrize("bug", [(), ("--bug", "memory-dedup")], ids=["as-written", "memory-dedup"])
def test_a_responder_written_elsewhere_is_judged_through_the_contract(
        tmp_path: Path, bug: tuple[str, ...]) -> None:
    """examples/a2a-responder (paho, nothing of the bench) as both responders of a2a_restart:
    started by the bench as node processes, SIGKILLed, judged from its wire tap and its
    task_executed lines (docs/profiles/own-agent.md). As written every rule holds; with its
    Task.id table in memory only, the retries after the restart run tasks a second time. And
    on its real history, a reply the tap saw leave with Correlation Data no request had is
    FALSE: the wire, not the agent, is what the rule reads."""
    scenario = load_scenario(SCENARIOS / "a2a_restart.toml").with_node_command(
        "responder", (*EXAMPLE, *bug))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    verdicts = _verdicts(result)
    assert verdicts["a2a_requests"] is Value.TRUE and verdicts["a2a_replies"] is Value.TRUE
    assert verdicts["duplicate_execution"] is (Value.FALSE if bug else Value.TRUE), \
        [(v.name, v.counterexamples[:2], v.note) for v in result.verdicts]
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    assert not any(e["kind"] == "a2m_request_taken" for e in lines)   # nothing of its own
    out = next(e for e in lines if e["kind"] == "wire" and e["node"] == "tax-1"
               and e["packet"] == "PUBLISH" and e["direction"] == "out"
               and e["topic"].startswith("$a2a/v1/reply/"))
    out["properties"]["correlationData"] = "00"
    mutated = checkers()["a2a_replies"](from_lines(lines))
    assert mutated.value is Value.FALSE
    assert "no request it took in had that reply path" in mutated.counterexamples[0]["why"]


@pytest.fixture(scope="module")
def agent_tapped(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """a2a_quickstart with examples/a2a-responder as both responders: judged from its wire."""
    out = tmp_path_factory.mktemp("agent_tapped")
    scenario = compressed("a2a_quickstart", 5).with_node_command("responder", EXAMPLE)
    result = run_scenario(scenario, REFERENCE, out, mode="live",
                          options=Options(broker="mosquitto"))
    verdicts = _verdicts(result)
    assert verdicts["a2a_session"] is Value.TRUE and verdicts["a2a_replies"] is Value.TRUE, \
        [(v.name, v.counterexamples[:2]) for v in result.verdicts]
    return [json.loads(line) for line in (out / "history.jsonl").open()]


def _of(lines: list[dict[str, Any]], node: str, packet: str, direction: str,
        prefix: str = "") -> list[dict[str, Any]]:
    return [e for e in lines if e["kind"] == "wire" and e["node"] == node
            and e["packet"] == packet and e["direction"] == direction
            and (e.get("topic") or "").startswith(prefix)]


def _clean_start(lines: list[dict[str, Any]]) -> None:
    _of(lines, "tax-1", "CONNECT", "out")[0]["cleanSession"] = True


def _mqtt311(lines: list[dict[str, Any]]) -> None:
    _of(lines, "tax-1", "CONNECT", "out")[0]["mqtt"] = None


def _bare_client_id(lines: list[dict[str, Any]]) -> None:
    _of(lines, "tax-1", "CONNECT", "out")[0]["clientId"] = "tax-1"


def _pool_only(lines: list[dict[str, Any]]) -> None:
    for e in _of(lines, "tax-1", "SUBSCRIBE", "out"):
        e["filters"] = ["$share/g/$a2a/v1/request/acme/billing/pool/p1"]


def _no_card(lines: list[dict[str, Any]]) -> None:
    cards = _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/discovery/")
    lines[:] = [e for e in lines if e not in cards]


def _card_of_another(lines: list[dict[str, Any]]) -> None:
    """Its card, retained and online, on another agent's discovery topic (A2M-TOPIC-1)."""
    for e in _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/discovery/"):
        e["topic"] = "$a2a/v1/discovery/acme/billing/billing.tax9"


def _pool_id_out_of_alphabet(lines: list[dict[str, Any]]) -> None:
    """A pool joined under a group id with a space in it (A2M-ID-1)."""
    for e in _of(lines, "tax-1", "SUBSCRIBE", "out"):
        e["filters"] = [*e["filters"], "$share/my group/$a2a/v1/request/acme/billing/pool/p1"]


def _own_task_id(lines: list[dict[str, Any]]) -> None:
    _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/reply/")[0]["taskId"] = "made-up"


def _answered_twice(lines: list[dict[str, Any]]) -> None:
    """A final reply sent again on the same correlation, with nothing asked again."""
    again = dict(_of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/reply/")[0])
    lines.insert(len(lines) - 1, {**again, "tMs": lines[-1]["tMs"]})


def _stays_online(lines: list[dict[str, Any]]) -> None:
    """It disconnects without its offline card."""
    offline = [e for e in _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/discovery/")
               if ["a2a-status", "offline"] in e["properties"]["userProperties"]]
    assert offline
    lines[:] = [e for e in lines if e not in offline]


def _echoes_a_token(lines: list[dict[str, Any]]) -> None:
    """A reply carries the token (its fingerprint, as the tap records every token) of a
    request that reached the responder."""
    reply = _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/reply/")[0]
    reply["tokens"] = ["0123456789abcdef"]
    first = _of(lines, "tax-1", "PUBLISH", "in", "$a2a/v1/request/")[0]
    first["tokens"] = ["0123456789abcdef"]
    for connect in _of(lines, "tax-1", "CONNECT", "out"):
        connect["tls"] = True     # where tokens travel, a connection comes by TLS


def _tokens_in_the_clear(lines: list[dict[str, Any]]) -> None:
    """A request reached the responder with a token, on a connection that came by plain
    TCP (the run offered no TLS: its CONNECTs say so)."""
    _of(lines, "tax-1", "PUBLISH", "in", "$a2a/v1/request/")[0]["tokens"] = ["0123456789abcdef"]


def _context_of_its_own(lines: list[dict[str, Any]]) -> None:
    reply = next(e for e in _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/reply/")
                 if e.get("conversationId"))
    reply["conversationId"] = "ctx-made-up"


def _final_answer_never_sent(lines: list[dict[str, Any]]) -> None:
    """The first task tax-1's agent answered: the agent's answer came, and nothing of it
    left tax-1 on its reply path (a responder that lets a finished task lie)."""
    task = next(e["taskId"] for e in lines
                if e["kind"] == "agent_answered" and e["node"] == "tax-1")
    replies = [e for e in _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/reply/")
               if e.get("taskId") == task]
    assert replies
    lines[:] = [e for e in lines if e not in replies]


def _bare_property(lines: list[dict[str, Any]]) -> None:
    """A reply names its responder in `responder-agent-id`, the prefix left off (A2M-PROP-1)."""
    reply = _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/reply/")[0]
    users = reply["properties"].setdefault("userProperties", [])
    users.append(["responder-agent-id", "billing.tax1"])


def _topic_out_of_shape(lines: list[dict[str, Any]]) -> None:
    """It also subscribes `$a2a/v1/requests/...`, a method the binding has not (A2M-TOPIC-2)."""
    subscribe = _of(lines, "tax-1", "SUBSCRIBE", "out")[0]
    subscribe["filters"] = [*subscribe["filters"], "$a2a/v1/requests/acme/billing/billing.tax1"]


#: the profile's wire rules, each shown FALSE on the real history mutated as a bug would
A2A_WIRE_MUTATIONS: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str, str]] = {
    "clean start": (_clean_start, "a2a_session", "connects_with_a_persistent_session"),
    "MQTT 3.1.1": (_mqtt311, "a2a_session", "connects_with_mqtt5"),
    "a bare client id": (_bare_client_id, "a2a_session", "connects_as_org_unit_agent"),
    "only in a pool": (_pool_only, "a2a_session", "subscribes_its_request_topic"),
    "no card": (_no_card, "a2a_session", "announces_its_card_with_a_will"),
    "a card of another": (_card_of_another, "a2a_session", "announces_its_card_with_a_will"),
    "a pool id out of the alphabet": (_pool_id_out_of_alphabet, "a2a_session",
                                      "connects_as_org_unit_agent"),
    "a Task.id of its own": (_own_task_id, "a2a_replies", "replies_echo_the_task_id"),
    "answered twice": (_answered_twice, "a2a_replies", "nothing_after_the_final_answer"),
    "stays online": (_stays_online, "a2a_session", "leaves_offline"),
    "a context of its own": (_context_of_its_own, "a2a_replies", "contexts_are_kept"),
    "a final answer never sent": (_final_answer_never_sent, "a2a_replies",
                                  "every_request_answered"),
    "a binding property without its prefix": (_bare_property, "a2a_session",
                                              "binding_properties_carry_the_prefix"),
    "a topic out of shape": (_topic_out_of_shape, "a2a_session",
                             "interaction_topics_keep_the_shape"),
    "echoes a token": (_echoes_a_token, "a2a_session", "tokens_never_echoed"),
    "tokens in the clear": (_tokens_in_the_clear, "a2a_session", "tokens_travel_over_tls"),
}


@pytest.mark.parametrize("mutation", sorted(A2A_WIRE_MUTATIONS))
def test_each_profile_wire_rule_fails_on_a_real_history_mutated_as_a_bug_would(
        agent_tapped: list[dict[str, Any]], mutation: str) -> None:
    mutate, checker, rule = A2A_WIRE_MUTATIONS[mutation]
    lines = [json.loads(json.dumps(e)) for e in agent_tapped]   # nested dicts too
    mutate(lines)
    v = checkers()[checker](from_lines([{**e, "seq": i + 1} for i, e in enumerate(lines)]))
    assert v.value is Value.FALSE, (mutation, v.counts)
    assert {c["rule"] for c in v.counterexamples} == {rule}, v.counterexamples


@pytest.mark.parametrize(("bugs", "rule"), [
    (("--bug", "clean-start"), "connects_with_a_persistent_session"),
    (("--bug", "no-card"), "announces_its_card_with_a_will"),
    (("--bug", "stays-online"), "leaves_offline"),
])
def test_a_bug_written_into_the_agent_shows_on_its_wire(
        tmp_path: Path, bugs: tuple[str, ...], rule: str) -> None:
    scenario = compressed("a2a_quickstart", 4).with_node_command("responder", (*EXAMPLE, *bugs))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    [v] = [v for v in result.verdicts if v.name == "a2a_session"]
    assert v.value is Value.FALSE and {c["rule"] for c in v.counterexamples} == {rule}


@pytest.mark.parametrize("bug", [(), ("--bug", "any-task-id")], ids=["as-written", "any-task-id"])
def test_malformed_requests_to_a_responder_written_elsewhere(
        tmp_path: Path, bug: tuple[str, ...]) -> None:
    """a2a_malformed against examples/a2a-responder: as written it answers every case with
    the error the profile names (judged off its wire: the error codes the tap read); taking
    any string as a Task.id, it answers a non-UUID one with a result instead of -32602."""
    scenario = compressed("a2a_malformed", 6).with_node_command("responder", (*EXAMPLE, *bug))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    [v] = [v for v in result.verdicts if v.name == "a2a_replies"]
    if not bug:
        assert v.value is Value.TRUE, v.counterexamples[:3]
        assert sum(n for k, n in v.counts.items() if k.startswith("malformed_")) >= 11
    else:
        assert v.value is Value.FALSE
        assert {c["rule"] for c in v.counterexamples} == {"malformed_requests_refused"}
        assert all("bad_task_id" in c["why"] for c in v.counterexamples), v.counterexamples


# -- a requester written elsewhere, judged from its wire -----------------------------------------
REQUESTER = (sys.executable, "examples/a2a-requester/requester.py")


@pytest.fixture(scope="module")
def requester_tapped(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """a2a_restart with examples/a2a-requester in front of the reference responders: its
    requests, retries and replies read off its wire tap, every rule TRUE."""
    out = tmp_path_factory.mktemp("requester_tapped")
    scenario = load_scenario(SCENARIOS / "a2a_restart.toml").with_node_command(
        "requester", REQUESTER)
    result = run_scenario(scenario, REFERENCE, out, mode="live",
                          options=Options(broker="mosquitto"))
    assert all(v.value is not Value.FALSE for v in result.verdicts), \
        [(v.name, v.counterexamples[:2]) for v in result.verdicts]
    lines = [json.loads(line) for line in (out / "history.jsonl").open()]
    assert not any(e["kind"] == "a2m_attempt" for e in lines)      # nothing of its own
    return lines


def _retry_reuses_the_first_correlation(lines: list[dict[str, Any]]) -> None:
    """A retry under its first attempt's Correlation Data, which its replies then echo."""
    sent = _of(lines, "client-1", "PUBLISH", "out", "$a2a/v1/request/")
    first: dict[str, str] = {}
    for e in sent:
        if e["taskId"] in first:      # a retry: the same Task.id again
            own, e["properties"]["correlationData"] = \
                e["properties"]["correlationData"], first[e["taskId"]]
            for r in _of(lines, "client-1", "PUBLISH", "in", "$a2a/v1/reply/"):
                if r["properties"].get("correlationData") == own:
                    r["properties"]["correlationData"] = first[e["taskId"]]
            return
        first[e["taskId"]] = e["properties"]["correlationData"]
    raise AssertionError("no retry on the wire")


def _task_id_not_a_uuid(lines: list[dict[str, Any]]) -> None:
    """Its first request names task-1 (and so does the end it reports of it)."""
    first = _of(lines, "client-1", "PUBLISH", "out", "$a2a/v1/request/")[0]
    for e in lines:
        if e["kind"] == "request_settled" and e.get("taskId") == first["taskId"]:
            e["taskId"] = "task-1"
    first["taskId"] = "task-1"


def _reply_topic_never_subscribed(lines: list[dict[str, Any]]) -> None:
    e = _of(lines, "client-1", "PUBLISH", "out", "$a2a/v1/request/")[0]
    e["properties"]["responseTopic"] += "/elsewhere"


def _retry_too_soon(lines: list[dict[str, Any]]) -> None:
    """The first retry on the wire left 3 s after its attempt, not 15 s and a backoff."""
    sent = _of(lines, "client-1", "PUBLISH", "out", "$a2a/v1/request/")
    first: dict[str, dict[str, Any]] = {}
    for e in sent:
        if e["taskId"] in first and e["properties"]["correlationData"] != \
                first[e["taskId"]]["properties"]["correlationData"]:
            e["tMs"] = first[e["taskId"]]["tMs"] + 3_000
            return
        first.setdefault(e["taskId"], e)
    raise AssertionError("no retry on the wire")


def _expires_within_the_wait(lines: list[dict[str, Any]]) -> None:
    """Its first request carries a Message Expiry Interval of 10 s (A2M-RETRY-9)."""
    first = next(e for e in lines if e["kind"] == "wire" and e["node"] == "client-1"
                 and e["packet"] == "PUBLISH" and e["direction"] == "out"
                 and (e.get("topic") or "").startswith("$a2a/v1/request/"))
    first["properties"]["messageExpiryS"] = 10


def _stray_reply_taken(lines: list[dict[str, Any]]) -> None:
    """The one reply to a task asked once, early, reaches it without Correlation Data: it
    never asks again, as if it had taken that stray reply for its answer (A2M-REQ-2)."""
    sent = _of(lines, "client-1", "PUBLISH", "out", "$a2a/v1/request/")
    got = _of(lines, "client-1", "PUBLISH", "in", "$a2a/v1/reply/")
    asked: dict[str, int] = {}
    for e in sent:
        asked[e["taskId"]] = asked.get(e["taskId"], 0) + 1
    end = max(e["tMs"] for e in lines)
    for e in got:
        if asked.get(e["taskId"]) == 1 and e["tMs"] < end - 25_000 \
                and sum(g["taskId"] == e["taskId"] for g in got) == 1:
            del e["properties"]["correlationData"]
            return
    raise AssertionError("no task asked once and answered once early enough")


def _guessable_reply_topic(lines: list[dict[str, Any]]) -> None:
    """Its reply topic, wherever it shows (subscribed, named, replied to), ends in the
    requester's node id (A2M-SESS-4)."""
    topic = next(e["properties"]["responseTopic"] for e in lines if e["kind"] == "wire"
                 and e["node"] == "client-1" and e["packet"] == "PUBLISH"
                 and (e.get("properties") or {}).get("responseTopic"))
    guessable = topic.rsplit("/", 1)[0] + "/client-1"
    for i, e in enumerate(lines):
        lines[i] = json.loads(json.dumps(e).replace(topic, guessable))


def _context_property_of_another(lines: list[dict[str, Any]]) -> None:
    """A request names one context in a2a-context-id and another in its payload (A2M-CTX-4)."""
    first = next(e for e in lines if e["kind"] == "wire" and e["node"] == "client-1"
                 and e["packet"] == "PUBLISH" and e["direction"] == "out"
                 and (e.get("topic") or "").startswith("$a2a/v1/request/")
                 and e.get("conversationId"))
    users = [u for u in first["properties"].get("userProperties", [])
             if u[0] != "a2a-context-id"]
    first["properties"]["userProperties"] = [*users, ["a2a-context-id", "ctx-other"]]


REQUESTER_MUTATIONS: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    "a retry too soon": (_retry_too_soon, "retries_keep_the_profile"),
    "a retry under the first Correlation Data": (_retry_reuses_the_first_correlation,
                                                 "no_request_again_after_a_reply"),
    "a Task.id that is no UUID": (_task_id_not_a_uuid, "requests_carry_a_reply_path"),
    "a reply topic never subscribed": (_reply_topic_never_subscribed,
                                       "requests_carry_a_reply_path"),
    "an expiry within the first-reply wait": (_expires_within_the_wait,
                                              "request_expiry_outlasts_the_wait"),
    "a context property of another": (_context_property_of_another,
                                      "context_property_matches_the_payload"),
    "a reply topic ending in its node id": (_guessable_reply_topic,
                                            "reply_suffixes_resist_collisions"),
    "a stray reply taken for an answer": (_stray_reply_taken,
                                          "uncorrelated_replies_answer_nothing"),
}


@pytest.mark.parametrize("mutation", sorted(REQUESTER_MUTATIONS))
def test_a_requester_written_elsewhere_is_judged_from_its_wire(
        requester_tapped: list[dict[str, Any]], mutation: str) -> None:
    mutate, rule = REQUESTER_MUTATIONS[mutation]
    lines = [json.loads(json.dumps(e)) for e in requester_tapped]
    mutate(lines)
    v = checkers()["a2a_requests"](from_lines([{**e, "seq": i + 1} for i, e in enumerate(lines)]))
    assert v.value is Value.FALSE and {c["rule"] for c in v.counterexamples} == {rule}, \
        (v.counts, v.counterexamples[:2])


def test_a_requester_that_takes_a_stray_reply_for_its_answer_is_seen_on_its_wire(
        tmp_path: Path) -> None:
    """a2a_stray_replies: replies reach the requester without Correlation Data. As written,
    examples/a2a-requester ignores them and retries (A2M-REQ-2); with --bug
    settles-by-task-id it takes one for the answer to the task it names and never asks
    again."""
    for bug in ((), ("--bug", "settles-by-task-id")):
        scenario = load_scenario(SCENARIOS / "a2a_stray_replies.toml").with_node_command(
            "requester", (*REQUESTER, *bug))
        result = run_scenario(scenario, REFERENCE, tmp_path / (bug[-1] if bug else "as-written"),
                              mode="live", options=Options(broker="mosquitto"))
        [v] = [v for v in result.verdicts if v.name == "a2a_requests"]
        rule = v.rules["uncorrelated_replies_answer_nothing"]
        if bug:
            assert rule["violations"] >= 1 and {c["rule"] for c in v.counterexamples} == {
                "uncorrelated_replies_answer_nothing"}, v.counterexamples[:2]
        else:
            assert v.value is Value.TRUE and v.counts["uncorrelated_replies_ignored"] >= 1, \
                (v.counts, v.counterexamples[:2])


def test_a_requester_whose_reply_topic_ends_in_its_node_id_is_seen_on_its_wire(
        tmp_path: Path) -> None:
    """examples/a2a-requester --bug guessable-reply-topic: its reply suffix is its node id,
    which two instances of one agent share (A2M-SESS-4); as written, a fresh UUID's hex."""
    scenario = compressed("a2a_quickstart", 4).with_node_command(
        "requester", (*REQUESTER, "--bug", "guessable-reply-topic"))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    [v] = [v for v in result.verdicts if v.name == "a2a_requests"]
    assert {c["rule"] for c in v.counterexamples} == {"reply_suffixes_resist_collisions"}, \
        v.counterexamples[:2]
    assert "'client-1' holds about 0 bits" in v.counterexamples[0]["why"]


def test_a_requester_that_gives_up_waiting_too_soon_is_seen_on_its_wire(
        tmp_path: Path) -> None:
    """examples/a2a-requester --bug hasty-retry waits 3 s for a first reply, not 15: its
    retries while the responder is down leave too soon, and the wire shows it."""
    scenario = compressed("a2a_restart", 20).with_node_command(
        "requester", (*REQUESTER, "--bug", "hasty-retry"))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    [v] = [v for v in result.verdicts if v.name == "a2a_requests"]
    assert v.value is Value.FALSE
    assert "retries_keep_the_profile" in {c["rule"] for c in v.counterexamples}, \
        v.counterexamples[:2]


def test_a_retry_whose_backoff_outlived_the_reply_shows_on_the_requesters_wire(
        tmp_path: Path) -> None:
    """The bug first written into examples/a2a-requester by accident: a backoff timer armed
    before the reply came sends the request again when it fires (A2M-RETRY-6); the scenario
    places replies inside the backoff (a2a_restart placed one there, or none)."""
    scenario = load_scenario(SCENARIOS / "a2a_reply_in_backoff.toml").with_node_command(
        "requester", (*REQUESTER, "--bug", "stale-backoff"))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    [v] = [v for v in result.verdicts if v.name == "a2a_requests"]
    assert v.value is Value.FALSE
    # the retry rules see it too, when the stale retry left as its backoff ended (A2M-RETRY-6)
    rules = {c["rule"] for c in v.counterexamples}
    assert "no_request_again_after_a_reply" in rules, v.counterexamples[:2]
    assert rules <= {"no_request_again_after_a_reply", "retries_keep_the_profile"}, rules


# -- a graceful stop mid-run (the restart fault's `graceful`: SIGTERM) --------------------------------
def test_a_responder_written_elsewhere_stopped_with_sigterm_says_offline_before_it_goes(
        tmp_path: Path) -> None:
    """a2a_graceful_restart with examples/a2a-responder as its responders: SIGTERM mid-run,
    its card offline before its DISCONNECT, then back. The same history with that card
    removed is FALSE; with its DISCONNECT removed (an agent that dies of SIGTERM) the stop
    is undecided (UNKNOWN), not TRUE."""
    scenario = compressed("a2a_graceful_restart", 10).with_node_command("responder", EXAMPLE)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    verdicts = _verdicts(result)
    assert verdicts["a2a_session"] is Value.TRUE and verdicts["duplicate_execution"] is Value.TRUE
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    [stop] = [e for e in lines if e["kind"] == "node_crashed" and e["node"] == "tax-1"]
    assert stop["how"] == "SIGTERM" and stop["node"] == "tax-1"
    began = next(e["seq"] for e in lines if e["kind"] == "fault_start")
    during = [e for e in _of(lines, "tax-1", "DISCONNECT", "out") if began < e["seq"] < stop["seq"]]
    goodbye = [e for e in _of(lines, "tax-1", "PUBLISH", "out", "$a2a/v1/discovery/")
               if began < e["seq"] < stop["seq"]]
    assert len(during) == 1 and goodbye, "no graceful leave seen during the stop"
    judge = checkers()["a2a_session"]
    v = judge(from_lines([e for e in lines if e not in goodbye]))
    assert v.value is Value.FALSE and {c["rule"] for c in v.counterexamples} == {"leaves_offline"}
    v = judge(from_lines([e for e in lines if e not in during]))
    assert v.value is Value.UNKNOWN and v.counts["stops_without_a_disconnect"] == 1, v.counts


def test_the_reference_requester_behind_a_tap_is_judged_on_stray_replies_as_anyone(
        tmp_path: Path) -> None:
    """A2M-REQ-2 is judged off a requester's wire (its own records keep no Task.id of a reply
    they ignored): the reference behind the tap (--wire-tap, a grid's every cell) is judged
    as anyone's — each stray reply ignored and its request retried. The same history with
    the retries after the first stray cut is FALSE."""
    result = run_scenario(load_scenario(SCENARIOS / "a2a_stray_replies.toml"), REFERENCE,
                          tmp_path, mode="live", options=Options(broker="mosquitto",
                                                                 wire_tap=True))
    [v] = [v for v in result.verdicts if v.name == "a2a_requests"]
    assert v.value is Value.TRUE, v.counterexamples[:2]
    assert v.counts["uncorrelated_replies"] > 0 and \
        v.rules["uncorrelated_replies_answer_nothing"]["violations"] == 0
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    [stray] = [e for e in _of(lines, "client-1", "PUBLISH", "in", "$a2a/v1/reply/")
               if "correlationData" not in (e.get("properties") or {})][:1]
    later = {e["seq"] for e in _of(lines, "client-1", "PUBLISH", "out", "$a2a/v1/request/")
             if e["seq"] > stray["seq"] and e.get("taskId") == stray.get("taskId")}
    assert later, "the reference asked nothing again after the stray"
    cut = [e for e in lines if e["seq"] not in later]
    mutated = checkers()["a2a_requests"](from_lines(cut))
    assert "uncorrelated_replies_answer_nothing" in {c["rule"] for c in mutated.counterexamples}
    # a responder that streams: the stray was its first item, the next came with the
    # Correlation Data — that one answered the request, no retry was owed, and what the
    # requester made of the stray cannot be told (no case either way)
    asked = next(e for e in _of(cut, "client-1", "PUBLISH", "out", "$a2a/v1/request/")
                 if e.get("taskId") == stray.get("taskId") and e["seq"] < stray["seq"])
    follow = {**stray, "seq": stray["seq"] + 0.5, "tMs": stray["tMs"] + 50,
              "properties": {**stray["properties"],
                             "correlationData": asked["properties"]["correlationData"]}}
    streamed = sorted([*cut, follow], key=lambda e: e["seq"])
    for i, e in enumerate(streamed, 1):
        e["seq"] = i
    v2 = checkers()["a2a_requests"](from_lines(streamed))
    assert "uncorrelated_replies_answer_nothing" not in {c["rule"] for c in v2.counterexamples}
    assert v2.counts["uncorrelated_replies_then_answered"] >= 1, v2.counts


@pytest.mark.parametrize("name", ["a2a_bad_types", "a2a_bad_values"])
def test_a_responder_written_elsewhere_refuses_every_derived_bad_field(
        tmp_path: Path, name: str) -> None:
    """examples/a2a-responder on the cases derived from the field tables (every wrong JSON
    type, every forbidden value), judged off its wire: each refused with the error JSON-RPC
    names, none run, none unanswered. (It ran a request whose id was an array, and left one
    whose contextId was a number unanswered, until these runs were pinned.)"""
    scenario = load_scenario(SCENARIOS / f"{name}.toml").with_node_command("responder", EXAMPLE)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    v = {v.name: v for v in result.verdicts}["a2a_replies"]
    assert v.value is Value.TRUE, v.counterexamples[:3]
    assert v.rules["malformed_requests_refused"] == {"violations": 0, "unknown": 0}


# -- MQTT 5 properties in the forms the profile forbids (a2a_bad_properties) ----------------------
@pytest.mark.parametrize("bug, ran", [
    ((), set()),
    # a Response Topic nobody can publish to taken for a reply path: the task runs, and the
    # reply's publish (paho refuses a wildcard) kills the process that runs it
    (("--bug", "any-reply-topic"), {"prop:response_topic:empty", "prop:response_topic:wildcard"}),
    # only the last of two a2a-context-id values compared with the payload's
    (("--bug", "last-context-property"), {"prop:a2a-context-id:twice"}),
])
def test_a_responder_written_elsewhere_on_each_property_form(
        tmp_path: Path, bug: tuple[str, ...], ran: set[str]) -> None:
    """a2a_bad_properties with examples/a2a-responder as its responders, live on Mosquitto
    (which forwards every one of these forms: measured 2026-12-05, 2.0.11): the forms the
    profile forbids refused or dropped and run nowhere, the two valid ones served — judged
    off the wire by the tap, as any responder's. Each of its two hand-written bugs the
    derived cases found in it turns malformed_requests_refused FALSE, naming those cases."""
    scenario = load_scenario(SCENARIOS / "a2a_bad_properties.toml").with_node_command(
        "responder", (*EXAMPLE, *bug))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    v = {v.name: v for v in result.verdicts}["a2a_replies"]
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    executed = {e["taskId"] for e in lines if e["kind"] == "task_executed"}
    sent = [e for e in lines if e["kind"] == "attack_sent"]
    served = {"prop:a2a-unknown:present", "prop:a2a-artifact-mode:unknown"}
    got = {e["how"] for e in sent if e["requestId"] in executed}
    # (a process the bug kills serves nothing after: the valid ones may not come to run)
    assert ran <= got <= served | ran and (ran or got == served), got
    if not ran:
        assert v.value is Value.TRUE, v.counterexamples[:3]
        assert v.rules["unknown_properties_ignored"] == {"violations": 0, "unknown": 0}
        assert v.rules["unknown_artifact_modes_answered_in_json"] == \
            {"violations": 0, "unknown": 0}
        # the same history, the reply to an unsupported artifact mode read by the tap as no
        # JSON (a binary artifact chunk nobody asked for): FALSE, by that rule alone
        modes = {e["messageId"] for e in sent if e["how"] == "prop:a2a-artifact-mode:unknown"}
        [first] = [e for e in lines if e["kind"] == "wire" and e["direction"] == "out"
                   and e["packet"] == "PUBLISH" and e.get("topic", "").rsplit("/", 1)[-1]
                   in modes][:1]
        first["notJson"] = True
        mutated = checkers()["a2a_replies"](from_lines(lines))
        assert mutated.value is Value.FALSE
        assert {c["rule"] for c in mutated.counterexamples} == \
            {"unknown_artifact_modes_answered_in_json"}
        return
    assert v.value is Value.FALSE
    named = {c["why"].rsplit("(", 1)[-1].split(")")[0] for c in v.counterexamples
             if c["rule"] == "malformed_requests_refused"}
    assert ran <= named, v.counterexamples[:4]


# -- bearer tokens (a2a_oauth) ---------------------------------------------------------------------
def test_a_responder_written_elsewhere_checks_bearer_tokens_and_echoes_none(
        tmp_path: Path) -> None:
    """a2a_oauth with examples/a2a-responder (PyJWT, from the launch spec's a2a.oauth; TLS by
    the run's CA, from its `tls`): every spoilt token refused, nothing run, every genuine
    request's token accepted, every connection by TLS — and no token anywhere in what the
    run wrote (the tap keeps fingerprints). With `--bug echoes-token` (the request's User
    Properties copied onto its replies) the wire shows it: tokens_never_echoed, and only
    it; with `--bug plain-tcp` (the plain port, though TLS was offered) the tokens it was
    delivered crossed in the clear: tokens_travel_over_tls, and only it."""
    import re
    jwt_like = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.")
    for bug, rule in (((), None), (("--bug", "echoes-token"), "tokens_never_echoed"),
                      (("--bug", "plain-tcp"), "tokens_travel_over_tls")):
        out = tmp_path / (bug[-1] if bug else "good")
        scenario = compressed("a2a_oauth", 12).with_node_command("responder", (*EXAMPLE, *bug))
        result = run_scenario(scenario, REFERENCE, out, mode="live",
                              options=Options(broker="mosquitto"))
        verdicts = {v.name: v for v in result.verdicts}
        assert verdicts["a2a_oauth"].value is Value.TRUE, verdicts["a2a_oauth"].counterexamples
        assert sum(n for k, n in verdicts["a2a_oauth"].counts.items()
                   if k.startswith("malformed_")) >= 8
        session = verdicts["a2a_session"]
        if rule is None:
            assert session.value is Value.TRUE, session.counterexamples[:2]
            assert session.counts["tokens_crossing_taps"] > 0, session.counts
            # the same history, one responder's first connection said plain as it came
            lines = [json.loads(line) for line in (out / "history.jsonl").open()]
            del _of(lines, "tax-1", "CONNECT", "out")[0]["tls"]
            mutated = checkers()["a2a_session"](from_lines(lines))
            assert mutated.value is Value.FALSE
            assert {c["rule"] for c in mutated.counterexamples} == {"tokens_travel_over_tls"}
        else:
            assert session.value is Value.FALSE
            assert {c["rule"] for c in session.counterexamples} == {rule}
        for f in out.rglob("*"):     # what the bench wrote (data/: the agents' own files)
            if f.is_file() and f.suffix in (".jsonl", ".json", ".md", ".html", ".txt") \
                    and "data" not in f.relative_to(out).parts:
                assert not jwt_like.search(f.read_text(errors="replace")), f


# -- task handover (a2a_handover) ----------------------------------------------------------------
def test_a_task_handed_over_is_answered_by_its_delegate_which_names_itself(
        tmp_path: Path) -> None:
    """a2a_handover live, squeezed, every wire tapped: tax-1 sends each new task on to
    tax-1w, which answers the requester; a2a_handover judges it from the agents' records,
    and the requester's own wire shows the same: replies to requests it sent to tax-1's
    topic, on its reply topic, naming billing.tax1w — and its follow-ups then went to
    tax-1w's topic."""
    result = run_scenario(compressed("a2a_handover", 20), REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto", wire_tap=True))
    verdicts = {v.name: v for v in result.verdicts}
    assert all(v.value is not Value.FALSE for v in result.verdicts), \
        [(v.name, v.counterexamples[:2]) for v in result.verdicts if v.value is Value.FALSE]
    handover = verdicts["a2a_handover"]
    assert handover.value is Value.TRUE, handover.note
    assert handover.counts["handed_over"] > 0 and handover.counts["replies_from_another_agent"] > 0
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    replies = _of(events, "client-1", "PUBLISH", "in", "$a2a/v1/reply/")
    named = {v for e in replies for k, v in (e.get("properties") or {}).get("userProperties", [])
             if k == "a2a-responder-agent-id"}
    assert named == {"billing.tax1w"}, named
    sent_on = _of(events, "tax-1", "PUBLISH", "out", "$a2a/v1/request/acme/billing/billing.tax1w")
    assert sent_on, "tax-1 sent nothing on to its delegate"
    follow_ups = _of(events, "client-1", "PUBLISH", "out", "$a2a/v1/request/acme/billing/billing.tax1w")
    assert follow_ups, "no follow-up went to the delegate's own topic"
