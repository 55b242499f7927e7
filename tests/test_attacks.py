"""The attacker and the auth checker: forgeries carry the verdict an honest verifier gives
them, no secret reaches the journal, and docs/identity.md's table of which attacks succeed
(between its attack-table markers) is the measured one."""

from __future__ import annotations

from pathlib import Path

from bench.core.auth import KeyRing, Secret, SignatureVersion
from bench.faults.attacks import forged_request
from bench.tools.attack_table import ATTACKS, measure, table

KEYS = KeyRing(Secret("flat-token-xyz"), {"fin.orchestrator": Secret("k-orch"),
                                          "llm.tax1": Secret("k-tax1")})


def forge(how: str, keys: KeyRing = KEYS):  # type: ignore[no-untyped-def]
    return forged_request(how, 1, 0, victim_agent="fin.orchestrator", victim_node="orch-1",
                          target_node="exec-1", target_agent="llm.tax1", keys=keys,
                          compromised="llm.tax1", now_ms=1_000, prefix="ooder",
                          version=SignatureVersion.V1, max_skew_ms=300_000)


def test_each_forgery_has_the_honest_verdict_and_no_secret_in_its_record() -> None:
    assert {h: forge(h).event.honest_verdict for h in ("unsigned", "flat_token", "other_agent_key")} \
        == {"unsigned": "UNSIGNED", "flat_token": "VERIFIED", "other_agent_key": "KID_MISMATCH"}
    for how in ("unsigned", "flat_token", "other_agent_key"):
        text = repr(forge(how).event)
        assert "flat-token-xyz" not in text and "k-tax1" not in text and "k-orch" not in text


def test_an_attacker_without_the_key_cannot_forge_and_says_so() -> None:
    assert forge("flat_token", KeyRing()) is None
    assert forge("other_agent_key", KeyRing(Secret("t"))) is None


def test_the_identity_doc_table_is_the_measured_one() -> None:
    measured = measure()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "identity.md").read_text()
    assert table(measured) in doc, table(measured)
    strict = measured[("strict", "1")]
    assert strict["forged_sender:unsigned"][2] == 0 and strict["forged_sender:flat_token"][2] > 0
    assert all(v[2] == 0 for col in measured.values() for k, v in col.items()
               if k.startswith("replay"))
    assert measured[("strict", "1")]["replay:stale"][0] > 10   # the window was really passed
    assert {a for a, _ in ATTACKS} == set(strict)
    # the stronger signature is what stops tampering, in every mode that checks
    for mode in ("strict", "loose"):
        assert measured[(mode, "1")]["tamper_payload"][2] > 0
        assert measured[(mode, "2")]["tamper_payload"][1] == 0
        assert measured[(mode, "2")]["tamper_routing"][1] == 0
        assert measured[(mode, "1")]["tamper_headers"][1] > 0    # v1 signs no header
        assert measured[(mode, "2")]["tamper_headers"][1] == 0
