"""Random scenarios of the seed protocol for `a2a-bench explore` (DESIGN §12): a star of
one or two orchestrators and up to six executors in one or two namespaces, a workload mix
of the seed's work (streams, processes and gates, hanging agents, misaddressed requests),
signature keys and modes, and faults from the whole catalogue but another protocol's own.

The draws of a seed stay what they were: a new draw goes after every earlier one."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from bench.faults import CATALOGUE
from bench.protocols import owner_of_fault
from bench.protocols.seed import SPEC
from bench.workload import HUMAN_KINDS

Table = dict[str, Any]
#: explore's fault drawer: (kind, nodes, agents, duration_s) -> the fault's table
DrawFault = Callable[..., Table]

#: MQTT 5 properties the seed's nodes read none of: tampering with them is drawn on the
#: protocols whose agents do.
NOT_ITS = frozenset({"property_tampering"})
#: The faults drawn: every kind of the catalogue but another protocol's own.
FAULTS = tuple(sorted(k for k in CATALOGUE if k not in NOT_ITS
                      and owner_of_fault(k) in (None, SPEC)))
#: Keys explore gives a security fault that could act without them (what the others need is
#: their kind's `keys`): a replay of signed requests says more than one of unsigned ones.
SIGNED_BY_CHOICE = {"replay": "flat"}
KEY_RANK = {"none": 0, "flat": 1, "per-agent": 2}


def draw(rng: random.Random, name: str, fault: DrawFault) -> tuple[Table, Table]:
    """A draft: the scenario's table and its topology's."""
    topology = _topology(rng, name)
    nodes = [n["id"] for n in topology["nodes"]]
    agents = [a for n in topology["nodes"] for a in n["agents"]]
    duration = rng.choice((6, 10, 15, 20, 30))
    workload = _workload(rng, namespaces={n["namespace"] for n in topology["nodes"]
                                          if n["role"] == "executor"})
    auth = _auth(rng)
    faults = []
    for kind in rng.sample(FAULTS, k=rng.choice((0, 1, 1, 1, 2, 2, 3))):
        faults.append(fault(kind, nodes, agents, duration))
        _keys_for(faults[-1], auth)
    scenario: Table = {"name": name, "description": "drawn by a2a-bench explore",
                       "topology": f"{name}-topology.toml", "mode": "sim",
                       "seed": rng.randrange(1, 1_000_000), "duration_s": duration}
    if auth.get("keys", "none") == "none":
        auth.pop("signature", None)     # nothing is signed without keys (refused with it)
    if auth:
        scenario["auth"] = auth
    scenario["workload"] = workload
    if faults:
        scenario["faults"] = sorted(faults, key=lambda f: f["at_s"])
    if any(f["kind"] in ("puback_refused", "property_tampering") for f in faults):
        scenario["mqtt"] = "5"      # reason codes and properties are MQTT 5's
    if any(f["kind"] == "duplicate_client_id" for f in faults):
        # a taken-over client id is a deployment error: the deployment checker must say so
        scenario["expect"] = {"deployment": "false"}
    return scenario, topology


def _keys_for(f: Table, auth: Table) -> None:
    """The scenario's keys raised to what the security fault `f` needs to act at all."""
    kind = CATALOGUE[f["kind"]]
    need = kind.keys({name: f.get(name, p.default) for name, p in kind.params.items()})
    needs = SIGNED_BY_CHOICE.get(f["kind"]) or (need[1][0] if need else None)
    if needs and KEY_RANK[auth.get("keys", "none")] < KEY_RANK[needs]:
        auth.update(keys=needs, mode=auth.get("mode", "loose"),
                    signature=auth.get("signature", 1))


def _topology(rng: random.Random, name: str) -> Table:
    nodes: list[Table] = []
    for i in range(1, rng.choice((1, 1, 1, 2)) + 1):
        # sometimes the orchestrator's node hosts an agent of its own: requests to it are
        # consumed locally, and its streams are watched where they are produced
        local = [f"ops.local{i}"] if rng.random() < 0.3 else []
        nodes.append({"id": f"orch-{i}", "role": "orchestrator", "namespace": "ops",
                      "agents": [f"ops.orchestrator{i}", *local], "scene_groups": ["g1"]})
    k = 0
    for ns in rng.choice((("llm",), ("llm",), ("llm", "fin"))):
        for _ in range(rng.randint(1, 3)):
            k += 1
            nodes.append({"id": f"exec-{k}", "role": "executor", "namespace": ns,
                          "agents": [f"{ns}.tax{k}", f"{ns}.invoice{k}"], "scene_groups": ["g1"]})
    low = rng.choice((0.2, 0.5, 1.0))
    return {"name": f"{name}-topology", "description": "drawn by a2a-bench explore",
            "broker": {"model": rng.choice(("generic", "mosquitto"))},
            "link": {"latency_ms": {"dist": "uniform", "low": low,
                                    "high": low + rng.choice((0.5, 2.0, 10.0))}},
            "nodes": nodes}
def _workload(rng: random.Random, namespaces: set[str]) -> Table:
    w: Table = {"rate_per_s": rng.choice((1, 2, 4, 8)),
                "task_duration_ms": {"dist": "lognormal",
                                     "median": rng.choice((20, 100, 500, 1500)), "sigma": 0.5},
                "request_timeout_ms": rng.choice((3_000, 10_000, 30_000)),
                "conversations": rng.randint(1, 6)}
    if rng.random() < 0.2:
        w["task_failure_rate"] = 0.1
    if rng.random() < 0.25:
        w["unknown_agent_fraction"] = 0.1
    if len(namespaces) > 1 and rng.random() < 0.3:
        w["misaddressed_fraction"] = 0.1
    if rng.random() < 0.3:
        w["explicit_target_fraction"] = 0.3
    if rng.random() < 0.2:
        w["group_event_rate_per_s"] = 1
    if rng.random() < 0.35:
        w |= {"stream_events": rng.randint(3, 15), "thinking_fraction": 0.3,
              "tabs_per_conversation": rng.randint(0, 2),
              "watched_fraction": rng.choice((1.0, 0.5)), "tab_churn": rng.random() < 0.3}
        if rng.random() < 0.3:
            w["no_conversation_fraction"] = 0.2
    if rng.random() < 0.35:
        w |= {"process_fraction": 0.5, "gate_fraction": rng.choice((0.0, 0.5, 1.0)),
              "parallel_branches": rng.randint(0, 3), "subflow_fraction": rng.choice((0.0, 0.3)),
              "step_duration_ms": {"dist": "lognormal", "median": rng.choice((50, 300)),
                                   "sigma": 0.5},
              "step_failure_rate": rng.choice((0.0, 0.2)),
              "humans": {k: rng.choice((0, 1, 3)) for k in HUMAN_KINDS} | {"fast": 1},
              "reject_fraction": rng.choice((0.0, 0.3)),
              "gate_timeout_ms": rng.choice((2_000, 5_000, 20_000)),
              "gate_on_timeout": rng.choice(("reject", "fail"))}
    if rng.random() < 0.15:   # agents that hang: only the executors' watchdog ends their tasks
        w |= {"hang_fraction": rng.choice((0.05, 0.2)),
              "task_timeout_ms": rng.choice((1_000, 3_000, 10_000))}
    return w


def _auth(rng: random.Random) -> Table:
    if rng.random() < 0.5:
        return {}
    keys = rng.choice(("none", "flat", "per-agent"))
    mode = rng.choice(("loose", "audit") if keys == "none" else ("strict", "loose", "audit"))
    return {"mode": mode, "keys": keys, "signature": rng.choice((1, 2))}


