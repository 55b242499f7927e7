"""The honest verifier: what a correct node must say of a message's signature, written
from DESIGN §5 alone and sharing no code with `bench.core.auth`, which it judges.

The attacks sign their forgeries here and journal the verdict given here; the auth checker
compares a node's verdict with it. If the core's signing or verification were weakened, a
shared implementation would weaken this oracle with it and the checker would see nothing.
Both are held to the same known-answer vectors (tests/data/signature_vectors.json,
computed with `openssl dgst -hmac`, a third implementation).

The signed strings (DESIGN §5):
  v1: "messageId|fromAgentId|messageType|timestamp" (the seed's; covers no payload, no routing)
  v2: "v2|" + hex(SHA-256(the envelope as canonical JSON: its ten fields, absent ones null,
      keys sorted, no whitespace, UTF-8, with the x-a2a-sig header removed)))
and x-a2a-sig = hex(HMAC-SHA256(key, signed string)). Standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

SIG, KID, SIG_VERSION = "x-a2a-sig", "x-a2a-kid", "x-a2a-sv"
FLAT = "flat"   # the kid of the flat shared token
#: DESIGN §3: the inbound ledger forgets a messageId after 24 h (a replay older than that is
#: past deduplication).
LEDGER_TTL_MS = 24 * 3600 * 1000
FIELDS = ("messageId", "conversationId", "sceneGroupId", "fromAgentId", "toAgentId",
          "targetNodeId", "messageType", "timestamp", "payload", "headers")


def signed_string(message: Mapping[str, Any], version: str) -> bytes:
    """What a signature of `version` ("1" or "2") covers, from the message as JSON."""
    if version == "1":
        return "|".join(str(message[k]) for k in
                        ("messageId", "fromAgentId", "messageType", "timestamp")).encode()
    if version != "2":
        raise ValueError(f"no signature version {version!r}")
    body = {k: message.get(k) for k in FIELDS}
    body["headers"] = {k: v for k, v in dict(message.get("headers") or {}).items() if k != SIG}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False).encode("utf-8")
    return b"v2|" + hashlib.sha256(canonical).hexdigest().encode("ascii")


def signature(message: Mapping[str, Any], key: bytes, version: str) -> str:
    return hmac.new(key, signed_string(message, version), hashlib.sha256).hexdigest()


def sign(message: Mapping[str, Any], kid: str, key: bytes, version: str) -> dict[str, Any]:
    """A copy of the message signed with `key` under `kid` (v1 carries no version header)."""
    headers = {k: v for k, v in dict(message.get("headers") or {}).items()
               if k not in (SIG, KID, SIG_VERSION)}
    headers[KID] = kid
    if version != "1":
        headers[SIG_VERSION] = version
    signed = {**message, "headers": headers}
    headers[SIG] = signature(signed, key, version)
    return signed


def verdict(wire: bytes | Mapping[str, Any], keys: Mapping[str, Sequence[bytes]], now_ms: int,
            max_skew_ms: int) -> str:
    """The admission verdict a correct verifier gives (DESIGN §5). `keys`: kid -> the keys
    accepted for it, current first (a rotation's old key stays accepted in its overlap)."""
    message = json.loads(wire) if isinstance(wire, bytes) else wire
    headers = message.get("headers") or {}
    given = headers.get(SIG)
    if given is None:
        return "UNSIGNED"
    kid = headers.get(KID) or ""
    if not keys.get(kid):
        return "UNKNOWN_KID"
    if kid not in (FLAT, message.get("fromAgentId")):
        return "KID_MISMATCH"
    version = headers.get(SIG_VERSION) or "1"
    if version not in ("1", "2") or not isinstance(given, str):
        return "BAD_SIGNATURE"
    if not any(hmac.compare_digest(signature(message, k, version), given.lower())
               for k in keys[kid]):
        return "BAD_SIGNATURE"
    if abs(now_ms - int(message["timestamp"])) > max_skew_ms:
        return "STALE"
    return "VERIFIED"
