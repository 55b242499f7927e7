"""`python -m bench.tools.reach`: the matrix's branch coverage of what its verdicts judge,
and the comparison CI makes with the main branch's (a line no cell executes, new since)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.tools import reach

TINY = """name = "tiny"
description = "two cells"
[[group]]
name = "g"
scenarios = ["a2a_quickstart", "quickstart"]
variants = ["reference"]
seeds = [1]
"""


def test_a_tiny_matrix_is_measured_per_module_with_its_unreached_lines(tmp_path: Path) -> None:
    """Two simulated cells under coverage.py in a fresh process: the reference requester
    ran (its import lines counted too), the clause table is not measured, and what no
    cell ran is listed by line and by text."""
    (tmp_path / "tiny.toml").write_text(TINY)
    report = reach.measure(tmp_path / "tiny.toml", tmp_path / "out", 1, say=lambda _l: None)
    modules = report["modules"]
    assert report["cells"] == 2 and report["cells_failed"] == 0
    requester = modules["bench/protocols/a2a_mqtt/requester.py"]
    assert 0 < requester["missed"] < requester["statements"]
    assert "bench/protocols/a2a_mqtt/clauses.py" not in modules
    scripts = modules["bench/faults/scripts.py"]    # no fault in either scenario
    assert scripts["unreached"] and len(scripts["missing_lines"]) == scripts["raw_missed"]
    assert scripts["missed"] <= scripts["raw_missed"]     # less what unreached.toml excuses
    assert (tmp_path / "out" / "html" / "index.html").exists()
    assert "total" in reach.render(report)


def test_a_line_unreached_since_the_base_is_named_unless_it_moved_or_is_allowed() -> None:
    base = {"modules": {"bench/faults/scripts.py": {"unreached": ["old = 1"]}}}
    src = (reach.ROOT / "bench/faults/scripts.py").read_text().splitlines()
    n = next(i for i, line in enumerate(src, 1) if line.strip().startswith("def "))
    line = src[n - 1].strip()
    now = {"modules": {"bench/faults/scripts.py": {
        "missing_lines": [n], "missing_arcs": [], "unreached": [line, "old = 1"]}}}
    assert reach.new_unreached(now, base, {}) == [f"bench/faults/scripts.py:{n}: `{line}`"]
    # the same text unreached in the base (it only moved): nothing new
    moved = {"modules": {"bench/faults/scripts.py": {"unreached": [line]}}}
    assert reach.new_unreached(now, moved, {}) == []
    allowed = {"bench/faults/scripts.py": {line: "a reason"}}
    assert reach.new_unreached(now, base, allowed) == []


@pytest.mark.slow
def test_every_branch_the_main_branch_reached_is_still_reached(tmp_path: Path) -> None:
    """The shipped matrices under coverage.py (default and reach: 452 cells, about 75 s alone
    on 2 cores): a line of the reference implementations, the simulated broker or the
    fault code that no cell runs and that the main branch's run (tests/data/reach-baseline.json) ran or did not have — a
    branch added without the scenario that reaches it — fails, named, unless
    tests/data/unreached.toml says why it may stay so. (Shown on a deliberate one,
    2026-12-05: an `if` on a case the fault never sends, named with its body.)"""
    report = reach.measure(list(reach.SHIPPED), tmp_path, 2, say=lambda _line: None)
    assert report["cells_failed"] == 0
    fresh = reach.new_unreached(report, json.loads(reach.BASELINE.read_text()),
                                reach.exceptions())
    assert not fresh, ("run by no cell of the shipped matrices (a scenario that runs each, or "
                       "a line in tests/data/unreached.toml saying why not; "
                       "python -m bench.tools.reach):\n" + "\n".join(fresh))


def test_each_line_allowed_to_stay_unreached_is_a_line_of_its_module_with_a_reason() -> None:
    """tests/data/unreached.toml names lines by their text: one that no longer is in its
    module (edited, moved elsewhere) would allow nothing and hide nothing — it must go."""
    for module, lines in reach.exceptions().items():
        text = {line.strip() for line in (reach.ROOT / module).read_text().splitlines()}
        for line, why in lines.items():
            assert line in text or line == reach.WHOLE, f"{module}: no line {line!r}"
            assert len(why) > 20, f"{module}: {line!r} needs its reason"
