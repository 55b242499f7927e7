"""The A2A envelope (DESIGN §3): value type, canonical JSON codec and strict validation.

Decoding never raises on bad input: it returns a `Rejection` naming what was wrong, and
an unknown `messageType` is rejected, never re-typed. No I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

import orjson

from bench.core.frozen import quick_init_module, replace

Json: TypeAlias = None | bool | int | float | str | list["Json"] | dict[str, "Json"]

MAX_ENVELOPE_BYTES = 1 << 20


class MessageType(StrEnum):
    """The kind of a seed-protocol envelope (its `messageType`)."""

    TASK_REQUEST = "TASK_REQUEST"
    TASK_RESPONSE = "TASK_RESPONSE"
    DATA_REQUEST = "DATA_REQUEST"
    DATA_RESPONSE = "DATA_RESPONSE"
    FLOW_EVENT = "FLOW_EVENT"
    GATE_OPEN = "GATE_OPEN"
    GATE_DECISION = "GATE_DECISION"
    GATE_ACK = "GATE_ACK"
    EVENT = "EVENT"


class Header(StrEnum):
    """Header names. One place spells them, as `bench.core.topics` does for topics."""

    REQUEST_ID = "requestId"
    REPLY_NODE_ID = "replyNodeId"
    ORIGIN_NODE_ID = "originNodeId"
    SIG = "x-a2a-sig"
    KID = "x-a2a-kid"
    NODE = "x-a2a-node"
    SIG_VERSION = "x-a2a-sv"


@dataclass(frozen=True, slots=True)
class Envelope:
    message_id: str
    message_type: MessageType
    from_agent_id: str
    timestamp_ms: int
    to_agent_id: str | None = None
    target_node_id: str | None = None
    conversation_id: str | None = None
    scene_group_id: str | None = None
    payload: Json = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: Header) -> str | None:
        return self.headers.get(name.value)

    def with_headers(self, **updates: str | None) -> Envelope:
        """A copy with headers set (a value of None removes the header)."""
        merged = dict(self.headers)
        for key, value in updates.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return replace(self, headers=merged)

    def to_json(self) -> dict[str, Json]:
        return {
            "messageId": self.message_id,
            "conversationId": self.conversation_id,
            "sceneGroupId": self.scene_group_id,
            "fromAgentId": self.from_agent_id,
            "toAgentId": self.to_agent_id,
            "targetNodeId": self.target_node_id,
            "messageType": self.message_type.value,
            "timestamp": self.timestamp_ms,
            "payload": self.payload,
            "headers": dict(self.headers),
        }


class RejectCode(StrEnum):
    NOT_UTF8 = "NOT_UTF8"
    NOT_JSON = "NOT_JSON"
    TOO_LARGE = "TOO_LARGE"
    NOT_OBJECT = "NOT_OBJECT"
    MISSING_FIELD = "MISSING_FIELD"
    BAD_FIELD = "BAD_FIELD"
    UNKNOWN_FIELD = "UNKNOWN_FIELD"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why bytes could not become an envelope. A value, never an exception."""

    code: RejectCode
    detail: str
    #: the messageId the bytes carried, when they carried a readable one: a drop names it
    message_id: str | None = None


def encode(envelope: Envelope) -> bytes:
    """Canonical bytes: sorted keys, no whitespace, UTF-8."""
    return canonical_json(envelope.to_json())


def non_finite(value: object) -> bool:
    """Whether a JSON-like value holds a NaN or an infinity anywhere (the stdlib writes them
    as NaN/Infinity, orjson as null: a fast path must know). Asked of nearly every history
    line and stored record: a walk without recursion, the common types tested first."""
    stack: list[Any] = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is str or v is None or t is int or t is bool:
            continue
        if t is dict:
            extend(v.values())
        elif t is float:
            if v - v != 0.0:            # NaN - NaN and inf - inf are NaN
                return True
        elif t is list or t is tuple:
            extend(v)
        elif isinstance(v, float):      # (a subclass: the types above are exact)
            if not math.isfinite(v):
                return True
        elif isinstance(v, dict):
            extend(v.values())
        elif isinstance(v, (list, tuple)):
            extend(v)
    return False


#: a number orjson writes otherwise than the stdlib: below 1e-4 it writes `0.00001` and
#: `1.5e-7` where the stdlib writes `1e-05` and `1.5e-07` (every other float and int alike;
#: a string that looks so costs only the fast path)
SMALL_NUMBER = re.compile(rb"(?:^|[:,\[])-?(?:0\.0000|[0-9.]+e-)")
#: 19 digits in a row: perhaps an int beyond 64 bits, which orjson reads as a float
LONG_DIGITS = re.compile(r"[0-9]{19}")


def canonical_json(value: Json) -> bytes:
    """Sorted keys, no whitespace, UTF-8, no NaN: byte for byte `json.dumps(value,
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)` in UTF-8
    (what a signature is taken over), written by orjson where it writes the same bytes —
    the stdlib's where a small float, a NaN or infinity (refused), an int beyond 64 bits or
    a key that is not a string is in it."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:        # an int beyond 64 bits, a key that is not a string
        return _stdlib_canonical(value)
    if written_otherwise(out, value):
        return _stdlib_canonical(value)
    return out


def written_otherwise(out: bytes, value: object) -> bool:
    """Whether orjson's bytes `out` for `value` may not be the stdlib's: a small float, or
    a NaN or infinity (orjson writes null; the stdlib writes NaN or refuses). Bytes without
    "e-", "0.0000" or "null" skip the searches."""
    # (`find`, not `in`: `b"e-" in out` first tries the needle as an int, and an exception
    # raised and cleared made each test cost three times the search)
    find = out.find
    return ((find(b"e-") >= 0 or find(b"0.0000") >= 0) and SMALL_NUMBER.search(out) is not None) \
        or (find(b"null") >= 0 and non_finite(value))


def _stdlib_canonical(value: Json) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _loads(data: bytes, text: str) -> Any:
    """`json.loads` as `decode` asks it (no NaN or Infinity, no float beyond a double, no
    lone surrogate), raising what it raises. orjson first: what it reads, it reads as the
    stdlib does but a long int (a float to it: the stdlib reads those), and what it refuses
    — those constants, those numbers, those surrogates, a nesting too deep — the stdlib is
    asked again, for its own refusal."""
    if LONG_DIGITS.search(text):
        return _stdlib_loads(text)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return _stdlib_loads(text)


def _stdlib_loads(text: str) -> Any:
    raw = json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    if "\\u" in text:
        # a lone surrogate escape ("\ud800") parses but is no character: what is
        # accepted must be writable again (signed, relayed), or it is not accepted
        canonical_json(raw)
    return raw


_REQUIRED_STR = ("messageId", "fromAgentId")
_OPTIONAL_STR = ("conversationId", "sceneGroupId", "toAgentId", "targetNodeId")
_KNOWN = frozenset(_REQUIRED_STR + _OPTIONAL_STR + ("messageType", "timestamp", "payload", "headers"))


def decode(data: bytes, *, max_bytes: int = MAX_ENVELOPE_BYTES) -> Envelope | Rejection:
    """Parse and validate one envelope. Returns a `Rejection` for anything not exactly valid."""
    if len(data) > max_bytes:
        return Rejection(RejectCode.TOO_LARGE, f"{len(data)} bytes > limit {max_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejection(RejectCode.NOT_UTF8, f"invalid UTF-8 at byte {exc.start}")
    try:
        raw: Any = _loads(data, text)
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError, the NaN/Infinity constants and the numbers too
        # large for a float refused below, and a lone surrogate (UnicodeEncodeError);
        # RecursionError is a pathological nesting depth. All are the peer's fault.
        return Rejection(RejectCode.NOT_JSON, str(exc)[:200])
    got = from_json(raw)
    if isinstance(got, Rejection) and isinstance(raw, dict) \
            and isinstance(raw.get("messageId"), str) and raw["messageId"]:
        return Rejection(got.code, got.detail, raw["messageId"][:200])
    return got


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:32]} does not fit a double")
    return value


def from_json(raw: object) -> Envelope | Rejection:
    if not isinstance(raw, dict):
        return Rejection(RejectCode.NOT_OBJECT, f"envelope must be a JSON object, got {type(raw).__name__}")
    unknown = sorted(k for k in raw if k not in _KNOWN)
    if unknown:
        return Rejection(RejectCode.UNKNOWN_FIELD, f"unknown field(s) {unknown}")
    for key in _REQUIRED_STR:
        if key not in raw:
            return Rejection(RejectCode.MISSING_FIELD, f"{key} is required")
        value = raw[key]
        if not isinstance(value, str) or not value:
            return Rejection(RejectCode.BAD_FIELD, f"{key} must be a non-empty string")
    for key in _OPTIONAL_STR:
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            return Rejection(RejectCode.BAD_FIELD, f"{key} must be a non-empty string or null")
    if "messageType" not in raw:
        return Rejection(RejectCode.MISSING_FIELD, "messageType is required")
    mtype = raw["messageType"]
    if not isinstance(mtype, str):
        return Rejection(RejectCode.BAD_FIELD, "messageType must be a string")
    try:
        message_type = MessageType(mtype)
    except ValueError:
        return Rejection(RejectCode.UNKNOWN_TYPE, f"messageType {mtype[:64]!r} is not one of "
                                                  f"{[t.value for t in MessageType]}")
    if "timestamp" not in raw:
        return Rejection(RejectCode.MISSING_FIELD, "timestamp is required")
    ts = raw["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
        return Rejection(RejectCode.BAD_FIELD, "timestamp must be a non-negative integer (ms)")
    headers = raw.get("headers", {})
    if headers is None:
        headers = {}
    if not isinstance(headers, dict):
        return Rejection(RejectCode.BAD_FIELD, "headers must be an object")
    for hk, hv in headers.items():
        if not isinstance(hv, str):
            return Rejection(RejectCode.BAD_FIELD, f"headers.{hk[:64]} must be a string")
    return Envelope(
        message_id=raw["messageId"],
        message_type=message_type,
        from_agent_id=raw["fromAgentId"],
        timestamp_ms=ts,
        to_agent_id=raw.get("toAgentId"),
        target_node_id=raw.get("targetNodeId"),
        conversation_id=raw.get("conversationId"),
        scene_group_id=raw.get("sceneGroupId"),
        payload=raw.get("payload"),
        headers=dict(headers),
    )


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
