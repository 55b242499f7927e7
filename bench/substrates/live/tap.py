"""The wire tap: what crossed a node's fault proxy, read off the MQTT packets themselves.

Evidence that does not trust the node (DESIGN §11, PROTOCOL.md Part 1): a node's own
events say what it believes it did; these say what went over its TCP connection. The
parser here is the tap's own — a few lines of MQTT 3.1.1 framing and `json.loads` — and
never the reference's decoder, so a checker reading the wire does not reuse the code it
judges.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from bench.core.events import Wire

CONNECT, PUBLISH, PUBACK, SUBSCRIBE = 1, 3, 4, 8
_NAMES = {CONNECT: "CONNECT", PUBLISH: "PUBLISH", PUBACK: "PUBACK", SUBSCRIBE: "SUBSCRIBE"}


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


def read(packet: bytes, to_broker: bool) -> Wire | None:
    """The tap's record of one whole packet, or None for a kind it does not record (or a
    packet too short to read: the proxy forwards it anyway and the receiver judges it)."""
    kind = packet[0] >> 4
    name = _NAMES.get(kind)
    if name is None:
        return None
    direction = "out" if to_broker else "in"
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
        return _publish(packet, b, direction)
    except (IndexError, ValueError):
        return None


def _publish(packet: bytes, b: bytes, direction: str) -> Wire:
    qos = (packet[0] >> 1) & 0x03
    topic, at = _string(b, 0)
    packet_id = None
    if qos:
        packet_id, at = int.from_bytes(b[at:at + 2], "big"), at + 2
    payload = b[at:]
    wire = Wire(direction, "PUBLISH", packet_id=packet_id, topic=topic, qos=qos,
                dup=bool(packet[0] & 0x08), retain=bool(packet[0] & 0x01), size_bytes=len(payload))
    try:
        env = json.loads(payload)
    except ValueError:
        env = None
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
