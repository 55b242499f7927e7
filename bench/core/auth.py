"""Identity (DESIGN §5, seed 002 §8): signing at the exit, admission verdicts, three modes.

Signature v1 is the seed's: hex(HMAC-SHA256(key, "messageId|fromAgentId|messageType|
timestamp")); it covers neither payload nor routing fields, on purpose, so the bench can
show what that lets through. v2 covers a SHA-256 digest of the canonical envelope.
HMAC and the constant-time comparison come from `cryptography`. Keys live in `Secret`,
whose repr never shows them; nothing here puts a key into a record. No I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, hmac

from bench.core.envelope import Envelope, Header, canonical_json

FLAT_KID = "flat"


class Secret:
    """A key or token. `repr`/`str` are redacted so a secret cannot leak into a record."""

    __slots__ = ("_value",)

    def __init__(self, value: str | bytes) -> None:
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if not raw:
            raise ValueError("a secret must not be empty")
        self._value = raw

    def reveal(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


class AuthMode(StrEnum):
    """Which verdicts a node admits: strict only VERIFIED, loose also UNSIGNED, audit every one."""

    STRICT = "strict"
    LOOSE = "loose"
    AUDIT = "audit"


class SignatureVerdict(StrEnum):
    """What an envelope's signature proves: VERIFIED, UNSIGNED, or why it proves nothing."""

    VERIFIED = "VERIFIED"
    UNSIGNED = "UNSIGNED"
    BAD_SIGNATURE = "BAD_SIGNATURE"
    UNKNOWN_KID = "UNKNOWN_KID"
    KID_MISMATCH = "KID_MISMATCH"
    STALE = "STALE"


class SignatureVersion(StrEnum):
    """What a signature covers: the seed's string (1) or the canonical envelope's digest (2)."""

    V1 = "1"  # the seed's string: messageId|fromAgentId|messageType|timestamp
    V2 = "2"  # digest of the canonical envelope (payload, routing, timestamp, headers)


# Theory of operation: the verdict says what the signature proves; the mode decides
# whether that is enough. strict wants proof; loose also takes silence (unsigned) but
# not a wrong proof; audit admits everything and records every verdict.
ADMISSION: Mapping[AuthMode, frozenset[SignatureVerdict]] = {
    AuthMode.STRICT: frozenset({SignatureVerdict.VERIFIED}),
    AuthMode.LOOSE: frozenset({SignatureVerdict.VERIFIED, SignatureVerdict.UNSIGNED}),
    AuthMode.AUDIT: frozenset(SignatureVerdict),
}


def admits(mode: AuthMode, verdict: SignatureVerdict) -> bool:
    return verdict in ADMISSION[mode]


@dataclass(frozen=True, slots=True)
class KeyRing:
    """The flat shared token and per-agent keys (`agentId -> key`; the kid is the agentId)."""

    flat_token: Secret | None = None
    agent_keys: Mapping[str, Secret] = field(default_factory=dict)
    #: kid -> the key it had before a rotation, still accepted during the overlap window
    previous: Mapping[str, Secret] = field(default_factory=dict)

    def signing_key(self, from_agent_id: str) -> tuple[str, Secret] | None:
        """Per-agent key first, else the flat token (seed 002 §8), else None (unsigned)."""
        key = self.agent_keys.get(from_agent_id)
        if key is not None:
            return from_agent_id, key
        if self.flat_token is not None:
            return FLAT_KID, self.flat_token
        return None

    def key_for_kid(self, kid: str) -> Secret | None:
        if kid == FLAT_KID:
            return self.flat_token
        return self.agent_keys.get(kid)


@dataclass(frozen=True, slots=True)
class AuthConfig:
    mode: AuthMode = AuthMode.LOOSE
    keys: KeyRing = field(default_factory=KeyRing)
    version: SignatureVersion = SignatureVersion.V1
    max_skew_ms: int = 300_000


def _mac(key: Secret, data: bytes) -> hmac.HMAC:
    mac = hmac.HMAC(key.reveal(), hashes.SHA256())
    mac.update(data)
    return mac


def signed_string(envelope: Envelope, version: SignatureVersion) -> bytes:
    if version is SignatureVersion.V1:
        return (f"{envelope.message_id}|{envelope.from_agent_id}|"
                f"{envelope.message_type.value}|{envelope.timestamp_ms}").encode()
    body = envelope.to_json()
    headers = body["headers"]
    assert isinstance(headers, dict)
    headers.pop(Header.SIG.value, None)
    return b"v2|" + hashlib.sha256(canonical_json(body)).hexdigest().encode("ascii")


#: What a signature is computed over, for a version (`signed_string`; a variant may give
#: another).
SignatureInput = Callable[[Envelope, SignatureVersion], bytes]


def sign(envelope: Envelope, keys: KeyRing, node_id: str,
         version: SignatureVersion = SignatureVersion.V1,
         signed: SignatureInput = signed_string) -> Envelope:
    """Stamp the signature headers; with no key at all the message leaves unsigned."""
    chosen = keys.signing_key(envelope.from_agent_id)
    if chosen is None:
        return envelope.with_headers(**{Header.SIG.value: None, Header.KID.value: None,
                                        Header.NODE.value: node_id,
                                        Header.SIG_VERSION.value: None})
    kid, key = chosen
    stamped = envelope.with_headers(**{
        Header.KID.value: kid, Header.NODE.value: node_id,
        Header.SIG_VERSION.value: None if version is SignatureVersion.V1 else version.value,
        Header.SIG.value: None,
    })
    sig = _mac(key, signed(stamped, version)).finalize().hex()
    return stamped.with_headers(**{Header.SIG.value: sig})


def verify(envelope: Envelope, keys: KeyRing, now_ms: int, max_skew_ms: int,
           signed: SignatureInput = signed_string) -> SignatureVerdict:
    """What the envelope's signature proves. Never raises."""
    sig = envelope.header(Header.SIG)
    if sig is None:
        return SignatureVerdict.UNSIGNED
    kid = envelope.header(Header.KID) or ""
    key = keys.key_for_kid(kid)
    if key is None:
        return SignatureVerdict.UNKNOWN_KID
    if kid != FLAT_KID and kid != envelope.from_agent_id:
        return SignatureVerdict.KID_MISMATCH  # a per-agent key used for another agent
    sv = envelope.header(Header.SIG_VERSION)
    try:
        version = SignatureVersion(sv) if sv is not None else SignatureVersion.V1
        given = bytes.fromhex(sig)
    except ValueError:
        return SignatureVerdict.BAD_SIGNATURE
    data = signed(envelope, version)
    try:
        _mac(key, data).verify(given)  # constant-time
    except InvalidSignature:
        old = keys.previous.get(kid)   # a key rotation's overlap window
        if old is None:
            return SignatureVerdict.BAD_SIGNATURE
        try:
            _mac(old, data).verify(given)
        except InvalidSignature:
            return SignatureVerdict.BAD_SIGNATURE
    if abs(now_ms - envelope.timestamp_ms) > max_skew_ms:
        return SignatureVerdict.STALE
    return SignatureVerdict.VERIFIED
