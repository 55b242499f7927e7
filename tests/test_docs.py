"""Docs that cannot drift: what the README shows of the tool is what the tool prints today
(issue 34, point 9), and the README stays a front door."""

from __future__ import annotations

import re
from pathlib import Path

from bench.checks import SEED, checkers_for

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _sample_run() -> str:
    """The README's first sample of `a2a-bench run` output (its first fenced block after
    the two commands that starts with the run's header line)."""
    blocks = re.findall(r"```\n(a2a-bench run .*?)```", README, re.S)
    assert blocks, "README shows no sample run"
    return blocks[0]


def test_the_sample_run_lists_every_verdict_the_tool_prints_in_its_order() -> None:
    lines = _sample_run().splitlines()
    start = lines.index("  verdicts:")
    names = [line.split()[0] for line in lines[start + 1:]
             if line.startswith("    ") and not line.startswith("      ")]
    assert names == list(checkers_for(SEED)), \
        "README's sample run shows other verdicts than the tool prints for a quickstart"


def test_the_sample_run_has_the_lines_a_run_prints() -> None:
    sample = _sample_run()
    for shown in ("  requests ", "  latency ms ", "  directory: ", "  verdicts:", "  seed ",
                  "  results: "):
        assert shown in sample, f"README's sample run lacks the {shown.strip()!r} line"


def test_the_readme_is_a_front_door() -> None:
    assert len(README.encode()) <= 15 * 1024, "README.md is over 15 KB: move details to docs/"
    assert README.startswith("# a2a-bench\n\n```sh\npython3 -m venv .venv && ")
    for link in re.findall(r"\]\(((?:docs|examples|scenarios|topologies|bench)/[^)#]*)", README):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_the_checkers_page_counts_the_situations_and_fault_kinds_there_are() -> None:
    """docs/checkers.md says how many situations the coverage table has and how many kinds
    of fault bite: numbers a new situation or fault would otherwise leave behind."""
    from bench.checks.coverage import FAULT_KINDS, SITUATIONS
    page = (ROOT / "docs" / "checkers.md").read_text()
    said = re.search(r"`bench/checks/coverage.py`, (\d+) of them", page)
    assert said and int(said.group(1)) == len(SITUATIONS)
    assert f"the default matrix reaches all {len(SITUATIONS)}," in page
    kinds = re.search(r"for each of the (\d+)\s+kinds of fault", page)
    assert kinds and int(kinds.group(1)) == len(FAULT_KINDS)
