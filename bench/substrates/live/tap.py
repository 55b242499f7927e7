"""The wire tap: what crossed a node's fault proxy, read off the MQTT packets themselves.

Evidence that does not trust the node (DESIGN §11, PROTOCOL.md Part 1): a node's own
events say what it believes it did; these say what went over its TCP connection. The
parser here is the tap's own — a few lines of MQTT 3.1.1 framing and `json.loads`; on an
MQTT 5 connection, the `mqtt5` packet codec (properties, reason codes) — and never the
reference's decoder, so a checker reading the wire does not reuse the code it judges.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import mqtt5

from bench.core.envelope import Json
from bench.core.events import Wire

CONNECT, PUBLISH, PUBACK, SUBSCRIBE, DISCONNECT = 1, 3, 4, 8, 14
_NAMES = {CONNECT: "CONNECT", PUBLISH: "PUBLISH", PUBACK: "PUBACK", SUBSCRIBE: "SUBSCRIBE",
          DISCONNECT: "DISCONNECT"}


def protocol_level(connect: bytes) -> int | None:
    """A CONNECT's protocol level (4: MQTT 3.1.1, 5: MQTT 5), or None if it is not one."""
    if not connect or connect[0] >> 4 != CONNECT:
        return None
    try:
        b = _body(connect)
        _name, at = _string(b, 0)
        return b[at]
    except IndexError:
        return None


def _body(packet: bytes) -> bytes:
    i = 1
    while packet[i] & 0x80:
        i += 1
    return packet[i + 1:]


def _string(b: bytes, at: int) -> tuple[str, int]:
    n = int.from_bytes(b[at:at + 2], "big")
    return b[at + 2:at + 2 + n].decode("utf-8", "replace"), at + 2 + n


def _text(d: dict[str, Any], key: str) -> str | None:
    value = d.get(key)
    return value if isinstance(value, str) else None


def _int(d: dict[str, Any], key: str) -> int | None:
    value = d.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: a protocol's wire parser (`ProtocolSpec.wire`): a PUBLISH's topic and payload -> what
#: the tap records of it in `body`, or None where the payload is not its message
BodyReader = Callable[[str, bytes], "dict[str, Json] | None"]


def read(packet: bytes, to_broker: bool, v5: bool = False, tls: bool = False,
         body: BodyReader | None = None) -> Wire | None:
    """The tap's record of one whole packet, or None for a kind it does not record (or a
    packet too short to read: the proxy forwards it anyway and the receiver judges it).
    `v5`: the connection's CONNECT asked for MQTT 5; `tls`: the connection came by TLS
    (stamped on its CONNECT); `body`: the run's protocol's parser of a PUBLISH's payload
    (None: the tap reads it as the shipped protocols' envelopes)."""
    wire = _read(packet, to_broker, v5, body)
    if tls and wire is not None and wire.packet == "CONNECT":
        return replace(wire, tls=True)
    return wire


def _read(packet: bytes, to_broker: bool, v5: bool, body: BodyReader | None) -> Wire | None:
    kind = packet[0] >> 4
    name = _NAMES.get(kind)
    if name is None:
        return None
    direction = "out" if to_broker else "in"
    if kind == DISCONNECT:    # a clean leave (no will); on MQTT 5, its reason code
        return Wire(direction, name, mqtt="5" if v5 else None,
                    reason_codes=[packet[2] if len(packet) > 2 else 0] if v5 else None)
    if v5:
        return _read5(packet, direction, body)
    try:
        b = _body(packet)
        if kind == PUBACK:
            return Wire(direction, name, packet_id=int.from_bytes(b[:2], "big"))
        if kind == SUBSCRIBE:
            at, filters = 2, []
            while at < len(b):
                f, at = _string(b, at)
                filters.append(f)
                at += 1   # the requested QoS
            return Wire(direction, name, packet_id=int.from_bytes(b[:2], "big"), filters=filters)
        if kind == CONNECT:
            _proto, at = _string(b, 0)
            flags = b[at + 1]
            client_id, at = _string(b, at + 4)
            will = _string(b, at)[0] if flags & 0x04 else None
            return Wire(direction, name, client_id=client_id, clean_session=bool(flags & 0x02),
                        will_topic=will)
        return _publish(packet, b, direction, body)
    except (IndexError, ValueError):
        return None


def _publish(packet: bytes, b: bytes, direction: str, body: BodyReader | None) -> Wire:
    qos = (packet[0] >> 1) & 0x03
    topic, at = _string(b, 0)
    packet_id = None
    if qos:
        packet_id, at = int.from_bytes(b[at:at + 2], "big"), at + 2
    payload = b[at:]
    wire = Wire(direction, "PUBLISH", packet_id=packet_id, topic=topic, qos=qos,
                dup=bool(packet[0] & 0x08), retain=bool(packet[0] & 0x01), size_bytes=len(payload))
    return _envelope(wire, topic, payload, body)


def _envelope(wire: Wire, topic: str, payload: bytes, body: BodyReader | None = None) -> Wire:
    """The PUBLISH's record with its envelope's routing fields, when it carries one (read
    by the run's protocol's parser, `body`, when it has one)."""
    if body is not None:
        return replace(wire, body=body(topic, payload))
    try:
        env = json.loads(payload)
    except ValueError:   # a UnicodeDecodeError too
        return replace(wire, not_json=True) if payload else wire
    if isinstance(env, dict) and env.get("jsonrpc") == "2.0":
        return _rpc(wire, env)
    if not isinstance(env, dict) or "directory" in topic.split("/")[1:-1]:
        return wire   # an announcement, or not an envelope
    headers: dict[str, Any] = env["headers"] if isinstance(env.get("headers"), dict) else {}
    body: dict[str, Any] = env["payload"] if isinstance(env.get("payload"), dict) else {}
    return replace(wire, message_id=_text(env, "messageId"),
                   message_type=_text(env, "messageType"), from_agent_id=_text(env, "fromAgentId"),
                   to_agent_id=_text(env, "toAgentId"), target_node_id=_text(env, "targetNodeId"),
                   conversation_id=_text(env, "conversationId"),
                   request_id=_text(headers, "requestId"),
                   reply_node_id=_text(headers, "replyNodeId"),
                   origin_node_id=_text(headers, "originNodeId"), status=_text(body, "status"),
                   stream=_text(body, "stream"), stream_seq=_int(body, "seq"))


def _rpc(wire: Wire, body: dict[str, Any]) -> Wire:
    """A JSON-RPC 2.0 PUBLISH (the A2A-over-MQTT profile's), read here on its own, never
    with an agent's code: a request's method and the Task.id it names (params.message.taskId,
    or params.id), an error reply's code, a result's or stream item's Task.id and state,
    and the contextId each carries (as the Wire's conversation)."""
    def obj(d: Any, *keys: str) -> Any:
        for k in keys:
            d = d.get(k) if isinstance(d, dict) else None
        return d

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) else None
    method = text(body.get("method"))
    if method is not None:
        return replace(wire, rpc_method=method, task_id=text(obj(body, "params", "message",
                                                                  "taskId"))
                       or text(obj(body, "params", "id")),
                       conversation_id=text(obj(body, "params", "message", "contextId")))
    error = obj(body, "error", "code")
    if error is not None:
        return replace(wire, rpc_error=error if isinstance(error, int)
                       and not isinstance(error, bool) else -1)
    result = body.get("result")
    for part in ("statusUpdate", "artifactUpdate"):
        item = obj(result, part)
        if isinstance(item, dict):
            return replace(wire, task_id=text(item.get("taskId")),
                           task_state=text(obj(item, "status", "state")),
                           conversation_id=text(item.get("contextId")))
    if isinstance(obj(result, "task"), dict):   # SendMessageResponse {task}
        result = result["task"]
    return replace(wire, task_id=text(obj(result, "id")),
                   task_state=text(obj(result, "status", "state")),
                   conversation_id=text(obj(result, "contextId")))


#: a JWS in compact form (RFC 7515): what a bearer token of the profile is
_JWT = re.compile(rb"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


def _fingerprint(token: bytes) -> str:
    return hashlib.sha256(token).hexdigest()[:16]


def _redacted(value: str) -> str:
    """A User Property value with every bearer token in it replaced by its fingerprint: a
    secret never reaches the history."""
    return _JWT.sub(lambda m: _fingerprint(m.group()).encode(), value.encode()).decode()


def _tokens(got: mqtt5.PublishPacket) -> list[str]:
    """The fingerprints of the bearer tokens anywhere in a PUBLISH, in order, once each."""
    found: list[str] = []
    places = [got.payload, *(v.encode() for _k, v in got.user_properties)]
    if got.response_topic:
        places.append(got.response_topic.encode())
    if got.correlation_data:
        places.append(bytes(got.correlation_data))
    for place in places:
        for m in _JWT.finditer(bytes(place)):
            if (f := _fingerprint(m.group())) not in found:
                found.append(f)
    return found


def _read5(packet: bytes, direction: str, body: BodyReader | None) -> Wire | None:
    """A packet of an MQTT 5 connection, read by the mqtt5 codec."""
    try:
        got, _n = mqtt5.read(memoryview(packet))
    except Exception:   # noqa: BLE001 - the codec's own errors: a packet it cannot read
        return None
    match got:
        case mqtt5.ConnectPacket():
            return Wire(direction, "CONNECT", client_id=got.client_id,
                        clean_session=got.clean_start,
                        will_topic=got.will.topic if got.will else None, mqtt="5",
                        session_expiry_s=got.session_expiry_interval)
        case mqtt5.SubscribePacket():
            return Wire(direction, "SUBSCRIBE", packet_id=got.packet_id,
                        filters=[f.pattern for f in got.topic_filters], mqtt="5")
        case mqtt5.PubAckPacket():
            return Wire(direction, "PUBACK", packet_id=got.packet_id, mqtt="5",
                        reason_codes=[int(got.reason_code)])
        case mqtt5.PublishPacket():
            props: dict[str, Json] = {}
            if got.response_topic is not None:
                props["responseTopic"] = got.response_topic
            if got.correlation_data is not None:
                props["correlationData"] = got.correlation_data.hex()
            tokens = _tokens(got)
            if got.user_properties:
                props["userProperties"] = [[k, _redacted(v)] for k, v in got.user_properties]
            if got.message_expiry_interval is not None:
                props["messageExpiryS"] = got.message_expiry_interval
            if got.content_type is not None:
                props["contentType"] = got.content_type
            wire = _envelope(Wire(direction, "PUBLISH", packet_id=got.packet_id, topic=got.topic,
                                  qos=int(got.qos), dup=got.duplicate, retain=got.retain,
                                  size_bytes=len(got.payload), mqtt="5",
                                  properties=props or None, tokens=tokens or None),
                             got.topic, bytes(got.payload), body)
            return wire
    return None
