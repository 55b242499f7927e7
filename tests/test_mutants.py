"""The mutation harness (bench.tools.mutants): its sites and mutants are real, small
changes to bench/core; what counts as caught is a verdict FALSE the reference does not give."""

from __future__ import annotations

import ast

from bench.tools.mutants import REPO, caught, mutated_source, sites


def test_every_kind_of_site_exists_and_each_mutant_is_one_small_change() -> None:
    every = sites()
    assert {s.kind for s in every} == {"swap", "negate", "constant", "drop_command"}
    assert all(s.file.startswith(("bench/core/", "bench/protocols/seed/"))
               and not s.file.endswith(("events.py", "explore.py", "conform.py"))
               for s in every)
    for site in every[::15]:
        original = ast.unparse(ast.parse((REPO / site.file).read_text()))
        mutated = mutated_source(site)
        ast.parse(mutated)
        assert mutated != original, site
        changed = [a for a, b in zip(original.splitlines(), mutated.splitlines(), strict=True)
                   if a != b] if site.kind != "drop_command" else ["dropped"]
        assert len(changed) == 1, (site, changed)


def test_only_a_false_the_reference_does_not_give_counts_as_caught() -> None:
    cell = {"verdicts": {"silent_loss": "false", "deployment": "false", "relay": "unknown"},
            "expect": {"silent_loss": "true", "deployment": "false", "relay": "true"}}
    assert caught({"cells": {"c": cell}}) == ["c: silent_loss"]
    # a verdict its scenario expects either way counts where the unmutated run was not FALSE
    either = {"verdicts": {"duplicate_execution": "false"},
              "expect": {"duplicate_execution": "either"}}
    base = {"cells": {"c": {"verdicts": {"duplicate_execution": "false"}},
                      "d": {"verdicts": {"duplicate_execution": "true"}}}}
    assert caught({"cells": {"c": either}}) == []
    assert caught({"cells": {"c": either, "d": either}}, base) == ["d: duplicate_execution"]


def test_a_site_is_found_again_after_an_edit_moves_it() -> None:
    """--again finds an earlier record's site by what it changes and its line's text, not
    by a line number or walk index an edit above it has moved."""
    from dataclasses import asdict, replace

    from bench.tools.mutants import find_again
    every = sites()
    site = next(s for s in every if s.kind == "drop_command")
    moved = [replace(s, line=s.line + 7, index=s.index + 3) for s in every]
    assert find_again(moved, asdict(site)) == replace(site, line=site.line + 7,
                                                      index=site.index + 3)
    gone = [s for s in moved if s.text != site.text]
    assert find_again(gone, asdict(site)) is None


def test_every_hand_written_bug_applies_to_the_tree_and_says_what_it_is() -> None:
    """The held-out bugs of tests/data/mutants are diffs against the code they break: one that
    no longer applies (its code moved on) would be counted as nothing at all."""
    import subprocess

    from bench.tools.mutants import describe
    patches = sorted((REPO / "tests/data/mutants").glob("*.patch"))
    assert len(patches) >= 30
    for patch in patches:
        assert describe(patch) != patch.stem, f"{patch.name}: no leading # line saying the bug"
        done = subprocess.run(["patch", "-p1", "--dry-run", "--forward", "--batch", "-d",
                               str(REPO), "-i", str(patch)], capture_output=True, text=True)
        assert done.returncode == 0, f"{patch.name} no longer applies: {done.stdout[-200:]}"
