"""Random scenarios of the A2A-over-MQTT profile for `a2a-bench explore`: one or two
requesters, one to three responders (sometimes a pool, sometimes requests with a Message
Expiry Interval), MQTT 5 implied; the faults that act on any MQTT 5 client and its own
hostile requests; and the shrink steps only its drafts have (a handover, bearer tokens).

The draws of a seed stay what they were: a new draw goes after every earlier one."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from bench.protocols.a2a_mqtt.attacks import CASES, TOKEN_CASES, TYPE_CASES

Table = dict[str, Any]
#: explore's fault drawer: (kind, nodes, agents, duration_s, narrow=...) -> the fault's table
DrawFault = Callable[..., Table]
#: One shrink step's edit of a draft's scenario and topology tables, in place; the last
#: argument drops the scenario's fault at an index (and what it alone needed)
Edit = Callable[[Table, Table, Callable[[int], None]], None]

#: How often a draft is of the A2A-over-MQTT profile
SHARE = 0.25
#: The faults drawn: what acts on any MQTT 5 client, and its own (the rest act on the seed
#: protocol's directory, roster, envelopes and signatures).
FAULTS = ("restart", "pause", "partition", "latency", "loss", "broker_restart",
          "qos1_redelivery", "puback_refused", "malformed_request", "property_tampering")


def _narrow(kind: str, choices: tuple[str, ...]) -> tuple[str, ...]:
    """The token cases need an [a2a.oauth] topology (drawn later, with them); and the
    wrong-type ones, added later, are left out: the draws of every seed stay what they
    were."""
    if kind != "malformed_request":
        return choices
    return tuple(c for c in choices if c not in TOKEN_CASES and c not in TYPE_CASES)


def draw(rng: random.Random, name: str, fault: DrawFault) -> tuple[Table, Table]:
    """A draft: the scenario's table and its topology's; long enough for the requester's
    15 s first-reply wait to matter."""
    pooled = rng.random() < 0.3
    nodes: list[Table] = [{"id": f"client-{i}", "role": "requester", "namespace": "billing",
                           "agents": [f"billing.client{i}"]}
                          for i in range(1, rng.choice((1, 1, 2)) + 1)]
    for k in range(1, rng.randint(1, 3) + 1):
        nodes.append({"id": f"tax-{k}", "role": "responder", "namespace": "billing",
                      "agents": [f"billing.tax{k}"], **({"pool": "p1"} if pooled else {})})
    a2a: Table = {"org": "acme"}
    if rng.random() < 0.3:
        a2a["request_expiry_s"] = rng.choice((17, 30))
    low = rng.choice((0.2, 0.5, 1.0))
    topology = {"name": f"{name}-topology", "description": "drawn by a2a-bench explore",
                # Mosquitto's model serves no pool on $a2a/... (a2a_broker FALSE: a known
                # finding, pinned by a2a_pool's [expect.mosquitto]); a pool runs on generic
                "protocol": "a2a-mqtt", "a2a": a2a,
                "broker": {"model": "generic" if pooled
                                       else rng.choice(("generic", "mosquitto"))},
                "link": {"latency_ms": {"dist": "uniform", "low": low,
                                        "high": low + rng.choice((0.5, 2.0, 10.0))}},
                "nodes": nodes}
    duration = rng.choice((10, 20, 30))
    workload: Table = {"rate_per_s": rng.choice((1, 2, 4)),
                       "task_duration_ms": {"dist": "lognormal",
                                            "median": rng.choice((20, 500, 3000)), "sigma": 0.5}}
    if pooled:
        workload["pool_fraction"] = rng.choice((0.5, 1.0))
    if rng.random() < 0.2:
        workload["task_failure_rate"] = 0.1
    if rng.random() < 0.3:
        workload |= {"streaming_fraction": rng.choice((0.5, 1.0)),
                     "stream_events": rng.randint(1, 8)}
    if rng.random() < 0.3:
        workload |= {"get_fraction": rng.choice((0.0, 0.3)),
                     "cancel_fraction": rng.choice((0.1, 0.3)),
                     "follow_up_ms": rng.choice((200, 1000, 5000))}
    ids = [n["id"] for n in nodes]
    agents = [n["agents"][0] for n in nodes]
    faults = [fault(kind, ids, agents, duration, narrow=_narrow) for kind in
              rng.sample(FAULTS, k=rng.choice((0, 1, 1, 2, 2, 3)))]
    scenario: Table = {"name": name, "description": "drawn by a2a-bench explore (A2A over MQTT)",
                       "topology": f"{name}-topology.toml", "mode": "sim",
                       "seed": rng.randrange(1, 1_000_000), "duration_s": duration,
                       "workload": workload}
    if faults:
        scenario["faults"] = sorted(faults, key=lambda f: f["at_s"])
    if pooled:
        # the profile's own hazard (scenario a2a_pool_retry): a pooled retry after a lost —
        # or only late: a task longer than the 15 s first-reply wait, no fault at all
        # (explore, seed 40 run 404) — answer may run the task on another member, every
        # agent keeping every clause
        scenario["expect"] = {"duplicate_execution": "either"}
    if rng.random() < 0.3:     # drawn last: every earlier draw of a seed stays what it was
        workload["multi_turn_fraction"] = rng.choice((0.3, 1.0))
    # later still, the same: bearer tokens (over TLS where the run is live), with the spoilt
    # ones among the hostile cases; a card owner that hands its tasks over to another
    if rng.random() < 0.2:
        a2a["oauth"] = {"token_ttl_s": rng.choice((15, 60, 300))}
        for f in faults:
            if f["kind"] == "malformed_request":
                f["cases"] = [*f.get("cases", CASES),
                              *rng.sample(TOKEN_CASES, k=rng.randint(1, 3))]
    responders = [n for n in nodes if n["role"] == "responder"]
    if not pooled and len(responders) > 1 and rng.random() < 0.3:
        responders[0]["hands_over_to"] = responders[1]["id"]
    return scenario, topology


def shrinks(scenario: Table, topology: Table) -> Iterator[tuple[str, Edit]]:
    """Its own steps, after explore's: each handover dropped, then the bearer tokens."""
    for n in topology["nodes"]:
        if "hands_over_to" in n:
            yield f"{n['id']} without its handover", _no_handover(n["id"])
    if "oauth" in topology.get("a2a", {}):
        yield "without bearer tokens", _drop_oauth


def _no_handover(node: str) -> Edit:
    def edit(_scenario: Table, topology: Table, _drop_fault: Callable[[int], None]) -> None:
        next(m for m in topology["nodes"] if m["id"] == node).pop("hands_over_to")
    return edit


def _drop_oauth(scenario: Table, topology: Table, drop_fault: Callable[[int], None]) -> None:
    """No tokens required, and none of the spoilt ones sent (they need them)."""
    topology["a2a"].pop("oauth")
    faults = scenario.get("faults", [])
    for i in reversed(range(len(faults))):
        f = faults[i]
        if f["kind"] == "malformed_request" and "cases" in f:
            f["cases"] = [c for c in f["cases"] if c not in TOKEN_CASES]
            if not f["cases"]:
                drop_fault(i)
