"""The docker image's build waits for another apt holding its lock, saying so once, and
gives up after a bound in one line (issue 50, point 2: it ended in a traceback). No engine
and no apt run here: the build's step runner is given what apt prints."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from bench.substrates import EnvironmentFailure
from bench.substrates.docker import image

LOCKED = "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)"


def _apt(outcomes: list[int], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(image.time, "sleep", lambda s: None)

    def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        code = outcomes.pop(0) if outcomes else 100
        return subprocess.CompletedProcess(cmd, code, "", LOCKED if code else "")
    monkeypatch.setattr(image.subprocess, "run", run)
    image._run(["apt-get", "update", "-qq"], "apt-get update", say=said.append)
    return said


def test_an_apt_step_waits_for_the_lock_and_says_so_once(monkeypatch: pytest.MonkeyPatch) -> None:
    said = _apt([100, 100, 0], monkeypatch)
    assert len(said) == 1 and "another apt holds its lock; waiting" in said[0]


def test_a_lock_held_past_the_bound_is_one_environment_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image, "APT_LOCK_WAIT_S", 0.0)
    with pytest.raises(EnvironmentFailure, match="another apt held its lock for 0 s"):
        _apt([100] * 3, monkeypatch)
