"""Hosts made of network namespaces on this machine (`bench.tools.hosts`), each with sshd:
what `--mode hosts` runs are tested on. They need root, iproute2, iptables and sshd; where
these are missing the tests skip saying why — unless A2A_BENCH_REQUIRE_HOSTS is set (.ci/run
sets it: there a missing sshd is a failure)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.tools import hosts as harness


def missing() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not Path(harness.SSHD).exists():
        return "sshd is not installed (apt-get install openssh-server; .ci/run does)"
    for tool in ("ip", "iptables", "ssh"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed"
    return None


def lacking(why: str | None) -> None:
    """Skip saying `why` (None: nothing lacks) — fail where .ci/run installed it all."""
    if why is not None:
        if os.environ.get("A2A_BENCH_REQUIRE_HOSTS"):
            pytest.fail(why)
        pytest.skip(why)


def need_hosts() -> None:
    lacking(missing())


@pytest.fixture(scope="module")
def hosts() -> Iterator[harness.Harness]:
    """Three hosts for the module's tests, removed after them (and checked gone)."""
    need_hosts()
    h = harness.up(3)
    try:
        yield h
    finally:
        harness.down(h)
    assert harness.left(h) == []


def on(h: harness.Harness, i: int, *argv: str) -> str:
    """A command in host i's namespace, as its own root sees it (not through the bench)."""
    return subprocess.run(["ip", "netns", "exec", h.netns(i), *argv], capture_output=True,
                          text=True, check=False).stdout


def traces(h: harness.Harness) -> dict[str, list[str]]:
    """What a run may have left on each host: rules or qdiscs of the bench's, processes
    other than sshd."""
    out: dict[str, list[str]] = {}
    for i in range(1, h.count + 1):
        left = [r for r in on(h, i, "iptables", "-w", "-S").splitlines() if "a2a-bench" in r]
        left += [q for q in on(h, i, "tc", "qdisc", "show").splitlines() if " a2a: " in q]
        pids = subprocess.run(["ip", "netns", "pids", h.netns(i)], capture_output=True,
                              text=True, check=False).stdout.split()
        sshd = Path(h.state / h.name(i) / "sshd.pid").read_text().strip()
        for pid in pids:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            if pid != sshd and not cmd.startswith("sshd:"):
                left.append(f"process {pid}: {cmd[:120]}")
        if left:
            out[h.name(i)] = left
    return out
