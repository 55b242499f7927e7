"""Checkers: judge a run from its recorded history alone (DESIGN §7).

Each checker returns a `Verdict` — TRUE, FALSE or UNKNOWN — with counts and up to
`MAX_EXAMPLES` counterexamples, each pointing at history sequence numbers. A checker that
crashes yields UNKNOWN (the run goes on), and when a fault of the run never fired every
TRUE becomes UNKNOWN: the property was not tested under the fault it was meant for.
"""

from __future__ import annotations

import traceback
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

MAX_EXAMPLES = 10


class Value(StrEnum):
    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


@dataclass
class Verdict:
    name: str
    value: Value
    counts: dict[str, int] = field(default_factory=dict)
    counterexamples: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value.value, "counts": self.counts,
                "counterexamples": self.counterexamples, "note": self.note}


class History:
    """The events of one run, indexed for checkers."""

    def __init__(self, events: Iterable[Mapping[str, Any]]) -> None:
        self.events = [dict(e) for e in events]
        self.by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in self.events:
            self.by_kind[e["kind"]].append(e)
        self.end_ms = max((float(e["tMs"]) for e in self.events), default=0.0)
        self.namespace: dict[str, str] = {}           # the node's latest namespace
        self.client_ids: dict[str, str] = {}          # the node's configured client id
        self._boots: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for e in self.of("node_started"):
            self.namespace[e["node"]] = e["namespace"]
            self._boots[e["node"]].append((e["seq"], e["namespace"]))
            self.client_ids[e["node"]] = e["clientId"]

    def namespace_at(self, node: str, seq: int) -> str | None:
        """The node's namespace in the boot that was current at history line `seq`."""
        current = None
        for boot_seq, ns in self._boots.get(node, []):
            if boot_seq > seq:
                break
            current = ns
        return current

    def of(self, kind: str) -> list[dict[str, Any]]:
        return self.by_kind.get(kind, [])

    @property
    def nodes(self) -> set[str]:
        return set(self.namespace)


class Collector:
    """Builds one verdict: count things, note counterexamples, decide."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: dict[str, int] = defaultdict(int)
        self.examples: list[dict[str, Any]] = []
        self.violations = 0
        self.unknowns = 0

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def violation(self, why: str, *events: Mapping[str, Any], **extra: Any) -> None:
        self.violations += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({"why": why, "seq": [e["seq"] for e in events], **extra})

    def unknown(self, key: str) -> None:
        self.unknowns += 1
        self.counts[key] += 1

    def verdict(self, note: str = "") -> Verdict:
        value = Value.FALSE if self.violations else Value.UNKNOWN if self.unknowns else Value.TRUE
        counts = dict(self.counts)
        counts["violations"] = self.violations
        return Verdict(self.name, value, counts, self.examples, note)


Checker = Callable[[History], Verdict]

#: The note of a TRUE that judged nothing (no gate, no stream in the run): printed, so a
#: vacuous pass is never mistaken for a tested one.
NOTHING = "nothing to judge: "


def checkers() -> dict[str, Checker]:
    from bench.checks import auth, delivery, directory, execution, process, relay
    return {
        "duplicate_execution": execution.duplicate_execution,
        "task_lifecycle": execution.task_lifecycle,
        "silent_loss": delivery.silent_loss,
        "targeted_delivery": delivery.targeted_delivery,
        "reply_routing": delivery.reply_routing,
        "qos1_delivery": delivery.qos1_delivery,
        "relay_integrity": relay.relay_integrity,
        "relay_locality": relay.relay_locality,
        "gate_integrity": process.gate_integrity,
        "context_isolation": process.context_isolation,
        "auth_admission": auth.auth_admission,
        "directory_liveness": directory.directory_liveness,
        "deployment": directory.deployment,
    }


def fault_firings(history: History) -> list[dict[str, Any]]:
    fired: dict[int, int] = defaultdict(int)
    for e in history.of("fault_fired"):
        if e.get("faultIndex") is not None:
            fired[int(e["faultIndex"])] += 1
    return [{"index": e["faultIndex"], "kind": e["fault"], "seq": e["seq"],
             "fired": fired[e["faultIndex"]]} for e in history.of("fault_start")]


def judge(history: History, only: Iterable[str] | None = None) -> list[Verdict]:
    selected = checkers()
    if only is not None:
        selected = {k: v for k, v in selected.items() if k in set(only)}
    silent_faults = [f for f in fault_firings(history) if f["fired"] == 0]
    verdicts = []
    for name, check in selected.items():
        try:
            v = check(history)
        except Exception as exc:  # a checker bug is UNKNOWN, never a crashed run
            v = Verdict(name, Value.UNKNOWN, note=f"checker crashed: {exc!r}\n"
                                                  f"{traceback.format_exc(limit=3)}")
        if v.value is Value.TRUE and silent_faults:
            names = ", ".join(f"faults[{f['index']}] {f['kind']}" for f in silent_faults)
            v.value = Value.UNKNOWN
            v.note = (v.note + "; " if v.note else "") + f"never fired: {names}"
        verdicts.append(v)
    return verdicts
