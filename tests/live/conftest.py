"""Live tests run real brokers on 127.0.0.1: the embedded amqtt broker always, Mosquitto
when installed (.ci/run installs it; under CI a missing Mosquitto is a failure, not a skip)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bench.spec.scenario import SCENARIOS, Scenario, load_scenario

MOSQUITTO = shutil.which("mosquitto") or (Path("/usr/sbin/mosquitto") if Path("/usr/sbin/mosquitto").exists() else None)


def brokers() -> list[object]:
    if MOSQUITTO or os.environ.get("CI"):
        return ["amqtt", "mosquitto"]
    return ["amqtt", pytest.param("mosquitto", marks=pytest.mark.skip(
        reason="mosquitto not installed (apt-get install mosquitto; .ci/run does)"))]


def compressed(name: str, duration_s: float = 6.0, timeout_ms: int | None = None) -> Scenario:
    """A shipped scenario squeezed for wall-clock tests (Scenario.squeezed)."""
    return load_scenario(SCENARIOS / f"{name}.toml").squeezed(duration_s, timeout_ms)


#: How long a squeezed partition lasts: past the deployment checker's give-up bound
#: (3 x the bench's 5 s keepalive, GIVE_UP_BOUND_KEEPALIVES) with 2 s to spare, so a broker
#: that never gives the silent node up is FALSE and one that does is TRUE — squeezed like
#: the rest (11 s of a 20 s run) the rule could only say UNKNOWN where no will came in time.
PARTITION_MS = 17_000


def partitioned(duration_s: float) -> Scenario:
    """partition.toml squeezed to `duration_s`, its partition kept long enough to judge."""
    from dataclasses import replace
    scenario = compressed("partition", duration_s)
    return replace(scenario, faults=tuple(replace(f, duration_ms=PARTITION_MS)
                                          for f in scenario.faults))
