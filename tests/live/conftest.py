"""Live tests run real brokers on 127.0.0.1: the embedded amqtt broker always, Mosquitto
when installed (.ci/run installs it; under CI a missing Mosquitto is a failure, not a skip)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from bench.spec.distribution import Distribution
from bench.spec.scenario import SCENARIOS, Scenario, load_scenario

MOSQUITTO = shutil.which("mosquitto") or (Path("/usr/sbin/mosquitto") if Path("/usr/sbin/mosquitto").exists() else None)


def brokers() -> list[object]:
    if MOSQUITTO or os.environ.get("CI"):
        return ["amqtt", "mosquitto"]
    return ["amqtt", pytest.param("mosquitto", marks=pytest.mark.skip(
        reason="mosquitto not installed (apt-get install mosquitto; .ci/run does)"))]


def compressed(name: str, duration_s: float = 6.0, timeout_ms: int | None = None) -> Scenario:
    """A scenario squeezed for wall-clock tests: fault times and gate timeouts scale with
    the duration; requests time out sooner (4 s) so the drain is short — longer where
    people decide at gates: 6 s, or 15 s where some of them think for up to 8 s."""
    s = load_scenario(SCENARIOS / f"{name}.toml")
    gated = s.workload.process_fraction > 0 and s.workload.gate_fraction > 0
    slow = any(kind == "slow" and weight > 0 for kind, weight in s.workload.humans)
    timeout_ms = timeout_ms or (15_000 if gated and slow else 6_000 if gated else 4_000)
    f = min(1.0, duration_s * 1000 / s.duration_ms)
    faults = []
    for spec in s.faults:
        params = dict(spec.params)
        if isinstance(params.get("delay_ms"), Distribution) and params["delay_ms"].kind == "uniform":
            lo, hi = params["delay_ms"].params
            params["delay_ms"] = Distribution("uniform", (lo * f, hi * f))
        faults.append(replace(spec, at_ms=spec.at_ms * f, params=params,
                              duration_ms=None if spec.duration_ms is None else spec.duration_ms * f))
    # The live drain stops at quiescence, so a generous bound costs nothing when all is well
    # and keeps a long-tail task on a loaded machine from ending the run UNKNOWN.
    return replace(s, duration_ms=s.duration_ms * f, drain_ms=timeout_ms + 15_000, faults=tuple(faults),
                   workload=replace(s.workload, request_timeout_ms=timeout_ms,
                                    gate_timeout_ms=max(3_000, int(s.workload.gate_timeout_ms * f))))
