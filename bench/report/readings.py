"""What the reports and plots read off a run's history — its latencies, its faults' windows,
when its workload began — with nothing of matplotlib: a matrix's controller reads these for
its report while the plots are drawn in processes of their own (importing matplotlib costs a
second, after the last cell)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.checks.network import nodes_named
from bench.core.vocabulary import ANSWERED_WITH_AN_ERROR
from bench.history import read_jsonl


def read_history(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(run_dir / "history.jsonl"))


def workload_origin_ms(events: Iterable[dict[str, Any]]) -> float:
    """When the workload's clock started (history ms): a scenario's fault `at_s` and its
    duration count from here, so the run plots' time axes do too; what came before is the
    deployment starting (0 if the history has no workload_started, a run cut short early)."""
    return next((float(e["tMs"]) for e in events if e["kind"] == "workload_started"), 0.0)


def fault_windows(events: Iterable[dict[str, Any]]) -> list[tuple[float, float, str, int]]:
    """(start ms, end ms, label, fault index) of each span a fault really acted: for a
    fault that kills nodes, from each crash to that node's next start (its down time, not
    the fault's whole window); for a broker stop, until the broker is back; for the rest,
    from the journal's start to its heal (or the end of the history)."""
    events = list(events)
    end = max((float(e["tMs"]) for e in events), default=0.0)
    starts: dict[int, tuple[float, str]] = {}
    named: dict[int, str] = {}                      # fault index -> " on" the nodes it names
    healed: dict[int, float] = {}
    crashed: dict[str, tuple[float, int]] = {}      # node -> (when, fault index)
    outages: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    broker_down: float | None = None
    for e in events:
        t, kind = float(e["tMs"]), e["kind"]
        if kind == "fault_start":
            starts[int(e["faultIndex"])] = (t, str(e["fault"]))
            named[int(e["faultIndex"])] = _on(e.get("params"))
        elif kind == "fault_healed" and e.get("faultIndex") is not None:
            healed[int(e["faultIndex"])] = t
        elif kind == "node_crashed" and e.get("faultIndex") is not None:
            crashed[e["node"]] = (t, int(e["faultIndex"]))
        elif kind == "node_started" and e["node"] in crashed:
            t0, index = crashed.pop(e["node"])
            outages[index].append((t0, t, e["node"]))
        elif kind == "broker_down" and e.get("planned"):
            broker_down = t
        elif kind == "broker_up" and broker_down is not None:
            active = [i for i, (s, _k) in starts.items() if s <= broker_down
                      and healed.get(i, end) >= broker_down]
            if active:
                outages[active[-1]].append((broker_down, t, "broker"))
            broker_down = None
    for node, (t0, index) in crashed.items():
        outages[index].append((t0, end, node))
    windows = []
    for index, (t0, label) in sorted(starts.items()):
        if outages.get(index):
            windows += [(a, b, f"{label} ({who} down)", index) for a, b, who in outages[index]]
        else:
            windows.append((t0, healed.get(index, end), label + named.get(index, ""), index))
    return windows


def _on(params: object) -> str:
    """ " on exec-1" (or " on exec-1, exec-2"): the nodes a fault's parameters name."""
    named = nodes_named(params)
    return f" on {', '.join(named)}" if named else ""


def fault_starts_ms(events: Iterable[dict[str, Any]]) -> dict[int, float]:
    """fault index -> its `at_s` as the scenario wrote it (ms on the workload's clock)."""
    return {int(e["faultIndex"]): float(e["atMs"]) for e in events
            if e["kind"] == "fault_start" and e.get("atMs") is not None}


def acted(windows: list[tuple[float, float, str, int]], origin_ms: float
          ) -> dict[int, list[str]]:
    """fault index -> each span of `fault_windows` it acted, as "A–B s" on the workload's
    clock, with the window's label (the node it kept down); the plots' legends and the fault
    timeline."""
    out: dict[int, list[str]] = defaultdict(list)
    for t0, t1, label, index in windows:
        out[index].append(f"{label}: {(t0 - origin_ms) / 1000:.1f}–{(t1 - origin_ms) / 1000:.1f} s")
    return out


def latencies(events: Iterable[dict[str, Any]]) -> list[tuple[float, float]]:
    """(settled at ms, latency ms) of every COMPLETED request."""
    return [(float(e["tMs"]), float(e["latencyMs"])) for e in events
            if e["kind"] == "request_settled" and e.get("outcome") == "COMPLETED"
            and e.get("latencyMs") is not None]


#: Outcomes that came with a response (an error): they have a latency like COMPLETED.
ANSWERED = ANSWERED_WITH_AN_ERROR


def answered_otherwise(events: Iterable[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """outcome -> (settled at ms, latency ms) of requests answered with an error."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["kind"] == "request_settled" and e.get("outcome") in ANSWERED \
                and e.get("latencyMs") is not None:
            out[str(e["outcome"])].append((float(e["tMs"]), float(e["latencyMs"])))
    return out


def not_completed(events: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """outcome -> when each request that got no response at all gave up (ms)."""
    out: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if e["kind"] == "request_settled" and e.get("outcome") != "COMPLETED" \
                and e.get("outcome") not in ANSWERED:
            out[str(e.get("outcome"))].append(float(e["tMs"]))
    return out
