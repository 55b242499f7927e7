"""A fault as a scenario states it: its kind's parameters, validated, and the journal entry
written before it acts. Values only; what a fault does is its script (`bench.faults.scripts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.protocols import owner_of_fault, owners_of_fault_param, protocol
from bench.spec.distribution import Distribution, SpecError, parse_distribution
from bench.spec.topology import Topology

if TYPE_CHECKING:
    from bench.faults.scripts import Context, Script


@dataclass(frozen=True, slots=True)
class Param:
    kind: str   # node | nodes | agent | probability | distribution | bool | ms | offset_ms | count | text | texts | choice
    help: str
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()
    #: (another parameter, its values): this one is read only when that one has one of
    #: them; given otherwise it would change nothing, and is refused
    only_when: tuple[str, tuple[str, ...]] | None = None

    def read_with(self, params: Mapping[str, Any]) -> bool:
        """Whether the fault's script reads this parameter, given the others' `params`."""
        return self.only_when is None or params[self.only_when[0]] in self.only_when[1]


@dataclass(frozen=True, slots=True)
class FaultKind:
    name: str
    summary: str
    params: Mapping[str, Param] = field(default_factory=dict)
    #: What it does, on every substrate (a generator of primitives).
    script: Callable[[FaultSpec, Context], Script] | None = None
    #: A request lost in its window has an explanation (silent_loss reads it from the journal).
    disrupts: bool = False
    #: Whether it acts on the nodes' links (live: they are put behind the fault proxy).
    on_link: Callable[[Mapping[str, Any]], bool] = lambda params: False
    #: What its parameters cannot be together: a sentence naming the keys, or None.
    check: Callable[[Mapping[str, Any]], str | None] = lambda params: None
    #: It acts on what only MQTT 5 has (reason codes, properties): a run on 3.1.1 is
    #: refused it when the scenario loads (its script refuses it too, for a spec built
    #: otherwise).
    mqtt5: bool = False
    #: What it needs of the scenario's keys, given its parameters: (what it does with
    #: them, the `auth.keys` values it can act under), or None (it acts under any). Under
    #: others its script never fires: the scenario is refused it when it loads.
    keys: Callable[[Mapping[str, Any]], tuple[str, tuple[str, ...]] | None] = \
        lambda params: None


#: `auth.keys` values under which envelopes are signed, and under which each agent has a
#: key of its own
SIGNED = ("flat", "per-agent")
AGENT_KEYS = ("per-agent",)


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


def parse_fault(raw: Any, index: int, where: str, topology: Topology,
                catalogue: Mapping[str, FaultKind],
                renamed: Mapping[str, str] | None = None) -> FaultSpec:
    """`where` is "file: faults[i]"; every error names the key and what was expected."""
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where} must be a table with a 'kind'")
    kind_name = raw.get("kind")
    if kind_name not in catalogue:
        raise SpecError(f"{where}.kind={kind_name!r} must be one of {sorted(catalogue)}")
    kind = catalogue[kind_name]
    owner = owner_of_fault(kind_name)
    if owner is not None and owner.name != topology.protocol:
        raise SpecError(f"{where}.kind={kind_name!r} speaks to nodes of {owner.title} only; "
                        f"topology {topology.name!r} speaks {protocol(topology.protocol).title}")
    known = {"kind", "at_s", "duration_s", *kind.params}
    for old, new in (renamed or {}).items():
        if old in raw and new in kind.params:
            raise SpecError(f"{where}.{old} is now called {new} (see `a2a-bench list`)")
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
        params[name] = _value(p, raw[name], key, node_ids, topology)
    for name, p in kind.params.items():
        owners = owners_of_fault_param(kind_name, name)
        foreign = owners and topology.protocol not in {s.name for s in owners}
        if foreign and params[name] != p.default:
            raise SpecError(f"{where}.{name}={raw[name]!r} acts on what nodes of "
                            f"{' and '.join(s.title for s in owners)} do only; topology "
                            f"{topology.name!r} speaks {protocol(topology.protocol).title}")
        if name in raw and not p.read_with(params):
            assert p.only_when is not None
            other, values = p.only_when
            raise SpecError(f"{where}.{name}: read only with {other} = "
                            f"{' or '.join(repr(v) for v in values)}; {other} is "
                            f"{params[other]!r} here (remove it)")
    if (conflict := kind.check(params)) is not None:
        raise SpecError(f"{where}: {conflict}")
    return FaultSpec(index, kind_name, float(at_s) * 1000.0,
                     None if dur is None else float(dur) * 1000.0, params)


def _value(p: Param, v: Any, key: str, node_ids: set[str], topology: Topology) -> Any:
    topo = topology.name
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
        case "count":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"{key}={v!r} must be a whole number >= 1")
            return v
        case "choice":
            if v not in p.choices:
                raise SpecError(f"{key}={v!r} must be one of {list(p.choices)}")
            return v
        case "agent":
            agents = sorted({a for n in topology.nodes for a in n.agents})
            if v not in agents:
                raise SpecError(f"{key}={v!r} must be an agent of topology {topo!r}: "
                                f"{agents[:8]}" + ("..." if len(agents) > 8 else ""))
            return v
        case "text":
            if not isinstance(v, str) or not v:
                raise SpecError(f"{key}={v!r} must be a non-empty string")
            return v
        case "texts":
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise SpecError(f"{key}={v!r} must be a list of non-empty strings")
            unknown = [x for x in v if p.choices and x not in p.choices]
            if unknown or (p.choices and not v):
                raise SpecError(f"{key}={v!r} must be a non-empty list of {list(p.choices)}")
            return tuple(v)
    raise AssertionError(f"unknown parameter kind {p.kind}")
