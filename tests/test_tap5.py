"""The wire tap and the fault proxy on MQTT 5, against packets a real client sent and a real
broker answered (tests/data/mqtt5-packets.json: paho v5 through the proxy in front of
Mosquitto). The tap reads CONNECT, SUBSCRIBE, PUBLISH (with its properties) and PUBACK (with
its reason code); the proxy's payload rewrite keeps every property byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import mqtt5

from bench.substrates.live import tap
from bench.substrates.live.proxy import rewrite_publish, split_publish

PACKETS = [(p["toBroker"], bytes.fromhex(p["hex"])) for p in json.loads(
    (Path(__file__).parent / "data" / "mqtt5-packets.json").read_text())["packets"]]


def _of(kind: int, to_broker: bool) -> bytes:
    return next(b for t, b in PACKETS if b[0] >> 4 == kind and t == to_broker)


def test_a_v5_connect_is_read_with_its_session_expiry_and_will() -> None:
    connect = _of(tap.CONNECT, True)
    assert tap.protocol_level(connect) == 5
    w = tap.read(connect, True, v5=True)
    assert w is not None and w.packet == "CONNECT" and w.mqtt == "5"
    assert (w.client_id, w.clean_session, w.session_expiry_s, w.will_topic) == \
        ("cap-1", False, 600, "a2a/v1/presence/cap-1")


def test_a_v5_subscribe_is_read_filter_by_filter() -> None:
    w = tap.read(_of(tap.SUBSCRIBE, True), True, v5=True)
    assert w is not None
    assert w.filters == ["a2a/v1/request/agent-x/#", "$share/pool/a2a/v1/request/pool"]


def test_a_v5_publish_is_read_with_its_properties_both_ways() -> None:
    for to_broker in (True, False):
        w = tap.read(_of(tap.PUBLISH, to_broker), to_broker, v5=True)
        assert w is not None and w.topic == "a2a/v1/request/agent-x/tasks" and w.qos == 1
        assert w.size_bytes == len(b'{"jsonrpc":"2.0","id":1}')
        props = w.properties or {}
        assert props["responseTopic"] == "a2a/v1/response/cap-1/r1"
        assert props["correlationData"] == b"\x01\x02corr".hex()
        assert props["userProperties"] == [["a2a-kind", "request"], ["trace", "t-7"]]
        assert props["contentType"] == "application/json"
        assert 0 < props["messageExpiryS"] <= 30    # type: ignore[operator]


def test_a_publish_whose_payload_is_no_json_is_marked_so() -> None:
    """A binary artifact chunk, bytes that are no UTF-8, text that is no JSON: `not_json`
    (what unknown_artifact_modes_answered_in_json reads); JSON of any kind, or nothing (a
    retained card cleared), leaves it unset."""
    for payload in (b"\x89PNG\r\n", b'{"id": "\xff"}', b"not json"):
        w = tap.read(bytes(mqtt5.PublishPacket("t/r", payload).write()), False, v5=True)
        assert w is not None and w.not_json is True, payload
    for payload in (b'{"jsonrpc": "2.0", "id": 1, "result": {}}', b"[1]", b"7", b""):
        w = tap.read(bytes(mqtt5.PublishPacket("t/r", payload).write()), False, v5=True)
        assert w is not None and w.not_json is None, payload


def test_a_v5_puback_carries_its_reason_code() -> None:
    w = tap.read(_of(tap.PUBACK, False), False, v5=True)
    assert w is not None and w.reason_codes == [0]


def test_read_as_3_1_1_the_same_bytes_are_what_the_issue_saw() -> None:
    """Without the version the 3.1.1 reader takes the property bytes for the client id and
    the filter: the proxy must know each connection's version (it reads it off CONNECT)."""
    w = tap.read(_of(tap.SUBSCRIBE, True), True)
    assert w is not None and w.filters != ["a2a/v1/request/agent-x/#",
                                           "$share/pool/a2a/v1/request/pool"]


def test_the_proxy_rewrites_a_v5_payload_and_keeps_every_property() -> None:
    for to_broker in (True, False):
        packet = _of(tap.PUBLISH, to_broker)
        topic, _head, payload = split_publish(packet, v5=True)
        assert (topic, payload) == ("a2a/v1/request/agent-x/tasks", b'{"jsonrpc":"2.0","id":1}')
        new = rewrite_publish(packet, lambda _t, _p: b'{"tampered":true}', v5=True)
        before, _ = mqtt5.read(memoryview(packet))
        after, used = mqtt5.read(memoryview(new))
        assert used == len(new) and isinstance(after, mqtt5.PublishPacket)
        assert isinstance(before, mqtt5.PublishPacket)
        assert after.payload == b'{"tampered":true}'
        for prop in ("topic", "packet_id", "qos", "response_topic", "correlation_data",
                     "user_properties", "message_expiry_interval", "content_type"):
            assert getattr(after, prop) == getattr(before, prop), prop
