"""Docs that cannot drift: what the README shows of the tool is what the tool prints today
(issue 34, point 9), and the README stays a front door."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_readmes_false_sample_is_what_the_tool_prints(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seeded-defect sample (a deterministic simulated run): every line shown is a line
    the tool prints today, and the run exits 1 (newcomer, 2026-12-04: its seqs had moved)."""
    from bench.cli import main
    block = re.search(r"```\n\$ a2a-bench (run [^\n#]*?)\s*(?:#[^\n]*)?\n(.*?)```", README,
                      re.S)
    assert block, "README shows no seeded-defect sample"
    argv = block.group(1).split()
    assert main([*argv, "--out", str(tmp_path / "run")]) == 1
    printed = {line.rstrip() for line in capsys.readouterr().out.splitlines()}
    missing = [line for line in block.group(2).splitlines() if line.rstrip() not in printed]
    assert not missing, f"README's sample shows lines the tool no longer prints: {missing}"


def test_the_readmes_results_folder_is_named_as_the_tool_names_it() -> None:
    from bench.folders import utc_stamp
    shown = re.search(r"results: results/quickstart-reference-s1-(\S+)/ ", README)
    assert shown and re.fullmatch(re.sub(r"\d", r"\\d", utc_stamp()), shown.group(1)), \
        shown and shown.group(1)


def test_the_readme_is_a_front_door() -> None:
    assert len(README.encode()) <= 15_000, "README.md is over 15 KB: move details to docs/"
    assert README.startswith("# a2a-bench\n\n```sh\npython3 -m venv .venv && ")
    for link in re.findall(r"\]\(((?:docs|examples|scenarios|topologies|bench)/[^)#]*)", README):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_the_readmes_test_command_is_what_ci_runs() -> None:
    """Point 5: README line 2 installs the same extras and runs the same pytest command as
    .ci/run, and says what .ci/run adds (each thing a skipped test would need)."""
    line2 = README.splitlines()[4]
    ci = (ROOT / ".ci" / "run").read_text()
    install = re.search(r"pip install -q -e ('[^']*')", line2)
    assert install and f"pip install -q -e {install.group(1)}" in ci, line2
    pytest_cmd = line2.split("&& ")[-1]
    # (the suite, then rmqttd's pinned test once its 40-minute build beside it is done)
    assert pytest_cmd in [line.strip() for line in ci.splitlines()], pytest_cmd
    for need in ("Mosquitto", "Chromium", "docker image", "sshd", "Rust node"):
        assert need in README[:1500], f"README's opening does not say .ci/run adds {need}"


def test_no_page_points_outside_the_repository() -> None:
    """Point 6: a clone has no ../shared/ (the specification stays outside the repo)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    outside = [str(p.relative_to(ROOT)) for p in pages
               if re.search(r"\.\./shared|shared/DESIGN\.md|shared/seeds", p.read_text())]
    assert not outside, outside


def test_the_reference_pages_are_what_the_code_generates() -> None:
    """docs/reference/ and the README's command table are generated from the registries:
    one that differs is named, with the command that regenerates it."""
    from bench.tools.reference import COMMAND, differences
    differ = differences(ROOT)
    assert not differ, (f"{', '.join(differ)}: differs from what the code generates; "
                        f"regenerate with `{COMMAND}`")


def test_the_check_names_a_page_altered_by_one_line(tmp_path: Path) -> None:
    from bench.tools.reference import differences, generated
    for path, text in generated(ROOT).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert differences(tmp_path) == []
    rules = tmp_path / "docs" / "reference" / "rules.md"
    lines = rules.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("| `"))
    lines[at] = lines[at].replace("| `", "| `x", 1)
    rules.write_text("".join(lines))
    (tmp_path / "docs" / "reference" / "events.md").unlink()
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("| `list` |", "| `lst` |"))
    assert differences(tmp_path) == ["docs/reference/rules.md", "docs/reference/events.md",
                                     "README.md"]


def test_every_entry_of_every_registry_has_its_place_in_the_reference() -> None:
    """What the pages are for, held apart from how they are written: each checker and fault
    kind a heading others can link to, each situation, event kind and seeded defect a row."""
    from bench.checks import checkers
    from bench.checks.coverage import SITUATIONS
    from bench.core.events import TYPES
    from bench.faults import CATALOGUE
    from bench.variants import VARIANTS
    ref = ROOT / "docs" / "reference"
    rules, faults, situations, events, variants = (
        (ref / f"{n}.md").read_text()
        for n in ("rules", "faults", "situations", "events", "variants"))
    for name, c in checkers().items():
        assert f"\n### {name}\n" in rules
        assert all(f"| `{r.id}` |" in rules for r in c.rules), name
    assert all(f"\n## {k}\n" in faults for k in CATALOGUE)
    assert all(f"| `{s.name}` |" in situations for s in SITUATIONS)
    assert all(f"\n### {k.value}\n" in events for k in TYPES)
    assert all(f"| `{v}` |" in variants for v in VARIANTS)


#: The docs site: README.md is its front page, docs/ and the scenario and topology formats
#: its pages; the code, the tests and run outputs are not in it (MkDocs 1.6; its config
#: cannot sit inside the folder it builds, so it is written beside the site).
SITE = """site_name: a2a-bench
docs_dir: {root}
site_dir: {site}
strict: true
exclude_docs: |
  /.venv/
  /results/
  !/results/default-matrix.png
  /tests/
  /bench/
  /examples/**/target/
  /*.egg-info/
validation:
  omitted_files: info
  absolute_links: warn
  unrecognized_links: info
  anchors: warn
"""


def _build_site(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    config = out / "mkdocs.yml"
    config.write_text(SITE.format(root=root, site=out / "site"))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "-f", str(config)],
                          capture_output=True, text=True, cwd=out, timeout=300)


def test_the_docs_build_as_a_site_and_a_broken_link_fails_it(tmp_path: Path) -> None:
    """The README and docs/ build with MkDocs, strict: a link to a page or an anchor that
    is not there fails the build (shown on a page written here with one)."""
    pytest.importorskip("mkdocs", reason="mkdocs is a test extra: pip install -e '.[test]'")
    built = _build_site(ROOT, tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "docs" / "checkers" / "index.html").exists()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "index.md").write_text("# x\n\nSee [the page](gone.md) and [here](#nowhere).\n")
    (tmp_path / "b").mkdir()
    failed = _build_site(broken, tmp_path / "b")
    assert failed.returncode != 0 and "gone.md" in failed.stdout + failed.stderr


#: A relative link in a page: [text](target) — its target, without an anchor
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s#]+)(?:#[^)\s]*)?\)")


def test_every_relative_link_in_the_docs_points_at_something_in_the_repository() -> None:
    """Links MkDocs leaves alone (to a folder, to code) checked here: each exists."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             ROOT / "scenarios" / "README.md", ROOT / "topologies" / "README.md",
             *sorted((ROOT / "examples").glob("*/README.md"))]
    missing = [f"{page.relative_to(ROOT)}: {target}" for page in pages
               for target in LINK.findall(page.read_text())
               if not (page.parent / target).exists()]
    assert not missing, missing


# Measurements live in dated findings files (issue 34): a guide says the gist and links to
# docs/findings/, where each figure has its date, its machine and the command that made it.

FINDINGS = ROOT / "docs" / "findings"
#: A date as the findings write it.
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
#: How a command that measures begins.
COMMANDS = ("a2a-bench", "python -m bench", ".venv/bin/", "pytest", "bash .ci/run")


def _commands(page: str) -> list[str]:
    """The lines of the page's fenced blocks and its inline code spans."""
    fenced = [line.strip() for block in re.findall(r"^ *```[^\n]*\n(.*?)^ *```", page, re.S | re.M)
              for line in block.splitlines()]
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"^ *```.*?^ *```", "", page, flags=re.S | re.M))
    return fenced + inline


def test_every_findings_file_says_when_and_how_it_was_measured() -> None:
    pages = sorted(p for p in FINDINGS.glob("*.md") if p.name != "index.md")
    assert pages, "docs/findings/ holds no findings"
    undated = [p.name for p in pages if not DATE.search(p.read_text())]
    assert not undated, f"findings without a date (YYYY-MM-DD): {undated}"
    commandless = [p.name for p in pages
                   if not any(c.startswith(COMMANDS) for c in _commands(p.read_text()))]
    assert not commandless, f"findings without the command that measured them: {commandless}"
    index = (FINDINGS / "index.md").read_text()
    unlisted = [p.name for p in pages if f"]({p.name})" not in index]
    assert not unlisted, f"docs/findings/index.md does not list {unlisted}"


#: The topic guides, whose figures live in docs/findings/ (PROTOCOL.md is a spec: its
#: numbers are requirements; the profile page is generated).
GUIDES = ("performance", "fidelity", "substrates", "brokers", "explore", "own-node", "hosts",
          "identity", "running", "workload", "architecture", "checkers", "testing", "faults",
          "matrices-and-reports")
#: A number followed by a unit of measurement or the simulator's speed, or a ratio (×, not
#: after a word: keepalive×3/2 is a formula).
MEASUREMENT = re.compile(r"\d(?:[\d,.]*\d)?(?: ms\b| µs\b| s | min(?:utes?)?\b|\s?GiB|\s?MiB"
                         r"|\s?MB\b| req/s| requests/s"
                         r"| simulated s(?:econds?)? per wall s)|(?<!\w)×\s?\d")
#: Numbers with a unit that are definitions, not measurements: each a parameter the code
#: or a spec fixes, kept in the guide because the explanation needs its value.
ALLOWED = (
    "reconnect after 1 s then 2 s",      # substrates: the simulated clients' ClientConfig
    "every 6 s ",                        # fidelity, brokers: Mosquitto 2.0's sweep, in its source
    "reordering within 500 ms",          # workload: the reorder window, PROTOCOL W-REL-7
    "coalesced (150 ms,",                # workload: thinking coalescing, PROTOCOL W-REL-3
    "flushed every 5 s ",                # architecture: the ledger's flush, PROTOCOL W-LED-3
    "two 5 s flush intervals",           # checkers: the same flush, in duplicate_execution's row
    "the 500 ms reorder window",         # checkers: W-REL-7, in relay_integrity's row
)
#: identity.md's attack table is the output of `python -m bench.tools.attack_table`,
#: regenerated and compared by tests/test_attacks.py: it cannot drift, so it stays.
GENERATED = re.compile(r"<!-- attack-table -->.*?<!-- /attack-table -->", re.S)


def _blanked(match: re.Match[str]) -> str:
    """A fenced block or the generated table, blanked line for line (numbers stay true) —
    but for a fenced line's comment, which is prose and was where a figure hid (issue 50:
    "# 164 cells in simulation, about 35 s on 2 cores", where there were 262 in 50 s)."""
    return "\n".join(line[line.index(" # ") + 1:] if " # " in line else ""
                     for line in match.group(0).split("\n"))


def test_the_guides_quote_no_measurements() -> None:
    found: list[str] = []
    used: set[str] = set()
    for name in GUIDES:
        page = GENERATED.sub(_blanked, (ROOT / "docs" / f"{name}.md").read_text())
        page = re.sub(r"^ *```.*?^ *```", _blanked, page, flags=re.S | re.M)
        for number, line in enumerate(page.splitlines(), 1):
            text = line + " "          # a figure may end a line: "… 19.9 s" then a break
            for allowed in ALLOWED:
                if allowed in text:
                    used.add(allowed)
                    text = text.replace(allowed, "")
            found += [f"docs/{name}.md:{number}: {m.group(0)!r} in {line.strip()!r}"
                      for m in MEASUREMENT.finditer(text)]
    assert not found, ("figures belong in a dated findings file under docs/findings/, "
                       "linked from the guide:\n" + "\n".join(found))
    assert used == set(ALLOWED), f"allowed, but no longer in any guide: {set(ALLOWED) - used}"
