"""A bounded pass of the fuzzer (python -m bench.tools.fuzz runs longer ones): mutated real
messages of every type, on strict and loose nodes — no input raises, every one is exactly
one recorded outcome, and some get past admission into the handlers."""

from __future__ import annotations

from bench.tools.fuzz import run


def test_bounded_fuzz_finds_no_crash_and_no_silent_input() -> None:
    stats = run(inputs=20_000, seed=7)
    assert stats.inputs == 20_000
    assert stats.crashes == [] and stats.not_one_outcome == []
    assert stats.outcomes.get("inbound_admitted", 0) > 50
    assert stats.outcomes.get("inbound_dropped:MALFORMED", 0) > 1_000
