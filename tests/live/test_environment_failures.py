"""Failures of the environment, not of the bench, are said in one line — never a Python
traceback (issue 50, point 2): a node that never comes up says which node, what it last
printed, how long the bench waited and where its stderr is, exit 2; conform goes on to its
next run and reports the clauses unjudged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DIES = "import sys\nsys.stdin.readline()\nprint('dying on purpose', file=sys.stderr)\nsys.exit(1)\n"
#: up, silent, until the bench's "stop" line
HANGS = "import sys\nsys.stdin.readline()\nsys.stdin.readline()\n"


def _bench(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *argv], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def test_a_node_that_never_comes_up_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "dies.py").write_text(DIES)
    done = _bench("run", "quickstart", "--node-command", f"executor={sys.executable} dies.py",
                  "--no-plots", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("a2a-bench:")]
    # the wait ends at the first node that ended: which of the three that is, is a race
    assert len(said) == 1 and "(no start-up line; its process ended; its stderr: " \
        in said[0], done.stderr[-2000:]
    assert done.returncode == 2
    assert "dying on purpose" in (tmp_path / "run" / "logs" / "exec-1.log").read_text()


def test_a_node_that_hangs_is_not_said_to_have_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A docker run under load, 2026-12-05: a node whose self-check timed out was said to
    have "its process ended" (the bench had cancelled its watch first, which made it done)."""
    from bench.cli import main
    from bench.substrates.live import deployment
    monkeypatch.setattr(deployment, "SELF_CHECK_TIMEOUT_S", 2.0)
    (tmp_path / "hangs.py").write_text(HANGS)
    monkeypatch.chdir(tmp_path)
    code = main(["run", "quickstart", "--node-command", f"executor={sys.executable} hangs.py",
                 "--no-plots", "--out", str(tmp_path / "run")])
    said = [line for line in capsys.readouterr().err.splitlines()
            if line.startswith("a2a-bench:")]
    assert code == 2
    assert len(said) == 1 and "exec-1 (no start-up line)," in said[0], said


def test_conform_on_an_agent_that_never_comes_up_reports_every_clause_unjudged(
        tmp_path: Path) -> None:
    (tmp_path / "dies.py").write_text(DIES)
    done = _bench("conform", "--profile", "a2a-mqtt", "--no-tokens", "--out",
                  str(tmp_path / "conform"), f"{sys.executable} dies.py", cwd=tmp_path)
    assert "Traceback" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    assert "NOT RUN: node" in done.stdout and " PASS, 0 FAIL, " in done.stdout, done.stdout
    assert done.returncode == 2, done.stdout[-2000:]
