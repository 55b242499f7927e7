"""Random scenarios for `a2a-bench explore` (DESIGN §12): a topology from a small family, a
workload mix and a fault schedule drawn from the whole catalogue, security faults included.

A draft is plain data — the scenario's and its topology's TOML tables as dicts — so what
explore runs is exactly what it writes: the files are loaded by the same loader as any
scenario, and a shrunk draft is one of these dicts with less in it.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from bench.faults import CATALOGUE
from bench.protocols.a2a_mqtt.attacks import CASES, TOKEN_CASES, TYPE_CASES
from bench.workload import HUMAN_KINDS

Table = dict[str, Any]

#: Faults that act on what only the A2A-over-MQTT profile's agents send (MQTT 5 properties,
#: JSON-RPC requests): drawn on its topologies only.
A2A_ONLY = frozenset({"property_tampering", "malformed_request"})
#: The faults drawn on an A2A-over-MQTT topology: what acts on any MQTT 5 client, and its own
#: (the rest act on the seed protocol's directory, roster, envelopes and signatures).
A2A_FAULTS = ("restart", "pause", "partition", "latency", "loss", "broker_restart",
              "qos1_redelivery", "puback_refused", *sorted(A2A_ONLY))
#: How often a draft is of the A2A-over-MQTT profile
A2A_SHARE = 0.25
#: Faults that take the node down and bring it back (they heal themselves; no window).
SELF_HEALING = frozenset({"restart", "empty_directory", "stale_roster", "broker_restart",
                          "key_rotation"})
#: What each security fault needs of the scenario's keys to have anything to do.
NEEDS_KEYS = {"tamper_payload": "flat", "tamper_routing": "flat", "tamper_headers": "flat",
              "replay": "flat", "key_rotation": "per-agent"}
KEY_RANK = {"none": 0, "flat": 1, "per-agent": 2}


@dataclass
class Draft:
    """One scenario and its topology, as TOML tables."""

    scenario: Table
    topology: Table

    def copy(self) -> Draft:
        return Draft(copy.deepcopy(self.scenario), copy.deepcopy(self.topology))

    def size(self) -> dict[str, Any]:
        """What shrinking makes smaller, for the report."""
        return {"faults": len(self.scenario.get("faults", [])),
                "nodes": len(self.topology["nodes"]),
                "duration_s": self.scenario["duration_s"],
                "rate_per_s": self.scenario.get("workload", {}).get("rate_per_s", 2.0),
                "workload_keys": len(self.scenario.get("workload", {})),
                "auth": bool(self.scenario.get("auth"))}


def draw(rng: random.Random, name: str) -> Draft:
    if rng.random() < A2A_SHARE:
        return _draw_a2a(rng, name)
    topology = _topology(rng, name)
    nodes = [n["id"] for n in topology["nodes"]]
    agents = [a for n in topology["nodes"] for a in n["agents"]]
    duration = rng.choice((6, 10, 15, 20, 30))
    workload = _workload(rng, namespaces={n["namespace"] for n in topology["nodes"]
                                          if n["role"] == "executor"})
    auth = _auth(rng)
    faults = [_fault(rng, kind, nodes, agents, duration, auth) for kind in
              rng.sample(sorted(set(CATALOGUE) - A2A_ONLY),
                         k=rng.choice((0, 1, 1, 1, 2, 2, 3)))]
    scenario: Table = {"name": name, "description": "drawn by a2a-bench explore",
                       "topology": f"{name}-topology.toml", "mode": "sim",
                       "seed": rng.randrange(1, 1_000_000), "duration_s": duration}
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
    return Draft(scenario, topology)


def _draw_a2a(rng: random.Random, name: str) -> Draft:
    """A draft of the A2A-over-MQTT profile: one or two requesters, one to three responders
    (sometimes a pool, sometimes requests with a Message Expiry Interval), MQTT 5 implied;
    long enough for the requester's 15 s first-reply wait to matter."""
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
    faults = [_fault(rng, kind, ids, agents, duration, {}) for kind in
              rng.sample(A2A_FAULTS, k=rng.choice((0, 1, 1, 2, 2, 3)))]
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
    return Draft(scenario, topology)


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


def _fault(rng: random.Random, kind: str, nodes: list[str], agents: list[str], duration: int,
           auth: Table) -> Table:
    at = round(rng.uniform(0.5, duration * 0.7), 1)
    f: Table = {"kind": kind, "at_s": at}
    if kind not in SELF_HEALING and rng.random() < 0.8:
        f["duration_s"] = round(rng.uniform(1.0, max(1.0, duration - at)), 1)
    for name, p in CATALOGUE[kind].params.items():
        if not p.required and rng.random() < 0.4:
            continue                       # left at its default
        f[name] = _param(rng, kind, name, p.kind, p.choices, nodes, agents, f)
    needs = NEEDS_KEYS.get(kind)
    if kind == "forged_sender":
        needs = {"flat_token": "flat", "other_agent_key": "per-agent"}.get(f.get("how", ""))
    if needs and KEY_RANK[auth.get("keys", "none")] < KEY_RANK[needs]:
        auth.update(keys=needs, mode=auth.get("mode", "loose"),
                    signature=auth.get("signature", 1))
    return f


def _param(rng: random.Random, kind: str, name: str, pkind: str, choices: tuple[str, ...],
           nodes: list[str], agents: list[str], so_far: Table) -> Any:
    match pkind:
        case "node":
            others = [n for n in nodes if n != so_far.get("node")] or nodes
            return rng.choice(others if name == "impostor" else nodes)
        case "nodes":
            return rng.sample(nodes, k=min(len(nodes), rng.choice((1, 1, 2))))
        case "probability":
            return rng.choice((0.2, 0.5, 1.0))
        case "distribution":
            low = rng.choice((20, 200, 1000))
            return {"dist": "uniform", "low": low, "high": low * rng.choice((2, 5))}
        case "bool":
            return rng.random() < 0.5
        case "ms":
            return rng.choice((200, 1000, 3000))
        case "offset_ms":
            return rng.choice((-1, 1)) * rng.choice((2_000, 60_000, 400_000))
        case "count":
            return rng.choice((1, 5, 20))
        case "choice":
            return rng.choice(choices)
        case "text":
            return rng.choice(agents) if name == "agent" else "spare"
        case "texts":
            if kind == "malformed_request":   # the token cases need an [a2a.oauth] topology
                # (and the wrong-type ones, added later, are left out: the draws of every
                # seed stay what they were)
                choices = tuple(c for c in choices if c not in TOKEN_CASES
                                and c not in TYPE_CASES)
            if choices:
                return rng.sample(choices, k=rng.randint(1, len(choices)))
            return ["spare.helper"]
    raise ValueError(f"explore cannot draw a {pkind!r} parameter ({kind}.{name})")
