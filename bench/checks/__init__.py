"""Checkers: judge a run from its recorded history alone (DESIGN §7).

A checker is a named family of rules (the shape of elle's anomalies): each rule is one
function, named after what it forbids, whose docstring defines it and cites the seed or
DESIGN clause it comes from. A rule reports typed cases — counterexamples pointing at
history lines — and counts; the checker's verdict is FALSE if any rule found a case,
UNKNOWN if any rule could not decide, else TRUE, and verdicts.json groups the cases by rule.

A checker that crashes yields UNKNOWN (the run goes on), and when a fault of the run never
fired every TRUE becomes UNKNOWN: the property was not tested under the fault it was meant
for. Oracles are written here, from the specification: a checker never imports the core's
tables or replay code to decide what the core should have done.
"""

from __future__ import annotations

import traceback
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bench.core.events import SEED as SEED
from bench.core.events import (
    BrokerDown,
    Event,
    FaultFired,
    FaultStart,
    HarnessError,
    NodeStarted,
    RunInterrupted,
    RunStarted,
    WorkloadStarted,
)
from bench.history import Fold, History
from bench.protocols import DEFAULT, ProtocolSpec, protocols

MAX_EXAMPLES = 5   # counterexamples kept per rule


class Value(StrEnum):
    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Case:
    """One counterexample: the rule it breaks, why, and the history lines that show it."""

    rule: str
    why: str
    seq: tuple[int, ...]
    context: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "why": self.why, "seq": list(self.seq), **self.context}


@dataclass
class Verdict:
    name: str
    value: Value
    counts: dict[str, int] = field(default_factory=dict)
    counterexamples: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value.value, "counts": self.counts,
                "counterexamples": self.counterexamples, "note": self.note,
                "rules": self.rules}


class Collector:
    """Builds one verdict while its rules run: counts, cases per rule, unknowns.

    In an interrupted run (`cut`: the seq of its run_interrupted line), a case that cites a
    line recorded after the interruption is undecided, not a violation: what the deployment
    did while it stopped — nodes stopped one after another, a peer answering one already
    gone — counts against nobody."""

    def __init__(self, name: str, cut: int | None = None,
                 keep: int | None = MAX_EXAMPLES) -> None:
        self.name = name
        self.cut = cut
        self.keep = keep       # counterexamples kept per rule (None: every one)
        self.rule = ""
        self.counts: dict[str, int] = defaultdict(int)
        self.examples: list[Case] = []
        self.violations = 0
        self.unknowns = 0
        self.per_rule: dict[str, dict[str, int]] = {}
        #: (rule, why) -> how many cases it left undecided, in the order first seen
        self.undecided: dict[tuple[str, str], int] = {}

    def enter(self, rule: str) -> None:
        self.rule = rule
        self.per_rule.setdefault(rule, {"violations": 0, "unknown": 0})

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def violation(self, why: str, *events: Event, **context: Any) -> None:
        if self.cut is not None and any(e.seq > self.cut for e in events):
            self.unknown("after_the_interruption")
            return
        self.violations += 1
        self.per_rule[self.rule]["violations"] += 1
        if self.keep is None or self.per_rule[self.rule]["violations"] <= self.keep:
            self.examples.append(Case(self.rule, why, tuple(e.seq for e in events), context))

    def unknown(self, key: str) -> None:
        """This rule could not decide one case (it was still under way when the run ended)."""
        self.unknowns += 1
        self.per_rule[self.rule]["unknown"] += 1
        self.counts[key] += 1
        self.undecided[self.rule, key] = self.undecided.get((self.rule, key), 0) + 1

    def verdict(self, note: str = "") -> Verdict:
        value = Value.FALSE if self.violations else Value.UNKNOWN if self.unknowns else Value.TRUE
        if value is Value.UNKNOWN and not note:
            # an UNKNOWN says why: here, which cases its rules could not decide (a stream
            # still relaying at the end of a run on a loaded machine said nothing at all)
            note = UNDECIDED + ", ".join(f"{rule} {why} ({n})"
                                         for (rule, why), n in self.undecided.items())
        counts = dict(self.counts)
        counts["violations"] = self.violations
        return Verdict(self.name, value, counts, [c.to_json() for c in self.examples], note,
                       dict(self.per_rule))


#: One rule: looks at the history, reports cases and counts into the collector.
RuleFn = Callable[[History, Collector], None]


@dataclass(frozen=True)
class Rule:
    id: str
    fn: RuleFn
    cites: str

    @property
    def definition(self) -> str:
        return " ".join((self.fn.__doc__ or "").split())


def rule(cites: str) -> Callable[[RuleFn], Rule]:
    """Declare a rule: its id is the function's name, `cites` the clause it enforces."""
    def make(fn: RuleFn) -> Rule:
        return Rule(fn.__name__, fn, cites)
    return make


#: The note of an UNKNOWN verdict whose rules judged cases but could not decide some
UNDECIDED = "undecided: "
#: The note of a verdict that judged nothing (no gate, no stream, no request in the run):
#: such a checker says UNKNOWN, never TRUE.
NOTHING = "nothing to judge: "


@dataclass(frozen=True)
class Checker:
    """A named family of rules; `vacuous` says, for a run, why it judged nothing (or None)."""

    name: str
    summary: str
    rules: tuple[Rule, ...]
    vacuous: Callable[[History], str | None] = lambda h: None
    #: the part of the protocol (FEATURES) a node must implement for this checker to have
    #: something to judge
    needs: str | None = None
    #: the protocols whose histories it judges (run_started.protocol): a rule of one
    #: protocol has nothing to say of the other's
    protocols: frozenset[str] = frozenset({SEED})

    def __call__(self, h: History, keep: int | None = MAX_EXAMPLES) -> Verdict:
        """Every rule over the history, `keep` counterexamples of each (None: every one). A
        checker with nothing to judge says UNKNOWN and why: a TRUE that judged nothing
        would be mistaken for a tested one."""
        stops = h.of(RunInterrupted)
        if stops:
            h = h.memo(_cut_short)
        c = Collector(self.name, stops[0].seq if stops else None, keep)
        crashed: list[str] = []
        for r in self.rules:
            c.enter(r.id)
            try:
                r.fn(h, c)
            except Exception as exc:   # this rule could not decide; the others still count
                c.unknown("rule_crashed")
                crashed.append(f"rule {r.id} crashed: {exc!r}\n"
                               f"{traceback.format_exc(limit=3)}")
        empty = self.vacuous(h)
        if empty:
            c.unknowns += 1
        notes = ([NOTHING + empty] if empty else []) + crashed
        return c.verdict("; ".join(notes))


def _cut_short(h: History) -> History:
    """An interrupted history as its rules see it: it ends at the interruption, so what was
    due after it was still under way at the end (one copy, whose facts every checker shares)."""
    return h.ending_at(h.of(RunInterrupted)[0].t_ms)


def folds() -> tuple[type[Fold], ...]:
    """The folds the checkers and the coverage count read (`History.fold`): each
    protocol's own (its checkers' module's `FOLDS`)."""
    return tuple(f for spec in _in_order() for f in getattr(spec.module("checkers"), "FOLDS", ()))


def _in_order() -> list[ProtocolSpec]:
    """The protocols with checkers of their own, the default one first."""
    return [p for p in sorted(protocols().values(), key=lambda p: (p.name != DEFAULT, p.name))
            if p.checkers is not None]


def checkers() -> dict[str, Checker]:
    """Every checker: each protocol's own (its spec's `checkers` module: bench/protocols/),
    the default protocol's first."""
    found = [c for spec in _in_order() for c in spec.module("checkers").CHECKERS]
    # a checker another protocol shares judges its runs too (`ProtocolSpec.shared_checkers`)
    return {c.name: replace(c, protocols=c.protocols | {p.name for p in protocols().values()
                                                        if c.name in p.shared_checkers})
            for c in found}


#: The ops of faults that count as fired once the bench sent them (PROTOCOL.md §2.3: P-OP-5
#: `keys`, P-OP-6 `clock_skew`); the other client-side faults' firings are the node's own
#: `fault_fired`. A node that says it could not carry one out (`harness_error`, its `op`)
#: leaves the fault without effect on it.
FIRED_WHEN_SENT = ("keys", "clock_skew")
#: The parts of the protocol a node may leave out (PROTOCOL.md §2.8), declared in its
#: node_started as `features`; a node that declares none implements them all. ("wire",
#: which a checker may also need, is not the node's: it is whether the run tapped it.)
FEATURES = ("tasks", "relay", "processes", "gates", "requests")
#: The note of a verdict that judged nothing because a node declared that part out.
NOT_APPLICABLE = "not applicable: "


def declared_without(history: History, feature: str) -> set[str]:
    """The nodes whose node_started declares features that leave `feature` out."""
    return {e.node for e in history.of(NodeStarted)
            if e.features is not None and feature not in e.features}


def not_applicable(history: History, verdicts: list[Verdict]) -> dict[str, str]:
    """The verdicts that judged nothing because a node under test declared it leaves out
    what they judge (a Rust executor with no process instances runs no gates), or because
    the run gathered no evidence of their kind (no node behind a wire tap): expected
    UNKNOWN, with the reason in their note, rather than counted as untested."""
    found = checkers()
    out = {}
    for v in verdicts:
        needs = found[v.name].needs if v.name in found else None
        if v.value is not Value.UNKNOWN or not v.note.startswith(NOTHING):
            continue
        if needs == "wire":   # the run gathered no wire evidence: nothing of a node's fault
            out[v.name] = Value.UNKNOWN.value
        elif needs is not None and (lacking := declared_without(history, needs)):
            nodes = ", ".join(sorted(lacking))
            v.note = (f"{NOT_APPLICABLE}{nodes} declare{'s' if len(lacking) == 1 else ''} "
                      f"no {needs} (node_started.features); {v.note}")
            out[v.name] = Value.UNKNOWN.value
    return out


#: An expectation that takes a judged verdict either way: the scenario says the verdict
#: depends on timing it does not control (e.g. what a broker that resends nothing had in
#: flight when a node died), and why, in a comment beside it.
EITHER = "either"


def as_expected(value: str, wanted: str) -> bool:
    """Whether a verdict value ("true", "false", "unknown") is what was expected."""
    return value == wanted or (wanted == EITHER and value in ("true", "false"))


def fault_firings(history: History) -> list[dict[str, Any]]:
    fired: dict[int, int] = defaultdict(int)
    for e in history.of(FaultFired):
        if e.fault_index is not None:
            fired[e.fault_index] += 1
    return [{"index": e.fault_index, "kind": e.fault, "seq": e.seq, "fired": fired[e.fault_index]}
            for e in history.of(FaultStart)]


def workload_origin_ms(history: History) -> float:
    """Where the workload's clock starts on the history's (once every node is up)."""
    started = history.of(WorkloadStarted)
    return started[0].t_ms if started else 0.0


def interrupted_at_s(history: History) -> float:
    """How far into the workload the run was interrupted (or its history ends)."""
    stops = history.of(RunInterrupted)
    end = stops[0].t_ms if stops else history.end_ms
    return max(0.0, end - workload_origin_ms(history)) / 1000


def protocol_of(history: History) -> str:
    """The protocol the history's nodes spoke (the seed documents' unless it says)."""
    started = history.of(RunStarted)
    return (started[0].protocol if started else None) or SEED


def protocol_titles() -> dict[str, str]:
    """What each protocol is called where a report names it."""
    return {name: spec.title for name, spec in protocols().items()}


def protocol_judged(names: Iterable[str]) -> str | None:
    """The protocol whose checkers are exactly `names` (a cell's verdicts), or None."""
    given = set(names)
    return next((p for p in protocols() if given and set(checkers_for(p)) == given), None)


def judging() -> dict[str, frozenset[str]]:
    """Each checker's name and the protocols whose runs it judges: what a scenario's
    [expect] may name (`bench.spec.scenario.load_scenario`'s `known_checks`)."""
    return {k: frozenset(c.protocols) for k, c in checkers().items()}


def checkers_for(protocol: str) -> dict[str, Checker]:
    """The checkers that judge histories of `protocol` (a run_started.protocol)."""
    return {k: v for k, v in checkers().items() if protocol in v.protocols}


def judge(history: History, only: Iterable[str] | None = None,
          keep: int | None = MAX_EXAMPLES) -> list[Verdict]:
    selected = checkers_for(protocol_of(history))
    if only is not None:
        selected = {k: v for k, v in selected.items() if k in set(only)}
    silent_faults = [f for f in fault_firings(history) if f["fired"] == 0]
    # a node that could not carry out a fault's op the bench counts as fired once sent
    # (PROTOCOL.md §2.3) ran another run than planned
    unable = sorted({(e.node, str(e.details["op"])) for e in history.of(HarnessError)
                     if e.details.get("op") in FIRED_WHEN_SENT})
    lost_broker = [d for d in history.of(BrokerDown) if not d.planned]
    interrupted = history.of(RunInterrupted)
    verdicts = []
    for name, check in selected.items():
        try:
            v = check(history, keep)
        except Exception as exc:  # a checker bug is UNKNOWN, never a crashed run
            v = Verdict(name, Value.UNKNOWN, note=f"checker crashed: {exc!r}\n"
                                                  f"{traceback.format_exc(limit=3)}")
        if v.value is Value.TRUE and silent_faults:
            names = ", ".join(f"faults[{f['index']}] {f['kind']}" for f in silent_faults)
            v.value = Value.UNKNOWN
            v.note = (v.note + "; " if v.note else "") + f"never fired: {names}"
        if v.value is Value.TRUE and unable:
            ops = ", ".join(f"{node} op {op!r}" for node, op in unable)
            v.value = Value.UNKNOWN
            v.note = (v.note + "; " if v.note else "") + \
                f"not carried out (harness_error): {ops}"
        if interrupted:
            # what it recorded is judged; a TRUE vouches only for the part that ran
            i = interrupted[0]
            at = f"{interrupted_at_s(history):.1f} s of {i.planned_ms / 1000:.1f} s ({i.how})"
            if v.value is Value.TRUE:
                v.value = Value.UNKNOWN
                why = f"TRUE on what it recorded; the run was interrupted at {at}"
            else:
                why = f"the run was interrupted at {at}"
            v.note = (v.note + "; " if v.note else "") + why
        if v.value is Value.TRUE and lost_broker:
            # what followed tested the broker's absence, not the system: nothing to vouch for
            d = lost_broker[0]
            v.value = Value.UNKNOWN
            v.note = (v.note + "; " if v.note else "") + \
                f"the broker went down at {d.t_ms / 1000:.1f} s, not by a fault ({d.how})"
        verdicts.append(v)
    return verdicts
