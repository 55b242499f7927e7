"""property_tampering: an MQTT 5 property stripped or altered on a node's link. What it
does to one PUBLISH (the same function on the simulated link and in the live proxy, the
proxy's re-encoding keeping every other field); what a2a_tampered shows of it in the
history; and each excuse a2a_replies takes for it, taken away on the real history, turns
the rule FALSE again — as a responder or requester that did the same by itself would."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import mqtt5
import pytest

from bench.checks import Value, checkers
from bench.core.properties import TAMPER_MARK, Props
from bench.faults.primitives import FaultRef, Tampering, TamperProperties
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates.live.proxy import FaultProxy
from bench.variants import REFERENCE
from tests.helpers import Lines, from_lines

PROPS = Props("$a2a/v1/reply/o/u/a/r", b"\x01corr", (("a2a-context-id", "c1"), ("k", "v")),
              "application/json", 17)


@pytest.mark.parametrize(("prop", "strip", "key", "want"), [
    ("correlation_data", True, "", Props(PROPS.response_topic, None, PROPS.user_properties,
                                          "application/json", 17)),
    ("correlation_data", False, "", Props(PROPS.response_topic,
                                           b"\x01corr" + TAMPER_MARK.encode(),
                                           PROPS.user_properties, "application/json", 17)),
    ("response_topic", True, "", Props(None, b"\x01corr", PROPS.user_properties,
                                        "application/json", 17)),
    ("user_property", True, "a2a-context-id", Props(PROPS.response_topic, b"\x01corr",
                                                    (("k", "v"),), "application/json", 17)),
    ("user_property", False, "k", Props(PROPS.response_topic, b"\x01corr",
                                        (("a2a-context-id", "c1"), ("k", "v" + TAMPER_MARK)),
                                        "application/json", 17)),
])
def test_one_property_is_stripped_or_altered_and_the_proxy_keeps_the_rest(
        prop: str, strip: bool, key: str, want: Props) -> None:
    assert PROPS.tampered(prop, strip, key) == want
    packet = bytes(mqtt5.PublishPacket(
        "$a2a/v1/request/o/u/a", b'{"jsonrpc":"2.0"}', qos=mqtt5.QoS.AT_LEAST_ONCE,
        packet_id=9, response_topic=PROPS.response_topic, correlation_data=b"\x01corr",
        user_properties=list(PROPS.user_properties), content_type="application/json",
        message_expiry_interval=17).write())
    step = TamperProperties(FaultRef(0, "property_tampering"), "n", 1.0, prop, strip, key, 1)
    got, _n = mqtt5.read(memoryview(FaultProxy._tampered(packet, [Tampering(step, random.Random(1))])))
    assert isinstance(got, mqtt5.PublishPacket)
    assert (got.topic, got.payload, got.packet_id, int(got.qos)) == \
        ("$a2a/v1/request/o/u/a", b'{"jsonrpc":"2.0"}', 9, 1)
    assert Props(got.response_topic, got.correlation_data, tuple(got.user_properties or ()),
                 got.content_type, got.message_expiry_interval) == want


def test_nothing_to_tamper_with_leaves_the_packet_as_it_was() -> None:
    assert Props().tampered("correlation_data", True, "") is None
    packet = bytes(mqtt5.PublishPacket("t", b"x", qos=mqtt5.QoS.AT_LEAST_ONCE,
                                       packet_id=1).write())
    step = TamperProperties(FaultRef(0, "property_tampering"), "n", 1.0, "correlation_data",
                            True, "", 1)
    tampering = Tampering(step, random.Random(1))
    assert FaultProxy._tampered(packet, [tampering]) == packet and tampering.count == 0


@pytest.fixture(scope="module")
def tampered(tmp_path_factory: pytest.TempPathFactory) -> Lines:
    out = tmp_path_factory.mktemp("a2a_tampered")
    run_scenario(load_scenario(SCENARIOS / "a2a_tampered.toml"), REFERENCE, out, mode="sim")
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def test_what_the_fault_did_is_journaled_and_seen_in_the_history(tampered: Lines) -> None:
    """Each fault says how many PUBLISHes it tampered with; tax-1 and tax-2 refused each
    request that came without Correlation Data (JSON-RPC error, nothing run), client-1
    ignored each reply it could not correlate, and every operation still ended answered."""
    fired = {e["faultIndex"]: e["count"] for e in tampered if e["kind"] == "fault_fired"}
    assert set(fired) == {0, 1, 2} and all(n > 0 for n in fired.values())
    refused = [e for e in tampered if e["kind"] == "a2m_request_taken"
               and e["intake"] == "REFUSED"]
    assert len(refused) == fired[0] and all("no Correlation Data" in e["reason"]
                                            for e in refused)
    ignored = [e for e in tampered if e["kind"] == "a2m_reply_taken" and e.get("reason")]
    assert len(ignored) >= fired[0] + fired[2]
    settled = [e for e in tampered if e["kind"] == "a2m_settled"]
    assert settled and all(e["outcome"] == "COMPLETED" for e in settled)
    verdicts = {name: c(from_lines(tampered)).value for name, c in checkers().items()
                if name in ("duplicate_execution", "a2a_requests", "a2a_replies")}
    assert set(verdicts.values()) == {Value.TRUE}


def _refusals_carry_correlation(lines: Lines) -> None:
    """The responders' correlation-less refusals gone: the requester's correlation-less
    replies then came from nobody who had the excuse."""
    lines[:] = [e for e in lines if not (e["kind"] == "a2m_replied" and e["correlation"] is None)]


def _fault_dropped(index: int) -> Callable[[Lines], None]:
    def go(lines: Lines) -> None:
        lines[:] = [e for e in lines if e.get("faultIndex") != index]
    return go


@pytest.mark.parametrize(("excuse", "mutation"), [
    ("refusals_of_requests_without_correlation", _refusals_carry_correlation),
    ("correlation_stripped_in_flight", _fault_dropped(2)),
    ("correlation_altered_in_flight", _fault_dropped(1)),
])
def test_each_excuse_is_counted_and_its_reason_taken_away_is_false(
        tampered: Lines, excuse: str, mutation: Callable[[Lines], None]) -> None:
    rule = checkers()["a2a_replies"]
    kept = rule(from_lines(tampered))
    assert kept.value is Value.TRUE and kept.counts[excuse] > 0
    lines = [dict(e) for e in tampered]
    mutation(lines)
    broken = rule(from_lines(lines))
    assert broken.value is Value.FALSE
    assert broken.rules["replies_answer_a_request"]["violations"] > 0


def test_a_request_a_fault_stripped_or_altered_on_the_tap_is_not_the_requesters_doing() -> None:
    """The tap reads a PUBLISH after the proxy's faults acted (found running the EMQX SDK's
    requester on a2a_tampered in docker): within a property_tampering window on its link, a
    request seen without Correlation Data left its requester with it, and one seen with it
    altered was sent under the original — a reply echoing the altered one is no reply to
    the requester, and its retry is no retry after a reply."""
    from bench.checks import Value, checkers
    from tests.helpers import from_lines
    reply = "$a2a/v1/reply/acme/billing/client1/9f86d081884c7d65"   # 64 bits (A2M-SESS-4)

    def publish(seq: int, t: int, corr: str | None, task: str, direction: str = "out",
                topic: str = "$a2a/v1/request/acme/billing/tax1") -> dict[str, object]:
        props: dict[str, object] = {"responseTopic": reply} if direction == "out" else {}
        if corr is not None:
            props["correlationData"] = corr
        return {"kind": "wire", "node": "client-1", "seq": seq, "tMs": t, "direction": direction,
                "packet": "PUBLISH", "topic": topic, "qos": 1, "mqtt": "5",
                "properties": props, "rpcMethod": "SendMessage" if direction == "out" else None,
                "taskId": task, "taskState": None if direction == "out" else
                "TASK_STATE_SUBMITTED"}

    def fault(seq: int, index: int, action: str) -> dict[str, object]:
        return {"kind": "fault_start", "node": "nemesis", "seq": seq, "tMs": 1000,
                "fault": "property_tampering", "faultIndex": index, "atMs": 1000,
                "durationMs": 8000, "disrupts": False,
                "params": {"node": "client-1", "property": "correlation_data", "action": action}}
    task = "11111111-1111-4111-8111-111111111111"
    marked = "aa" + b"|tampered".hex()
    lines = [{"kind": "run_started", "node": "bench", "seq": 1, "tMs": 0, "protocol": "a2a-mqtt",
              "mode": "live", "mqtt": "5", "scenario": "a2a_tampered", "topology": "a2a-pair",
              "variant": "reference", "seed": 1, "nodes": 3, "authMode": "loose",
              "taskTimeoutMs": 60000, "recordsLateMs": 100.0, "timersLateMs": 2000.0},
             {"kind": "wire", "node": "client-1", "seq": 2, "tMs": 10, "direction": "out",
              "packet": "SUBSCRIBE", "filters": [reply], "mqtt": "5"},
             fault(3, 0, "strip"), fault(4, 1, "alter"),
             publish(5, 2000, None, task),                        # stripped on the way
             publish(6, 3000, marked, task),                      # altered on the way
             publish(7, 3100, marked, task, "in", reply),         # the reply to the altered one
             publish(8, 19000, "bb", task)]                       # its retry: no reply came
    v = checkers()["a2a_requests"](from_lines(lines))
    assert v.value is Value.TRUE, v.counterexamples
    # outside the windows, the same packets are the requester's
    v = checkers()["a2a_requests"](from_lines([e for e in lines if e["kind"] != "fault_start"]))
    assert v.value is Value.FALSE
    # (and its attempts 1 s apart, then 16 s: sooner than the profile's waits)
    assert {c["rule"] for c in v.counterexamples} == {"requests_carry_a_reply_path",
                                                       "no_request_again_after_a_reply",
                                                       "retries_keep_the_profile"}
