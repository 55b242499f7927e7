"""The history's text is what `json.dumps(sort_keys=True, separators=(",", ":"))` writes,
byte for byte, though orjson writes it: wherever orjson would write otherwise, the stdlib
does."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.history import dumps_line, event_of, loads_line


def stdlib(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


TRICKY = [
    {"tMs": 1e-05, "x": 1.5e-07, "y": -3e-300, "z": 0.0001},      # orjson: 0.00001, 1.5e-7
    {"a": math.nan, "b": math.inf, "c": -math.inf},                # orjson: null
    {"big": 2 ** 70, "neg": -(2 ** 64)},                           # orjson refuses
    {"s": "caf\u00e9", "t": "\u2028", "u": "\U0001f600"},          # stdlib escapes non-ASCII
    {"del": "a\x7fb", "ctl": "\x00\x1f\n"},                        # DEL: stdlib escapes it
    {"lone": "\ud800"},                                            # orjson refuses
    {"nested": {"z": [1, {"b": 2, "a": 1.0}], "a": None}, "t": (1, 2)},
    {"s": "looks like :0.00001 or ,1e-7 inside a string"},
    {"f": 1e16, "g": 123456789.125, "h": -0.0, "i": 1e22},
]


@pytest.mark.parametrize("value", TRICKY)
def test_tricky_values_are_written_as_the_stdlib_writes_them(value: dict[str, object]) -> None:
    assert dumps_line(value) == stdlib(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_any_line_is_written_as_the_stdlib_writes_it(value: dict[str, object]) -> None:
    assert dumps_line(value) == stdlib(value)


@given(json_values | st.tuples(json_values, json_values))
def test_a_non_finite_number_is_found_wherever_it_is(value: object) -> None:
    """`non_finite` (what tells the fast writers to fall back to the stdlib) says yes
    exactly where the stdlib refuses to write strict JSON."""
    from bench.core.envelope import non_finite
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        assert non_finite(value)
    else:
        assert not non_finite(value)


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_a_line_reads_back_as_the_stdlib_reads_it(value: dict[str, object]) -> None:
    text = stdlib(value)
    assert stdlib(loads_line(text)) == stdlib(json.loads(text))


@pytest.mark.parametrize(("fields", "says"), [
    ({"what": ["undeliverable"]}, "warning: what=['undeliverable'] must be WarningKind"),
    ({"what": "nonsense"}, "warning: what='nonsense' must be WarningKind"),
    ({}, "warning: the field 'what' is missing"),
    ({"what": "undeliverable", "extra": 1}, "warning: unknown field(s) ['extra']"),
])
def test_a_line_that_does_not_fit_is_refused_by_field(fields: dict[str, object],
                                                      says: str) -> None:
    """A value of the wrong shape for an enum field (unhashable included) is a SchemaError
    naming the field, never a TypeError from the reader."""
    with pytest.raises(ValueError, match=re.escape(says)):
        event_of({"seq": 1, "tMs": 0, "node": "n", "kind": "warning", **fields}, "h.jsonl:1")


OLD = Path(__file__).parent / "data" / "history-6bb4693.jsonl"


def test_a_history_written_before_its_values_were_typed_reads_and_writes_the_same() -> None:
    """Lines written by 6bb4693 (before the categorical fields became enums), a few of each
    kind and of each value seen in eight scenarios: each reads into its typed event, its
    categorical fields are enum members, and it writes back the same text."""
    import dataclasses
    from enum import StrEnum

    from bench.core.events import to_fields
    from bench.history import RESERVED
    typed = 0
    for text in OLD.read_text().splitlines():
        line = json.loads(text)
        event = event_of(line, str(OLD))
        assert dumps_line(to_fields(event)) == dumps_line(
            {k: v for k, v in line.items() if k not in RESERVED}), text
        for f in dataclasses.fields(event):
            value = getattr(event, f.name)
            if str(f.type).removesuffix(" | None") in _enum_names() and value is not None:
                assert isinstance(value, StrEnum), (line["kind"], f.name)
                typed += 1
    assert typed > 300


def _enum_names() -> set[str]:
    from bench.core.events import _ENUMS
    return set(_ENUMS)


@pytest.mark.parametrize(("median", "sigma", "seed"), [(2.0, 0.5, 1), (200.0, 0.6, 7),
                                                        (0.5, 2.0, 29)])
def test_a_links_lognormal_draws_are_the_stdlibs(median: float, sigma: float,
                                                 seed: int) -> None:
    """The simulator's inlined lognormal (bench.spec.distribution.lognormal) draws what
    `random.Random.lognormvariate` draws, draw for draw, from the same generator state."""
    import random

    from bench.spec.distribution import lognormal
    ours, theirs = random.Random(seed), random.Random(seed)
    draw = lognormal(math.log(median), sigma)
    assert [draw(ours) for _ in range(20_000)] == \
        [theirs.lognormvariate(math.log(median), sigma) for _ in range(20_000)]


def test_every_recorded_line_is_written_back_with_the_same_fields() -> None:
    """to_fields (written out per class) against lines the recorder wrote: every event of
    the recorded live histories, read and written again, carries the fields it came with."""
    import gzip

    from bench.core.events import kind_of, to_fields
    recorded = sorted((Path(__file__).parent / "data" / "live").glob("*.jsonl.gz"))
    assert recorded
    kinds = set()
    for path in recorded:
        with gzip.open(path, "rt") as fh:
            for text in fh:
                line = loads_line(text)
                e = event_of(line)
                kinds.add(kind_of(e))
                assert kind_of(e) == line["kind"] == e.KIND.value
                assert to_fields(e) == {k: v for k, v in line.items()
                                        if k not in ("seq", "tMs", "node", "kind")}, line
    assert len(kinds) > 40
