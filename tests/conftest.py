"""Fixtures (plain helpers are in tests/helpers.py) and the suite's settings."""

from __future__ import annotations

from collections.abc import Callable

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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: at least 6 workers. Most of the suite's wall time is live tests waiting
    on real time (brokers, timeouts, drains), not CPU: on a 2-core machine the live tests
    took 3 min 28 s with 6 workers, and the whole suite 8 min 28 s with 4."""
    import os
    return max(6, os.cpu_count() or 1)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Tests skipped for want of Mosquitto are counted where nobody can miss them."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "mosquitto not installed" in str(getattr(r, "longrepr", ""))]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} tests against Mosquitto were skipped: it is not installed "
            "(Debian: apt-get install mosquitto; .ci/run installs it)", yellow=True)
