from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.envelope import (
    Envelope,
    MessageType,
    RejectCode,
    Rejection,
    decode,
    encode,
    from_json,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ids = st.text(min_size=1, max_size=24)

envelopes = st.builds(
    Envelope,
    message_id=ids, message_type=st.sampled_from(MessageType), from_agent_id=ids,
    timestamp_ms=st.integers(0, 2**53), to_agent_id=st.none() | ids,
    target_node_id=st.none() | ids, conversation_id=st.none() | ids,
    scene_group_id=st.none() | ids, payload=json_values,
    headers=st.dictionaries(st.text(max_size=12), st.text(max_size=20), max_size=5),
)


@given(envelopes)
def test_round_trip(env: Envelope) -> None:
    assert decode(encode(env)) == env


@given(envelopes)
def test_encoding_is_canonical(env: Envelope) -> None:
    assert encode(decode(encode(env))) == encode(env)  # type: ignore[arg-type]


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    result = decode(data)
    assert isinstance(result, (Envelope, Rejection))


@given(st.dictionaries(st.sampled_from(["messageId", "fromAgentId", "messageType", "timestamp",
                                        "headers", "payload", "toAgentId", "extra"]),
                       json_values, max_size=8))
def test_arbitrary_objects_never_raise(obj: dict[str, object]) -> None:
    assert isinstance(from_json(obj), (Envelope, Rejection))


def _valid() -> dict[str, object]:
    return {"messageId": "m1", "fromAgentId": "fin.a", "messageType": "TASK_REQUEST",
            "timestamp": 5, "headers": {"requestId": "r1"}}


@pytest.mark.parametrize("mutate, code", [
    (lambda d: d.update(messageType="TASK_REQUESTX"), RejectCode.UNKNOWN_TYPE),
    (lambda d: d.update(messageType="task_request"), RejectCode.UNKNOWN_TYPE),
    (lambda d: d.pop("messageId"), RejectCode.MISSING_FIELD),
    (lambda d: d.update(messageId=""), RejectCode.BAD_FIELD),
    (lambda d: d.update(timestamp=-1), RejectCode.BAD_FIELD),
    (lambda d: d.update(timestamp=True), RejectCode.BAD_FIELD),
    (lambda d: d.update(timestamp=1.5), RejectCode.BAD_FIELD),
    (lambda d: d.update(headers={"requestId": 7}), RejectCode.BAD_FIELD),
    (lambda d: d.update(headers=[]), RejectCode.BAD_FIELD),
    (lambda d: d.update(toAgentId=3), RejectCode.BAD_FIELD),
    (lambda d: d.update(msgId="x"), RejectCode.UNKNOWN_FIELD),
])
def test_rejections_name_the_problem(mutate, code) -> None:  # type: ignore[no-untyped-def]
    d = _valid()
    mutate(d)
    result = decode(json.dumps(d).encode())
    assert isinstance(result, Rejection)
    assert result.code is code
    assert result.detail


def test_unknown_type_is_rejected_not_retyped() -> None:
    d = _valid() | {"messageType": "EVENTS"}
    result = decode(json.dumps(d).encode())
    assert isinstance(result, Rejection) and "EVENTS" in result.detail


@pytest.mark.parametrize("data, code", [
    (b"\xff\xfe", RejectCode.NOT_UTF8),
    (b"{not json", RejectCode.NOT_JSON),
    (b'{"a": NaN}', RejectCode.NOT_JSON),
    # found by reading the code for PROTOCOL.md: both parsed, then crashed the signature
    # check (UnicodeEncodeError, ValueError) instead of being rejected
    (b'{"messageId": "\\ud800", "fromAgentId": "x.y", "messageType": "EVENT", '
     b'"timestamp": 1}', RejectCode.NOT_JSON),
    (b'{"messageId": "m", "fromAgentId": "x.y", "messageType": "EVENT", "timestamp": 1, '
     b'"payload": 1e400}', RejectCode.NOT_JSON),
    (b"[1,2]", RejectCode.NOT_OBJECT),
    (b"[" * 100_000, RejectCode.NOT_JSON),
])
def test_bad_bytes(data: bytes, code: RejectCode) -> None:
    result = decode(data)
    assert isinstance(result, Rejection) and result.code is code


def test_too_large() -> None:
    result = decode(b" " * 100, max_bytes=10)
    assert isinstance(result, Rejection) and result.code is RejectCode.TOO_LARGE


def test_an_escaped_pair_of_surrogates_is_one_character_and_accepted() -> None:
    result = decode(b'{"messageId": "m\\ud83d\\ude00", "fromAgentId": "x.y", '
                    b'"messageType": "EVENT", "timestamp": 1, "payload": 2.5}')
    assert not isinstance(result, Rejection), result
    assert result.message_id == "m\U0001F600" and result.payload == 2.5


# the stdlib, as canonical_json and decode were written before orjson wrote and read them
def _stdlib_canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _outcome(f: object, *args: object) -> tuple[str, str]:
    try:
        return "value", repr(f(*args))  # type: ignore[operator]
    except Exception as exc:   # noqa: BLE001 -- which exception is what is compared
        return "raised", type(exc).__name__


any_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
    | st.text(max_size=20) | st.sampled_from([1e-5, -1.5e-7, 1e16, 1e400, 0.00012, 2**64]),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(any_json)
def test_canonical_json_writes_the_stdlibs_bytes_or_refuses_as_it_does(value: object) -> None:
    """orjson where it writes the same bytes, the stdlib where not: never a byte apart (a
    signature is taken over these bytes), and NaN or infinity refused alike."""
    from bench.core.envelope import canonical_json
    assert _outcome(canonical_json, value) == _outcome(_stdlib_canonical, value)


@pytest.mark.parametrize("value", [
    {"a": 1e-05}, [0.00001], 1e-5, {"b": [1, -1.5e-7]}, {"x": float("nan")}, [float("inf")],
    {"n": 2**64}, {"n": -2**63 - 1}, {1: "int key"}, {"s": "\ud800"}, {"é": "ü", "a": "\x7f"},
    {"z": 1, "a": {"y": 2, "b": 3}}, {"t": (1, "two")}, 1e16, {"k": 123456789012345678901},
])
def test_canonical_json_on_the_values_orjson_writes_otherwise(value: object) -> None:
    from bench.core.envelope import canonical_json
    assert _outcome(canonical_json, value) == _outcome(_stdlib_canonical, value)


def _stdlib_loads(text: str) -> object:
    """How decode read JSON with the stdlib alone (the oracle)."""
    def constant(name: str) -> object:
        raise ValueError(f"non-standard JSON constant {name}")

    def finite(number: str) -> float:
        value = float(number)
        if value - value != 0.0:
            raise ValueError(f"number {number[:32]} does not fit a double")
        return value

    raw = json.loads(text, parse_constant=constant, parse_float=finite)
    if "\\u" in text:
        _stdlib_canonical(raw)
    return raw


def _read(f: object, *args: object) -> tuple[str, str]:
    try:
        return "value", repr(f(*args))  # type: ignore[operator]
    except (ValueError, RecursionError) as exc:
        return "refused", str(exc)[:200]


@pytest.mark.parametrize("text", [
    '{"n":18446744073709551616}', '{"n":-9223372036854775809}', '{"f":1e400}', '{"f":1E-400}',
    '{"c":NaN}', '{"c":-Infinity}', '{"s":"\\ud800"}', '{"s":"\\ud83d\\ude00"}',
    '{"a":1,"a":2}', '[' * 3000 + ']' * 3000, '\ufeff{}', '{"x":-0}', '{"x":-0.0}', '{"x":1.0}',
    ' {} ', '{"a":}', '{"k":1234567890123456789}', '"\\u00e9"',
])
def test_an_envelope_is_read_as_the_stdlib_reads_it(text: str) -> None:
    """decode reads by orjson first: whatever it reads is the stdlib's value, and what it
    refuses the stdlib refuses, with its own reason (a Rejection's detail is recorded)."""
    from bench.core.envelope import _loads
    assert _read(_loads, text.encode("utf-8"), text) == _read(_stdlib_loads, text)


@given(any_json)
def test_any_json_is_read_as_the_stdlib_reads_it(value: object) -> None:
    from bench.core.envelope import _loads
    text = json.dumps(value)        # NaN, Infinity and long ints written as the stdlib does
    assert _read(_loads, text.encode("utf-8"), text) == _read(_stdlib_loads, text)
