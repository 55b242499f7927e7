"""Random scenarios for `a2a-bench explore` (DESIGN §12): a topology from a small family, a
workload mix and a fault schedule drawn from the whole catalogue, security faults included
— each protocol drafts its own (`ProtocolSpec.explore`); the faults' parameters are drawn
here, from the catalogue.

A draft is plain data — the scenario's and its topology's TOML tables as dicts — so what
explore runs is exactly what it writes: the files are loaded by the same loader as any
scenario, and a shrunk draft is one of these dicts with less in it.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.faults import CATALOGUE
from bench.protocols import DEFAULT, ProtocolSpec, protocols
from bench.workload import file_value, idle_keys

Table = dict[str, Any]

#: Faults that take the node down and bring it back (they heal themselves; no window).
SELF_HEALING = frozenset({"restart", "empty_directory", "stale_roster", "broker_restart",
                          "key_rotation"})
#: Narrows the choices of a fault's list parameter: (kind, choices) -> those drawn from
Narrow = Callable[[str, tuple[str, ...]], tuple[str, ...]]


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
    """One draft, of a protocol drawn by the shares its explore module asks for (the
    default protocol gets what the others leave), drawn by that module
    (`ProtocolSpec.explore`)."""
    spec = _protocol(rng.random())
    scenario, topology = spec.module("explore").draw(
        rng, name, lambda kind, nodes, agents, duration, narrow=None: _fault(
            rng, kind, nodes, agents, duration, narrow))
    # what the drawn workload would never read goes (drawn all the same: every later draw
    # of a seed stays what it was)
    workload = scenario.get("workload", {})
    for key in idle_keys(file_value(workload)):
        workload.pop(key, None)
    return Draft(scenario, topology)


def _protocol(r: float) -> ProtocolSpec:
    """The protocol a draft whose first draw was `r` is of."""
    upto = 0.0
    for spec in sorted(protocols().values(), key=lambda p: p.name):
        if spec.name == DEFAULT or spec.explore is None:
            continue
        upto += spec.module("explore").SHARE
        if r < upto:
            return spec
    return protocols()[DEFAULT]


def _fault(rng: random.Random, kind: str, nodes: list[str], agents: list[str], duration: int,
           narrow: Narrow | None = None) -> Table:
    """One fault of the catalogue, its parameters drawn (each optional one left at its
    default two times in five)."""
    at = round(rng.uniform(0.5, duration * 0.7), 1)
    f: Table = {"kind": kind, "at_s": at}
    if kind not in SELF_HEALING and rng.random() < 0.8:
        f["duration_s"] = round(rng.uniform(1.0, max(1.0, duration - at)), 1)
    params = CATALOGUE[kind].params
    for name, p in params.items():
        if not p.required and rng.random() < 0.4:
            continue                       # left at its default
        choices = p.choices if narrow is None or p.kind != "texts" else narrow(kind, p.choices)
        f[name] = _param(rng, kind, name, p.kind, choices, nodes, agents, f)
    # a draft loads as any scenario does: a parameter its drawn method never reads goes, and
    # drawn parameters the kind refuses together go back to their defaults, last drawn
    # first (no further draw: the rest of the draft is as it was)
    def given() -> dict[str, Any]:
        return {n: f.get(n, q.default) for n, q in params.items()}
    drawn = given()
    for name in [n for n, p in params.items() if n in f and not p.read_with(drawn)]:
        del f[name]
    for name in reversed([n for n in params if n in f and not params[n].required]):
        if CATALOGUE[kind].check(given()) is None:
            break
        del f[name]
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
        case "agent":
            return rng.choice(agents)
        case "text":
            return "spare"
        case "texts":
            if choices:
                return rng.sample(choices, k=rng.randint(1, len(choices)))
            return ["spare.helper"]
    raise ValueError(f"explore cannot draw a {pkind!r} parameter ({kind}.{name})")
