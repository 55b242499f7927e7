"""The A2A-over-MQTT clause table: ids unique and well-formed, and the docs page the table
generates is the one checked in (docs that cannot drift)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.protocols.a2a_mqtt.clauses import CLAUSES, clause, page

PAGE = Path(__file__).parent.parent.parent / "docs" / "profiles" / "a2a-mqtt.md"


def test_ids_are_unique_and_stable_in_form() -> None:
    ids = [c.id for c in CLAUSES]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"A2M-[A-Z]+-\d+", i) for i in ids), ids


def test_the_checked_in_page_is_what_the_table_generates() -> None:
    assert PAGE.read_text() == page(), (
        "docs/profiles/a2a-mqtt.md differs from the clause table: regenerate it with "
        "`python -m bench.protocols.a2a_mqtt.clauses > docs/profiles/a2a-mqtt.md`")


def test_an_unknown_clause_is_named() -> None:
    with pytest.raises(KeyError, match="A2M-NOPE-1"):
        clause("A2M-NOPE-1")
