"""The fault catalogue (the nemesis): what can be broken, with which parameters.

Each fault is journaled in the history (`fault_start`) before it takes effect, records
every time it actually does something (`fault_fired`), and is healed at the end of its
window (`fault_healed`). A fault that never fired makes the verdicts UNKNOWN, not TRUE.
What each fault does on a substrate lives beside it (`bench.faults.sim`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.spec.distribution import Distribution, SpecError, parse_distribution
from bench.spec.topology import Topology


@dataclass(frozen=True, slots=True)
class Param:
    kind: str   # node | nodes | probability | distribution | bool | ms | offset_ms | text | texts
    help: str
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FaultKind:
    name: str
    summary: str
    params: Mapping[str, Param] = field(default_factory=dict)


def _node(help: str = "the node it acts on", required: bool = True) -> Param:
    return Param("node", help, required=required)


CATALOGUE: dict[str, FaultKind] = {k.name: k for k in (
    FaultKind("qos1_redelivery", "the broker re-sends delivered QoS1 messages with DUP, "
              "optionally much later (EMQX-style delayed redelivery)", {
                  "probability": Param("probability", "chance that a delivery is re-sent", 0.5),
                  "delay_ms": Param("distribution", "delay before the re-send",
                                    {"dist": "uniform", "low": 50, "high": 2000}),
                  "node": _node("only deliveries to this node (default: all)", required=False),
                  "live_method": Param("choice", "live: replay (a captured PUBLISH is published "
                                       "again after the delay), withhold_puback (the fault proxy "
                                       "drops the node's PUBACKs, then its link: the broker "
                                       "redelivers with DUP) or duplicate_publish (the proxy "
                                       "hands the node a PUBLISH twice, with the probability)",
                                       "replay",
                                       choices=("replay", "withhold_puback", "duplicate_publish"))}),
    FaultKind("double_subscription", "a second MQTT connection in the node subscribes to "
              "the same inbox, so every message arrives twice", {"node": _node()}),
    FaultKind("empty_directory", "the node restarts with an empty roster", {
        "node": _node(), "down_ms": Param("ms", "how long it is down", 500)}),
    FaultKind("stale_roster", "the node restarts in another namespace (its old roster file "
              "still on disk)", {
                  "node": _node(), "namespace": Param("text", "the new namespace", required=True),
                  "agents": Param("texts", "the new agents", required=True),
                  "down_ms": Param("ms", "how long it is down", 500)}),
    FaultKind("restart", "crash the node (what was not committed is lost) and start it again "
              "from its data", {
                  "node": _node(), "down_ms": Param("ms", "how long it is down", 1000),
                  "in_flush_window": Param("bool", "crash just before the ledger's next flush",
                                           False)}),
    FaultKind("broker_restart", "the broker crashes and comes back", {
        "down_ms": Param("ms", "how long it is down", 1000),
        "persistence": Param("bool", "sessions and retained messages survive", True),
        "graceful": Param("bool", "live: stop with SIGTERM so the broker can save its state "
                          "(false: SIGKILL, a crash)", True)}),
    FaultKind("partition", "cut nodes off the broker; connections die after the keepalive",
              {"nodes": Param("nodes", "the nodes cut off", required=True)}),
    FaultKind("latency", "slow the links of nodes down", {
        "nodes": Param("nodes", "the nodes", required=True),
        "latency_ms": Param("distribution", "link latency during the window", required=True)}),
    FaultKind("loss", "lose packets on the links of nodes (TCP retransmits them late)", {
        "nodes": Param("nodes", "the nodes", required=True),
        "probability": Param("probability", "loss probability per packet", required=True)}),
    FaultKind("duplicate_client_id", "a second node connects with the node's client id "
              "(session takeover, seed 002 §11.1 red line 1)", {
                  "node": _node("the node whose client id is reused"),
                  "impostor": _node("the node that reuses it")}),
    FaultKind("forged_sender", "an attacker on the broker sends TASK_REQUESTs claiming the "
              "orchestrator's agent to every executor agent, one round per interval", {
                  "how": Param("choice", "unsigned; flat_token (signed with the shared token "
                               "the attacker holds: the flat-token leak); other_agent_key "
                               "(signed with a compromised executor agent's own key)",
                               "unsigned", choices=("unsigned", "flat_token", "other_agent_key")),
                  "interval_ms": Param("ms", "time between rounds", 1000.0)}),
    FaultKind("replay", "an attacker captures validly signed TASK_REQUESTs and re-publishes "
              "them byte for byte later", {
                  "probability": Param("probability", "share of captured requests replayed", 0.5),
                  "delay_ms": Param("distribution", "how much later",
                                    {"dist": "uniform", "low": 500, "high": 3000})}),
    FaultKind("tamper_payload", "a man in the middle on the node's link alters the payload of "
              "validly signed TASK_REQUESTs in flight, leaving the signature as it was", {
                  "node": _node("the node whose incoming requests are altered"),
                  "probability": Param("probability", "share of requests altered", 1.0)}),
    FaultKind("tamper_routing", "a man in the middle on the node's link retargets validly "
              "signed TASK_REQUESTs in flight to the node's other agent (toAgentId)", {
                  "node": _node("the node whose incoming requests are altered"),
                  "probability": Param("probability", "share of requests altered", 1.0)}),
    FaultKind("clock_skew", "the node's clock runs off by a fixed offset: what it signs carries "
              "its time, and it judges others' timestamps by it", {
                  "node": _node(),
                  "skew_ms": Param("offset_ms", "the offset (negative: behind)", required=True)}),
    FaultKind("key_rotation", "an agent's key is rotated mid-run: every node gets the new key "
              "and accepts the old one for an overlap window, except a stale node that never "
              "gets the new key", {
                  "agent": Param("text", "the agent whose key rotates", required=True),
                  "stale_node": _node("a node left with the old key (default: none)",
                                      required=False),
                  "overlap_ms": Param("ms", "how long the old key is still accepted", 3000.0)}),
    FaultKind("missing_reply_node", "the requester sends TASK_REQUESTs without "
              "headers.replyNodeId (seed D14)", {
                  "node": _node("the requester"),
                  "probability": Param("probability", "share of requests affected", 1.0)}),
)}


@dataclass(frozen=True, slots=True)
class FaultSpec:
    index: int
    kind: str
    at_ms: float
    duration_ms: float | None     # None: until the end of the run
    params: Mapping[str, Any]

    def plain_params(self) -> dict[str, Any]:
        return {k: (v.to_json() if isinstance(v, Distribution) else
                    list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()}

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "at_ms": self.at_ms,
                "duration_ms": self.duration_ms, **self.plain_params()}

    def to_record(self) -> dict[str, Any]:
        """The journal entry written before the fault acts."""
        return {"fault": self.kind, "faultIndex": self.index, "atMs": self.at_ms,
                "durationMs": self.duration_ms, "params": self.plain_params()}


def parse_fault(raw: Any, index: int, where: str, topology: Topology) -> FaultSpec:
    """`where` is "file: faults[i]"; every error names the key and what was expected."""
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where} must be a table with a 'kind'")
    kind_name = raw.get("kind")
    if kind_name not in CATALOGUE:
        raise SpecError(f"{where}.kind={kind_name!r} must be one of {sorted(CATALOGUE)}")
    kind = CATALOGUE[kind_name]
    known = {"kind", "at_s", "duration_s", *kind.params}
    extra = sorted(set(raw) - known)
    if extra:
        raise SpecError(f"{where}: unknown key(s) {extra} for kind={kind_name!r} "
                        f"(expected some of {sorted(known)})")
    at_s = raw.get("at_s", 0)
    if isinstance(at_s, bool) or not isinstance(at_s, (int, float)) or at_s < 0:
        raise SpecError(f"{where}.at_s={at_s!r} must be a number of seconds >= 0")
    dur = raw.get("duration_s")
    if dur is not None and (isinstance(dur, bool) or not isinstance(dur, (int, float)) or dur <= 0):
        raise SpecError(f"{where}.duration_s={dur!r} must be a number of seconds > 0")
    node_ids = {n.id for n in topology.nodes}
    params: dict[str, Any] = {}
    for name, p in kind.params.items():
        key = f"{where}.{name}"
        if name not in raw:
            if p.required:
                raise SpecError(f"{key} is required ({p.help})")
            value = p.default
            if p.kind == "distribution" and value is not None:
                value = parse_distribution(value, key)
            params[name] = value
            continue
        params[name] = _value(p, raw[name], key, node_ids, topology.name)
    return FaultSpec(index, kind_name, float(at_s) * 1000.0,
                     None if dur is None else float(dur) * 1000.0, params)


def _value(p: Param, v: Any, key: str, node_ids: set[str], topo: str) -> Any:
    match p.kind:
        case "node":
            if v not in node_ids:
                raise SpecError(f"{key}={v!r} must be a node of topology {topo!r}: {sorted(node_ids)[:8]}"
                                + ("..." if len(node_ids) > 8 else ""))
            return v
        case "nodes":
            if not isinstance(v, list) or not v or any(x not in node_ids for x in v):
                raise SpecError(f"{key}={v!r} must be a non-empty list of nodes of topology {topo!r}")
            return tuple(v)
        case "probability":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise SpecError(f"{key}={v!r} must be within [0, 1]")
            return float(v)
        case "distribution":
            return parse_distribution(v, key)
        case "bool":
            if not isinstance(v, bool):
                raise SpecError(f"{key}={v!r} must be true or false")
            return v
        case "offset_ms":
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise SpecError(f"{key}={v!r} must be a number of milliseconds (negative: behind)")
            return float(v)
        case "ms":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise SpecError(f"{key}={v!r} must be a number of milliseconds >= 0")
            return float(v)
        case "choice":
            if v not in p.choices:
                raise SpecError(f"{key}={v!r} must be one of {list(p.choices)}")
            return v
        case "text":
            if not isinstance(v, str) or not v:
                raise SpecError(f"{key}={v!r} must be a non-empty string")
            return v
        case "texts":
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise SpecError(f"{key}={v!r} must be a list of non-empty strings")
            return tuple(v)
    raise AssertionError(f"unknown parameter kind {p.kind}")
