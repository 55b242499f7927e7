"""The wire tap's parser of a Parley message (`ProtocolSpec.wire`), written from protocol.md
§4 as the library's docstrings cite it, never with the library's own `_envelope`: a rule
reading the wire does not reuse the code it judges.

An envelope is a UTF-8 JSON object `{"v": 1, "t": type, "id": command id, "p": payload,
"ok": bool (res), "e": error code (res, ok false), "m": message}`. The tap keeps what the
rules read — `v`, `t`, `id`, `ok`, `e` — and, where the payload is no envelope, why
(`bad`): not JSON, not an object, or a field missing or of the wrong type."""

from __future__ import annotations

import json
from typing import Any

#: §4's message types
TYPES = ("req", "hb", "prg", "res", "rak", "cnl")


def read(topic: str, payload: bytes) -> dict[str, Any] | None:
    """What the tap records of a PUBLISH's payload on a Parley topology."""
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {"bad": "not JSON"} if payload else None
    if not isinstance(value, dict):
        return {"bad": "not an object"}
    out: dict[str, Any] = {}
    for key, kind in (("v", int), ("t", str), ("id", str), ("ok", bool), ("e", str)):
        got = value.get(key)
        if got is None:
            continue
        if not isinstance(got, kind) or (kind is int and isinstance(got, bool)):
            out.setdefault("bad", f"{key} is {type(got).__name__}")
            continue
        out[key] = got
    if "v" not in out or "t" not in out or "id" not in out:
        out.setdefault("bad", "v, t or id missing")
    return out
