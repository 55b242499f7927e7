from __future__ import annotations

from dataclasses import replace

import pytest

from bench.core.auth import (
    ADMISSION,
    FLAT_KID,
    AuthMode,
    KeyRing,
    Secret,
    SignatureVerdict,
    SignatureVersion,
    admits,
    sign,
    verify,
)
from bench.core.envelope import Envelope, Header, MessageType

KEYS = KeyRing(flat_token=Secret("flat-token-s3cret"),
               agent_keys={"fin.tax": Secret("fin-tax-key"), "llm.tax": Secret("llm-tax-key")})
NOW = 1_000_000


def env(from_agent: str = "fin.tax", **kw: object) -> Envelope:
    return Envelope(message_id="m1", message_type=MessageType.TASK_REQUEST,
                    from_agent_id=from_agent, timestamp_ms=NOW, to_agent_id="llm.tax",
                    target_node_id="exec-1", payload={"amount": 10}, **kw)  # type: ignore[arg-type]


def check(e: Envelope, keys: KeyRing = KEYS) -> SignatureVerdict:
    return verify(e, keys, NOW, max_skew_ms=300_000)


def test_per_agent_key_is_preferred_and_verifies() -> None:
    signed = sign(env(), KEYS, "orch-1")
    assert signed.header(Header.KID) == "fin.tax"
    assert signed.header(Header.NODE) == "orch-1"
    assert check(signed) is SignatureVerdict.VERIFIED


def test_flat_token_fallback() -> None:
    signed = sign(env("fin.other"), KEYS, "orch-1")
    assert signed.header(Header.KID) == FLAT_KID
    assert check(signed) is SignatureVerdict.VERIFIED


def test_v1_signed_string_is_the_seeds() -> None:
    """hex(HMAC-SHA256(key, "messageId|fromAgentId|messageType|timestamp"))."""
    import hashlib
    import hmac as std_hmac
    signed = sign(env(), KEYS, "orch-1")
    expected = std_hmac.new(b"fin-tax-key", f"m1|fin.tax|TASK_REQUEST|{NOW}".encode(),
                            hashlib.sha256).hexdigest()
    assert signed.header(Header.SIG) == expected


def test_no_keys_means_unsigned() -> None:
    e = sign(env(), KeyRing(), "orch-1")
    assert e.header(Header.SIG) is None
    assert check(e) is SignatureVerdict.UNSIGNED


def test_bad_signature() -> None:
    signed = sign(env(), KEYS, "orch-1")
    tampered = signed.with_headers(**{Header.SIG.value: "00" * 32})
    assert check(tampered) is SignatureVerdict.BAD_SIGNATURE
    assert check(signed.with_headers(**{Header.SIG.value: "zz"})) is SignatureVerdict.BAD_SIGNATURE


def test_a_claimed_sender_other_than_the_keys_agent_is_a_kid_mismatch() -> None:
    """Signed with fin.orchestrator's own key, then claiming llm.tax: the kid names
    another agent than the sender, caught before the MAC is even computed."""
    signed = sign(env(), KEYS, "orch-1")
    assert check(replace(signed, from_agent_id="llm.tax")) is SignatureVerdict.KID_MISMATCH


def test_a_signed_field_changed_under_the_flat_token_is_a_bad_signature() -> None:
    """Under the flat token the kid names no agent: the changed sender breaks the MAC."""
    flat_only = KeyRing(flat_token=KEYS.flat_token)
    signed = sign(env(), flat_only, "orch-1")
    assert check(replace(signed, from_agent_id="llm.tax"), flat_only) is \
        SignatureVerdict.BAD_SIGNATURE


def test_unknown_kid() -> None:
    signed = sign(env(), KEYS, "orch-1").with_headers(**{Header.KID.value: "nobody"})
    assert check(signed) is SignatureVerdict.UNKNOWN_KID
    # flat kid when the receiver has no flat token
    flat = sign(env("fin.other"), KEYS, "orch-1")
    assert check(flat, KeyRing(agent_keys=KEYS.agent_keys)) is SignatureVerdict.UNKNOWN_KID


def test_kid_mismatch_per_agent_key_used_for_another_agent() -> None:
    # llm.tax's key signs a message claiming to be from fin.tax
    forged = sign(env("llm.tax"), KEYS, "evil")
    forged = replace(forged, from_agent_id="fin.tax")
    assert check(forged) is SignatureVerdict.KID_MISMATCH


def test_stale() -> None:
    old = sign(replace(env(), timestamp_ms=NOW - 400_000), KEYS, "orch-1")
    assert check(old) is SignatureVerdict.STALE
    future = sign(replace(env(), timestamp_ms=NOW + 400_000), KEYS, "orch-1")
    assert check(future) is SignatureVerdict.STALE


def test_v1_does_not_cover_payload_or_routing_v2_does() -> None:
    """DESIGN §5: the seed's scheme lets tampering through; v2 catches it."""
    for version, expect in ((SignatureVersion.V1, SignatureVerdict.VERIFIED),
                            (SignatureVersion.V2, SignatureVerdict.BAD_SIGNATURE)):
        signed = sign(env(), KEYS, "orch-1", version)
        assert check(signed) is SignatureVerdict.VERIFIED
        assert check(replace(signed, payload={"amount": 1_000_000})) is expect
        assert check(replace(signed, target_node_id="exec-evil")) is expect
        assert check(replace(signed, to_agent_id="llm.other")) is expect


@pytest.mark.parametrize("mode, admitted", [
    (AuthMode.STRICT, {SignatureVerdict.VERIFIED}),
    (AuthMode.LOOSE, {SignatureVerdict.VERIFIED, SignatureVerdict.UNSIGNED}),
    (AuthMode.AUDIT, set(SignatureVerdict)),
])
def test_admission_matrix(mode: AuthMode, admitted: set[SignatureVerdict]) -> None:
    assert {v for v in SignatureVerdict if admits(mode, v)} == admitted
    assert ADMISSION[mode] == admitted


def test_secret_never_shows_itself() -> None:
    s = Secret("hunter2")
    assert "hunter2" not in repr(s) and "hunter2" not in str(s)
    assert "hunter2" not in repr(KEYS) and "flat-token-s3cret" not in repr(KEYS)
    assert "hunter2" not in f"{s}"


def _constant_time_checks(node_class: type, monkeypatch) -> int:  # type: ignore[no-untyped-def]
    """How many constant-time MAC verifications a node makes admitting signed requests."""
    from cryptography.hazmat.primitives import hmac as c_hmac

    from bench.core.auth import AuthConfig, AuthMode, KeyRing, Secret, sign
    from bench.core.envelope import Envelope, MessageType, encode
    from bench.core.inputs import MessageReceived, Started
    from tests.helpers import executor
    calls = []
    real = c_hmac.HMAC.verify

    def spy(self, signature):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(self, signature)
    monkeypatch.setattr(c_hmac.HMAC, "verify", spy)
    keys = KeyRing(Secret("flat"), {"fin.orchestrator": Secret("k")})
    node = node_class(executor(auth=AuthConfig(AuthMode.STRICT, keys)))
    node.handle(Started(0, "b1"))
    for i in range(3):
        env = sign(Envelope(f"m{i}", MessageType.TASK_REQUEST, "fin.orchestrator", 0,
                            to_agent_id="llm.tax", target_node_id="exec-1"), keys, "orch-1")
        out = node.handle(MessageReceived(0, "ooder/node/exec-1/inbox", encode(env)))
        assert any(getattr(c, "kind", None) and c.kind.value == "inbound_admitted" for c in out)
    return len(calls)


def test_signatures_are_checked_in_constant_time_and_the_eq_defect_is_caught(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from bench.protocols.seed.node import Node
    from bench.variants import SignatureComparedWithEq
    assert _constant_time_checks(Node, monkeypatch) == 3
    monkeypatch.undo()
    assert _constant_time_checks(SignatureComparedWithEq, monkeypatch) == 0   # caught


def test_a_rotated_key_is_accepted_only_during_the_overlap() -> None:
    from bench.core.auth import KeyRing, Secret, SignatureVerdict, sign, verify
    from bench.core.envelope import Envelope, MessageType
    from bench.faults.attacks import rotated
    old = KeyRing(None, {"fin.orchestrator": Secret("old")})
    env = sign(Envelope("m1", MessageType.TASK_REQUEST, "fin.orchestrator", 0), old, "orch-1")
    during = rotated(old, "fin.orchestrator", Secret("new"), overlap=True)
    after = rotated(during, "fin.orchestrator", Secret("new"), overlap=False)
    assert verify(env, old, 0, 1000) is SignatureVerdict.VERIFIED
    assert verify(env, during, 0, 1000) is SignatureVerdict.VERIFIED
    assert verify(env, after, 0, 1000) is SignatureVerdict.BAD_SIGNATURE
    fresh = sign(Envelope("m2", MessageType.TASK_REQUEST, "fin.orchestrator", 0), after, "orch-1")
    assert verify(fresh, during, 0, 1000) is SignatureVerdict.VERIFIED and verify(fresh, old, 0, 1000) is SignatureVerdict.BAD_SIGNATURE
    assert "new" not in repr(after) and "old" not in repr(during)
