"""A run's facts in words, said once: the terminal (`a2a-bench run`, `check`) and report.md
both phrase a run's clock, its outcomes, its latency, its relay, gates, directory, broker
outages and keepalive from here, so the two never tell the same fact two ways.

Reads the typed summary and metrics (`bench.run.Summary`, `bench.metrics.Metrics`);
returns text, prints nothing.
"""

from __future__ import annotations

from bench.metrics import (
    BrokerOutage,
    DirectoryMetrics,
    GateMetrics,
    Metrics,
    Quantiles,
    RelayMetrics,
    WillAfterSilence,
)
from bench.report.summary import Summary
from bench.substrates import substrate


def ms(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def clock(s: Summary) -> str:
    """How long the run ran, and where: simulated seconds per wall second in a simulation."""
    described = substrate(s["mode"])
    if not described.wall_clock:
        return (f"simulated {s['simulated_s']:.1f} s in {s['wall_s']:.2f} s wall = "
                f"{s['sim_s_per_wall_s']:.1f} simulated s per wall s")
    return f"{described.label(dict(s))} for {s['simulated_s']:.1f} s"


def outcomes(m: Metrics) -> str:
    """`COMPLETED 10, NO_RESPONSE 1, 2 unsettled`."""
    unsettled = m["requests"] - sum(m["outcomes"].values())
    return ", ".join([f"{k} {n}" for k, n in m["outcomes"].items()]
                     + ([f"{unsettled} unsettled"] if unsettled > 0 else [])) or "none"


def latency(q: Quantiles) -> str:
    return f"p50 {ms(q['p50'])}  p90 {ms(q['p90'])}  p99 {ms(q['p99'])}  max {ms(q['max'])}"


def duplicates(m: Metrics) -> str:
    return (f"duplicates delivered {m['duplicates_delivered']}, executed "
            f"{m['duplicates_executed']}")


def directory(d: DirectoryMetrics) -> str:
    full = d["full_after_ms"]
    return (f"{d['to_fill_per_node']['mean']:g} announcements per node to fill it (max "
            f"{d['to_fill_per_node']['max']}, {d['announcements']} in all); full "
            f"{ms(full['p50'], 0)} ms after a node's start (p50), {ms(full['max'], 0)} ms (max)")


def relay(r: RelayMetrics) -> str:
    el, ttft = r["event_latency_ms"], r["time_to_first_token_ms"]
    return (f"{r['frames']} frames, {r['deliveries']} deliveries, {r['gaps']} gaps, "
            f"{r['duplicates_dropped']} duplicates dropped; event latency ms p50 "
            f"{ms(el['p50'])} p99 {ms(el['p99'])}; time to first token ms p50 "
            f"{ms(ttft['p50'])} p99 {ms(ttft['p99'])}")


def gates(g: GateMetrics) -> str:
    rt, think = g["round_trip_ms"], g["think_ms"]
    return (f"{g['opened']} opened, {g['decided_by_human']} decided by people, "
            f"{g['decided_by_timeout']} by timeout, {g['already_decided']} extra clicks, "
            f"{g['rehydrated']} rehydrated; round trip without think time ms p50 "
            f"{ms(rt['p50'])} p99 {ms(rt['p99'])} (think p50 {ms(think['p50'], 0)}, "
            f"p99 {ms(think['p99'], 0)})")


def broker_outage(o: BrokerOutage) -> str:
    return (f"down at {o['downMs'] / 1000:.1f} s ({o['how']}"
            + ("" if o["planned"] else "; no fault did this") + "), "
            + (f"back at {o['upMs'] / 1000:.1f} s" if o["upMs"] is not None
               else "not back by the end"))


ONE_WAY = {"to_broker": "its packets to the broker lost, the broker's still reaching it",
           "from_broker": "the broker's packets to it lost, its own still arriving"}


def will_after_silence(w: WillAfterSilence) -> str:
    way = w.get("direction")
    return (f"{w['node']} partitioned for {w['partitionMs'] / 1000:.1f} s"
            + (f" ({ONE_WAY[way]})" if way in ONE_WAY else "") + "; "
            + (f"its will reached a peer after {w['willAfterMs'] / 1000:.1f} s"
               if w["willAfterMs"] is not None else
               "no will before the heal (it never closed the connection the broker still "
               "heard)" if way == "from_broker" and w.get("peersConnected", 1) else
               "no will before the heal (the broker never gave the silent client up)"
               if w.get("peersConnected", 1)
               else "no will seen: no peer stayed connected to see one"))
