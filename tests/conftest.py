"""Fixtures (plain helpers are in tests/helpers.py) and the suite's settings."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from bench.core.auth import AuthConfig
from bench.substrates.wire import Wire
from tests.helpers import executor, orchestrator

# The suite shares two cores with other workers and with CI: time-based health checks and
# per-example deadlines measure the machine's load, not the code. Example counts stay as
# each test sets them.
settings.register_profile("shared-cores", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-cores")


@pytest.fixture
def pair() -> Callable[..., Wire]:
    """`pair(auth=..., orch=dict(...), exe=dict(...))` -> a started two-node Wire."""

    def make(auth: AuthConfig | None = None, orch: dict[str, object] | None = None,
             exe: dict[str, object] | None = None) -> Wire:
        wire = Wire()
        extra = {"auth": auth} if auth else {}
        wire.add(orchestrator(**{**extra, **(orch or {})}))
        wire.add(executor(**{**extra, **(exe or {})}))
        wire.start("orch-1")
        wire.start("exec-1")
        return wire

    return make


#: The runs on a wall-clock substrate the fast lane keeps: one each (live, docker).
FAST_LANE_RUNS = frozenset({
    "tests/live/test_live.py::test_quickstart_live[inproc-amqtt]",
    "tests/docker/test_docker.py::test_the_quickstart_runs_in_containers_and_leaves_nothing_behind[amqtt]",
})


def _waits_on_wall_clock(item: pytest.Item) -> bool:
    """A live or docker run (tests/live, tests/docker, the live cases of
    test_substrate_faults), but for the fast lane's one run on each substrate."""
    nodeid = item.nodeid
    if nodeid in FAST_LANE_RUNS:
        return False
    return nodeid.startswith(("tests/live/", "tests/docker/")) or (
        nodeid.startswith("tests/test_substrate_faults.py") and "-live-" in nodeid)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow tests (`-m "not slow"` leaves them out: the fast lane, docs/testing.md): the
    wall-clock runs, and those marked so by hand. They are handed out first, so that on
    `-n auto` the longest waits overlap from the start rather than trail at the end (pytest's
    order within each group is kept)."""
    slow = pytest.mark.slow
    for item in items:
        if _waits_on_wall_clock(item):
            item.add_marker(slow)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: at least 10 workers. Most of the suite's wall time is live tests waiting
    on real time (brokers, timeouts, drains), not CPU: on a 2-core machine the suite kept
    the cores a third busy with 6 workers (10 min 34 s) and half busy with 10 (7 min 13 s,
    2026-12-05; docs/findings/suite.md)."""
    import os
    return max(10, os.cpu_count() or 1)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Tests skipped for want of Mosquitto are counted where nobody can miss them."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "mosquitto not installed" in str(getattr(r, "longrepr", ""))]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} tests against Mosquitto were skipped: it is not installed "
            "(Debian: apt-get install mosquitto; .ci/run installs it)", yellow=True)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`-n auto` hands tests out by work stealing: an idle worker takes half of what another
    still has. xdist's default gives the first quarter of the suite out round robin, once —
    the slow tests, handed out first, landed there, and one worker's share of them ran for
    minutes after the others had finished (15 min 54 s against 11 min 9 s, 2026-12-05)."""
    if config.getvalue("dist") == "load":
        from xdist.scheduler import WorkStealingScheduling
        return WorkStealingScheduling(config, log)
    return None


#: Where a failing test's run is kept: pytest keeps only its last three base temp dirs, and a
#: run that failed once on a loaded machine is the evidence the next reader needs.
KEPT = Path(__file__).resolve().parents[1] / "results" / "failed-tests"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing test that made runs under its tmp_path: each run's history, verdicts and
    logs are copied to results/failed-tests/<test>/, and the report says where."""
    outcome = yield
    report = outcome.get_result()
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if report.when != "call" or not report.failed or not isinstance(tmp, Path):
        return
    runs = sorted({p.parent for p in tmp.rglob("history.jsonl")})
    if not runs:
        return
    dest = KEPT / re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-150:]
    for run in runs:
        target = dest / run.relative_to(tmp)
        shutil.copytree(run, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.db", "*.db-*", "broker", "*.png"))
    report.sections.append(("kept", f"the run(s) of this failure: {dest}"))
