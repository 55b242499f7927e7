"""The latency histogram is mergeable across nodes and matrix cells (STYLE: locust's stats)."""

from __future__ import annotations

import math

from bench.metrics import Histogram, exact_quantiles


def test_merging_histograms_equals_one_histogram_of_all_samples() -> None:
    a, b, both = Histogram(), Histogram(), Histogram()
    for v in range(1, 101):
        (a if v % 2 else b).add(float(v))
        both.add(float(v))
    merged = a.merge(b)
    assert merged.counts == both.counts and merged.total == 100 and merged.max_value == 100.0
    for q in (0.5, 0.9, 0.99):
        assert merged.quantile(q) == both.quantile(q)
        exact = exact_quantiles([float(v) for v in range(1, 101)])[f"p{int(q * 100)}"]
        assert exact is not None and abs(merged.quantile(q) - exact) / exact < 0.1  # bucket width


def test_empty_and_zero() -> None:
    assert math.isnan(Histogram().quantile(0.5))
    h = Histogram()
    h.add(0.0)
    assert h.quantile(0.5) == 0.0


def test_the_gate_round_trip_leaves_out_the_persons_think_time() -> None:
    from dataclasses import replace

    from bench.core import events as ev
    from bench.history import History
    from bench.metrics import gate_metrics
    events = [(100, ev.GateOpenSent("g", "pi", "approve", "llm.tax", "orch-1", "m1",
                                    node="exec-1")),
              (104, ev.GateOpened("g", "pi", "approve", "llm.tax", "exec-1", "c1", 20_000,
                                  "reject", "m1", node="orch-1")),
              (5_104, ev.GateDecided("g", "approve", "human", "click", "pi", 5_000,
                                     node="orch-1")),
              (5_110, ev.GateResumed("g", "pi", "g", "approve", "r1", node="exec-1"))]
    h = History(replace(e, seq=i + 1, t_ms=t) for i, (t, e) in enumerate(events))
    m = gate_metrics(h)
    assert m is not None
    assert m["round_trip_ms"]["p50"] == 10.0 and m["think_ms"]["p50"] == 5_000.0
    assert gate_metrics(History([])) is None
