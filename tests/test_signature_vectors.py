"""Signatures v1 and v2 against known-answer vectors (tests/data/signature_vectors.json,
computed once with openssl), for both the honest verifier the attacks and the auth checker
rely on (`bench.oracle`) and the node's own signing and verification (`bench.core.auth`).
Neither is checked against the other: each is checked against the vectors and against a
verdict table written from DESIGN §5.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import oracle
from bench.core.auth import KeyRing, Secret, SignatureVersion, sign, signed_string, verify
from bench.core.envelope import Envelope, Header, decode

VECTORS = json.loads((Path(__file__).parent / "data" / "signature_vectors.json").read_text())
CASES = {c["name"]: c for c in VECTORS["cases"]}
SKEW = 300_000


def keyring(accepted: dict[str, list[str]]) -> KeyRing:
    flat = accepted.get(oracle.FLAT)
    agents = {kid: Secret(keys[0]) for kid, keys in accepted.items() if kid != oracle.FLAT}
    previous = {kid: Secret(keys[1]) for kid, keys in accepted.items()
                if kid != oracle.FLAT and len(keys) > 1}
    return KeyRing(Secret(flat[0]) if flat else None, agents, previous)


def core_envelope(message: dict[str, Any]) -> Envelope:
    env = decode(json.dumps(message).encode())
    assert isinstance(env, Envelope), env
    return env


def oracle_verdict(message: dict[str, Any], accepted: dict[str, list[str]], now: int) -> str:
    return oracle.verdict(message, {k: [v.encode() for v in vs] for k, vs in accepted.items()},
                          now, SKEW)


def core_verdict(message: dict[str, Any], accepted: dict[str, list[str]], now: int) -> str:
    return verify(core_envelope(message), keyring(accepted), now, SKEW).value


VERIFIERS = {"oracle": oracle_verdict, "core": core_verdict}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_oracle_reproduces_the_vector(name: str) -> None:
    case = CASES[name]
    message = case["message"]
    assert oracle.signed_string(message, case["version"]).decode() == case["signedString"]
    assert oracle.signature(message, case["key"].encode(), case["version"]) == case["signature"]
    unsigned = copy.deepcopy(message)
    del unsigned["headers"]["x-a2a-sig"]
    assert oracle.sign(unsigned, case["kid"], case["key"].encode(), case["version"]) == message


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_core_reproduces_the_vector(name: str) -> None:
    case = CASES[name]
    env = core_envelope(case["message"])
    version = SignatureVersion(case["version"])
    assert signed_string(env, version).decode() == case["signedString"]
    ring = keyring({case["kid"]: [case["key"]]})
    unsigned = env.with_headers(**{"x-a2a-sig": None})
    node = env.header(Header.NODE)
    assert node is not None
    assert sign(unsigned, ring, node, version).header(Header.SIG) == case["signature"]


Mutation = Callable[[dict[str, Any]], None]


def _set(key: str, value: Any) -> Mutation:
    return lambda m: m.update({key: value})


def _header(key: str, value: Any) -> Mutation:
    return lambda m: m["headers"].update({key: value}) if value is not None \
        else m["headers"].pop(key, None)


#: (what is done to a signed message, keys the verifier holds, its clock, verdict for v1,
#: verdict for v2) — written from DESIGN §5, not computed.
STRANGER = "some-other-key"
TABLE: list[tuple[str, Mutation | None, str, int, str, str]] = [
    ("as signed", None, "right", 0, "VERIFIED", "VERIFIED"),
    ("no signature", _header("x-a2a-sig", None), "right", 0, "UNSIGNED", "UNSIGNED"),
    ("kid nobody holds", _header("x-a2a-kid", "ghost.agent"), "right", 0, "UNKNOWN_KID",
     "UNKNOWN_KID"),
    ("signed by the wrong key", None, "wrong", 0, "BAD_SIGNATURE", "BAD_SIGNATURE"),
    ("old key in a rotation's overlap", None, "rotated", 0, "VERIFIED", "VERIFIED"),
    ("signature flipped", lambda m: m["headers"].update(
        {"x-a2a-sig": ("0" if m["headers"]["x-a2a-sig"][0] != "0" else "1")
         + m["headers"]["x-a2a-sig"][1:]}), "right", 0, "BAD_SIGNATURE", "BAD_SIGNATURE"),
    ("signature not hex", _header("x-a2a-sig", "zz"), "right", 0, "BAD_SIGNATURE",
     "BAD_SIGNATURE"),
    ("payload altered", _set("payload", {"ask": "transfer everything"}), "right", 0,
     "VERIFIED", "BAD_SIGNATURE"),   # v1 covers no payload: the seed's weakness
    ("toAgentId altered", _set("toAgentId", "llm.other"), "right", 0, "VERIFIED",
     "BAD_SIGNATURE"),
    ("targetNodeId altered", _set("targetNodeId", "exec-9"), "right", 0, "VERIFIED",
     "BAD_SIGNATURE"),
    ("header altered", _header("replyNodeId", "evil-node"), "right", 0, "VERIFIED",
     "BAD_SIGNATURE"),
    ("messageId altered", _set("messageId", "other-id"), "right", 0, "BAD_SIGNATURE",
     "BAD_SIGNATURE"),
    ("timestamp altered", lambda m: m.update(timestamp=m["timestamp"] + 1), "right", 0,
     "BAD_SIGNATURE", "BAD_SIGNATURE"),
    ("clock just inside the skew", None, "right", SKEW, "VERIFIED", "VERIFIED"),
    ("clock past the skew", None, "right", SKEW + 1, "STALE", "STALE"),
    ("clock past the skew, behind", None, "right", -SKEW - 1, "STALE", "STALE"),
]


def _keys(case: dict[str, Any], which: str) -> dict[str, list[str]]:
    kid, key = case["kid"], case["key"]
    held = {"right": [key], "wrong": [STRANGER], "rotated": [STRANGER, key]}[which]
    keys = {kid: held, "llm.other": [STRANGER]}
    if kid != oracle.FLAT:
        keys[oracle.FLAT] = [STRANGER]
    return keys


@pytest.mark.parametrize("verifier", sorted(VERIFIERS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_verdicts_follow_the_design(verifier: str, name: str) -> None:
    case = CASES[name]
    wrong = []
    for what, mutate, which, offset, v1, v2 in TABLE:
        if which == "rotated" and case["kid"] == oracle.FLAT:
            continue   # DESIGN §6 key_rotation rotates an agent's key, never the flat token
        message = copy.deepcopy(case["message"])
        if mutate is not None:
            mutate(message)
        got = VERIFIERS[verifier](message, _keys(case, which), message["timestamp"] + offset)
        if got != (v1 if case["version"] == "1" else v2):
            wrong.append((what, got))
    assert not wrong


@pytest.mark.parametrize("verifier", sorted(VERIFIERS))
def test_a_per_agent_key_used_for_another_agent_is_a_mismatch(verifier: str) -> None:
    """Signed by llm.tax's key, but claiming to come from fin.orchestrator."""
    case = CASES["response_agent_key_v2"]
    claimed = {**case["message"], "fromAgentId": "fin.orchestrator"}
    unsigned = copy.deepcopy(claimed)
    del unsigned["headers"]["x-a2a-sig"]
    forged = oracle.sign(unsigned, "llm.tax", case["key"].encode(), "2")
    keys = {"llm.tax": [case["key"]], "fin.orchestrator": [STRANGER]}
    assert VERIFIERS[verifier](forged, keys, forged["timestamp"]) == "KID_MISMATCH"
