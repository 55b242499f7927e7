"""Smaller drafts of a failing draft, most promising first: fewer faults, fewer nodes, a
shorter run, a lower rate, a simpler workload, default auth and fault parameters. Each
candidate is one step smaller; explore keeps the first that still fails with the same
checker and starts over from it, until no candidate fails (a local minimum).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench.explore.draw import Draft
from bench.protocols import DEFAULT, owner_of_role, protocol
from bench.spec.topology import Role
from bench.workload import file_value, idle_keys

#: Workload keys that only add behaviour: without them the workload is simpler.
OPTIONAL_WORKLOAD = ("process_fraction", "gate_fraction", "parallel_branches",
                     "subflow_fraction", "step_duration_ms", "step_failure_rate", "humans",
                     "reject_fraction", "gate_timeout_ms", "gate_on_timeout", "stream_events",
                     "thinking_fraction", "tabs_per_conversation", "watched_fraction",
                     "tab_churn", "group_event_rate_per_s", "unknown_agent_fraction",
                     "misaddressed_fraction", "explicit_target_fraction",
                     "no_conversation_fraction", "task_failure_rate", "hang_fraction",
                     "task_timeout_ms",
                     "conversations", "task_duration_ms", "request_timeout_ms")
MIN_DURATION_S = 2
MIN_RATE = 0.5


def candidates(d: Draft) -> Iterator[tuple[str, Draft]]:
    s = d.scenario
    faults: list[dict[str, Any]] = s.get("faults", [])
    for i in reversed(range(len(faults))):
        yield f"without fault {faults[i]['kind']}", _edit(d, lambda x, i=i: _drop_fault(x, i))
    used = _nodes_named(faults)
    # the last node that asks and the last that answers stay (in a protocol's own words
    # for the roles: a requester and a responder, say)
    askers = [n for n in d.topology["nodes"] if _role(n["role"]) is Role.ORCHESTRATOR]
    doers = [n for n in d.topology["nodes"] if _role(n["role"]) is Role.EXECUTOR]
    for n in reversed(d.topology["nodes"]):
        if n["id"] in used or (n in askers and len(askers) == 1) \
                or (n in doers and len(doers) == 1):
            continue
        yield f"without node {n['id']}", _edit(d, lambda x, node=n["id"]: _drop_node(x, node))
    duration = s["duration_s"]
    last_fault = max((f["at_s"] for f in faults), default=0.0)
    for shorter in sorted({max(MIN_DURATION_S, duration // 2), int(last_fault) + 1}):
        if last_fault < shorter < duration:
            yield f"duration {shorter} s", _edit(d, lambda x, v=shorter: x.scenario.update(
                duration_s=v))
    rate = s.get("workload", {}).get("rate_per_s", 2.0)
    if rate / 2 >= MIN_RATE:
        yield f"rate {rate / 2:g}/s", _edit(d, lambda x: x.scenario["workload"].update(
            rate_per_s=rate / 2))
    for key in OPTIONAL_WORKLOAD:
        if key in s.get("workload", {}):
            yield f"workload without {key}", _edit(d, lambda x, k=key: _drop_workload_key(
                x.scenario["workload"], k))
    if s.get("auth"):
        yield "default auth", _edit(d, lambda x: x.scenario.pop("auth"))
    for i, f in enumerate(faults):
        for key in [k for k in f if k not in ("kind", "at_s")]:
            yield (f"fault {f['kind']} without {key}",
                   _edit(d, lambda x, i=i, k=key: x.scenario["faults"][i].pop(k)))
    if "link" in d.topology:
        yield "default link", _edit(d, lambda x: x.topology.pop("link"))
    # the steps only its protocol's drafts have, last
    own = protocol(d.topology.get("protocol", DEFAULT)).module("explore")
    for what, change in getattr(own, "shrinks", lambda _s, _t: ())(d.scenario, d.topology):
        yield what, _edit(d, lambda x, change=change: change(
            x.scenario, x.topology, lambda i, x=x: _drop_fault(x, i)))


def _drop_workload_key(workload: dict[str, Any], key: str) -> None:
    """Without `key`, and without what only it made read (`NEEDS`: no gates' keys without
    processes)."""
    workload.pop(key)
    for idle in idle_keys(file_value(workload)):
        workload.pop(idle, None)


def _role(name: str) -> Role:
    """The bench's role a topology's role name is (a protocol's own name for it, or the
    bench's)."""
    spec = owner_of_role(name)
    return spec.roles[name] if spec is not None else Role(name)


def _edit(d: Draft, change: Any) -> Draft:
    out = d.copy()
    change(out)
    return out


def _drop_fault(d: Draft, i: int) -> None:
    faults = d.scenario["faults"]
    faults.pop(i)
    if not faults:
        d.scenario.pop("faults")
    if not any(f["kind"] == "duplicate_client_id" for f in faults):
        d.scenario.get("expect", {}).pop("deployment", None)
    if not faults:          # a pooled draft's hazard needs a fault (the A2A profile's drafts)
        d.scenario.get("expect", {}).pop("duplicate_execution", None)
    if not d.scenario.get("expect"):
        d.scenario.pop("expect", None)


def _nodes_named(faults: list[dict[str, Any]]) -> set[str]:
    named: set[str] = set()
    for f in faults:
        for key in ("node", "impostor", "stale_node"):
            if isinstance(f.get(key), str):
                named.add(f[key])
        named.update(f.get("nodes", []))
    return named


def _drop_node(d: Draft, node: str) -> None:
    d.topology["nodes"] = [n for n in d.topology["nodes"] if n["id"] != node]
    for n in d.topology["nodes"]:       # a key that named it goes (a card owner whose
        for key in [k for k, v in n.items() if k != "id" and v == node]:   # delegate went
            n.pop(key)                                                     # serves itself)
    by_node = d.scenario.get("auth", {}).get("signature_by_node", {})
    by_node.pop(node, None)
