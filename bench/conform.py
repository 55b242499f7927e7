"""`a2a-bench conform CMD`: anyone's implementation of a protocol judged against the
protocol's rules, row by row.

What CMD is held to is its protocol's conform kit (`ProtocolSpec.conform`, a module of the
protocol's package): the role CMD plays, the suite of runs that put it in the situations
the rules are about, the rules that judge it, the broker. CMD is started as every node of
that role (the rest of the topology stays the reference), on the embedded broker, behind
the wire tap, through a short run of each scenario of the suite. Each rule is then PASS
(the checker rules that judge it found cases, and no violation), FAIL (one of them found
a violation: the evidence is its first counterexample, naming the node), or UNKNOWN (no
run exercised it, or the implementation declared it leaves that part out). It is the
compliance report A2A's TCK gives for HTTP, here for MQTT.

A kit with a clause table adds a row for each clause of the role no rule of the bench
observes yet, saying so (or why none can), groups the rows by level, and offers
declarations: a part an implementation may say it leaves out, whose runs are skipped and
whose clauses are not applicable to it. The verdicts judge the whole mesh, the reference
included; a counterexample names the node it is about. This module names no protocol.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.checks import NOT_APPLICABLE, NOTHING, Verdict
from bench.protocols import DEFAULT, ConformRule, Declaration, TableClause, conform_kits
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import EnvironmentFailure, Options
from bench.variants import REFERENCE

#: (scenario, seconds it is squeezed to, what it exercises)
Suite = tuple[tuple[str, float, str], ...]


@dataclass(frozen=True)
class Profile:
    """What conform holds a command to: one role of a protocol's conform kit."""

    name: str                 # the protocol
    role: str                 # the topology role CMD plays
    suite: Suite
    rules: tuple[ConformRule, ...]
    broker: str               # the embedded broker it runs on by default
    #: the clauses of its protocol's table that bind the role (none: its rules are all)
    table: tuple[TableClause, ...] = ()
    #: clauses of the table no rule judges, each with why: not the role's to keep
    #: ("not applicable: ...") or out of every scenario's reach ("never exercised: ...")
    unjudged: tuple[tuple[str, str], ...] = ()
    #: where CMD runs, as the report's first line says it
    setup: str = ""
    #: the document its clauses come from, and its commit (compatibility.json's `spec`)
    document: str = ""
    commit: str | None = None
    #: the levels its rows are grouped by, in order (none: its rows are in rule order and
    #: --level is not its)
    levels: tuple[str, ...] = ()
    #: what an implementation may declare it leaves out (conform's flags)
    declarations: tuple[Declaration, ...] = ()

    def declared(self, names: Collection[str]) -> tuple[Declaration, ...]:
        """Its declarations `names` names, in its order."""
        return tuple(d for d in self.declarations if d.name in names)

    def skipped(self, names: Collection[str]) -> frozenset[str]:
        """The runs of its suite the declarations `names` skip."""
        return frozenset(run for d in self.declared(names) for run in d.runs)


def _rule(r: Any) -> ConformRule:
    """A kit's rule as conform's: a `ConformRule` as it is, a kit's own clause record (id,
    text, judged_by, where, exercised, level) read into one."""
    if isinstance(r, ConformRule):
        return r
    return ConformRule(r.id, r.text, tuple(r.judged_by), tuple(r.where), r.exercised,
                       level=r.level)


def _kits() -> dict[str, Profile]:
    """The conform kit of every protocol that has one (`ProtocolSpec.conform`): one profile
    per role it names, `name` for its first, `name/role` for the others."""
    out: dict[str, Profile] = {}
    for spec, kit in conform_kits():
        table = getattr(kit, "TABLE", ())
        suites, setups = getattr(kit, "SUITES", {}), getattr(kit, "SETUPS", {})
        for i, role in enumerate(kit.ROLES):
            out[spec.name if i == 0 else f"{spec.name}/{role}"] = Profile(
                spec.name, role, suites[role] if role in suites else kit.SUITE,
                tuple(_rule(r) for r in kit.binding(role)), kit.BROKER,
                table=tuple(c for c in table if role in c.binds),
                unjudged=tuple(kit.unjudged(role).items())
                if hasattr(kit, "unjudged") else (),
                setup=setups[role] if role in setups else kit.SETUP.format(role=role),
                document=kit.DOCUMENT, commit=getattr(kit, "COMMIT", None),
                levels=tuple(getattr(kit, "LEVELS", ())),
                declarations=tuple(getattr(kit, "DECLARATIONS", ())))
    return out


PROFILES = _kits()


@dataclass
class Row:
    rule: ConformRule
    status: str          # PASS FAIL UNKNOWN
    evidence: str
    #: the run of the suite the status comes from: where it failed first, else the first
    #: run that judges it (None: no run of the suite judges it)
    scenario: str | None = None

    @property
    def declared_out(self) -> bool:
        """UNKNOWN only because the node declares it leaves that part out."""
        return self.status == "UNKNOWN" and NOT_APPLICABLE in self.evidence

    @property
    def level(self) -> str | None:
        """The RFC 2119 level of the clause the row is about (None: its protocol's table
        gives none)."""
        return self.rule.level

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule.ids, "what": self.rule.what, "status": self.status,
                "evidence": self.evidence, "judgedBy": list(self.rule.judged_by),
                **({"level": self.level} if self.level else {}),
                **({"scenario": self.scenario} if self.scenario else {})}


def _vacuous(v: Verdict) -> bool:
    return v.note.startswith((NOTHING, NOT_APPLICABLE))


#: (run, counterexample) -> whether the case is about the implementation judged (None:
#: every case is: its counterpart is the reference, which the suite holds to every rule)
Owns = Callable[[str, dict[str, Any]], bool]


def judge_rules(runs: dict[str, list[Verdict]],
                rules: tuple[ConformRule, ...] = PROFILES[DEFAULT].rules,
                owns: Owns | None = None) -> list[Row]:
    """One row per protocol rule, from the verdicts of the runs of the suite: FAIL on a
    violation of one of its checker rules in any run; PASS when every run of its `where`,
    and one of its `one_of` if it has any, judged it without one (the `one_of` runs that
    could not decide named); else UNKNOWN, saying which run did not. Given `owns`, only a
    violation whose counterexample is about the implementation judged FAILs its row; one
    about its counterpart leaves the row UNKNOWN, naming it."""
    rows = []
    for rule in rules:
        failed: list[tuple[str, str]] = []       # (run, evidence)
        missing: list[tuple[str, str]] = []
        judged: list[str] = []
        undecided: list[tuple[str, str]] = []    # runs of one_of that could not decide
        for scenario, verdicts in runs.items():
            outcome = _judged(rule, scenario, verdicts, owns)
            if outcome.startswith("FAIL "):
                failed.append((scenario, outcome[5:]))
            elif outcome.startswith(ELSEWHERE):
                missing.append((scenario, outcome))
            elif scenario in rule.where and outcome != "PASS":
                missing.append((scenario, outcome))
            elif scenario in rule.one_of and outcome != "PASS":
                undecided.append((scenario, outcome))
            elif scenario in rule.runs:
                judged.append(scenario)
        missing += [(s, f"{s}: not run") for s in rule.where if s not in runs]
        undecided += [(s, f"{s}: not run") for s in rule.one_of if s not in runs]
        if rule.one_of and not set(judged) & set(rule.one_of):
            missing += undecided      # none of them judged it
        never = rule.exercised is not None and not any(
            v.counts.get(rule.exercised, 0) > 0
            for s in rule.runs for v in runs.get(s, ()) if s in runs)
        if failed:
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            rows.append(Row(rule, "FAIL", failed[0][1] + more, failed[0][0]))
        elif never and not missing:
            rows.append(Row(rule, "UNKNOWN", f"never exercised: no run of {', '.join(rule.runs)}"
                                             f" counted any {rule.exercised.replace('_', ' ')}",
                            rule.runs[0]))
        elif missing:
            rows.append(Row(rule, "UNKNOWN", missing[0][1], missing[0][0]))
        else:
            undecided = [u for u in undecided if u not in missing]
            rows.append(Row(rule, "PASS", "judged in " + ", ".join(judged or rule.runs)
                            + "".join(f"; not in {why}" for _s, why in undecided),
                            (judged or rule.runs or (None,))[0]))
    return rows


#: how a row's evidence begins when the run's violations of it were its counterpart's
ELSEWHERE = "not this implementation's: "


def _judged(rule: ConformRule, scenario: str, verdicts: list[Verdict],
            owns: Owns | None = None) -> str:
    """PASS, "FAIL <evidence>", or why the run did not judge the rule."""
    by_name = {v.name: v for v in verdicts}
    why_not = f"{scenario}: no checker rule of it judged anything"
    judged = False
    for ref in rule.judged_by:
        checker, rule_id = ref.split(".")
        v = by_name.get(checker)
        if v is None or rule_id not in v.rules:
            continue
        counts = v.rules[rule_id]
        if counts["violations"]:
            cases = [c for c in v.counterexamples if c["rule"] == rule_id]
            case = next((c for c in cases if owns is None or owns(scenario, c)), None)
            if case is None and cases:
                return f"{ELSEWHERE}{scenario}: {ref}: {cases[0]['why']}"
            return f"FAIL {scenario}: {ref}: {case['why'] if case else 'violated'}"
        if _vacuous(v):
            why_not = f"{scenario}: {v.note.splitlines()[0]}"
        elif counts["unknown"]:
            why_not = f"{scenario}: {ref} could not decide {counts['unknown']} case(s)"
        else:
            judged = True
    return "PASS" if judged else why_not


def clause_rows(rows: list[Row], profile: Profile,
                declares: Collection[str] = frozenset()) -> list[Row]:
    """The report of a profile with a clause table: its judged rows, then one row per clause
    of the table binding its role that no rule of the bench judges yet; a clause one of
    its declarations the implementation makes (`declares`) names is not applicable; in
    the order of its levels."""
    declared = profile.declared(declares)
    judged = {i.strip() for r in rows for i in r.rule.ids.split(",")}
    out = []
    for r in rows:
        first = r.rule.ids.split(",")[0].strip()
        said = next((d for d in declared if first in d.clauses), None)
        if said is not None:
            r = Row(r.rule, "UNKNOWN", f"{NOT_APPLICABLE}{said.why}"
                                       f"{said.of_rule.format(id=first)}", r.scenario)
        out.append(r)
    unjudged = dict(profile.unjudged)
    for c in profile.table:
        if c.id in judged:
            continue
        said = next((d for d in declared if c.id in d.clauses), None)
        why = f"{NOT_APPLICABLE}{said.why}" if said is not None \
            else unjudged.get(c.id, "not judged: no rule of the bench observes it yet")
        out.append(Row(ConformRule(c.id, c.text, (), (), level=c.level), "UNKNOWN", why))
    if not profile.levels:
        return out
    return sorted(out, key=lambda r: profile.levels.index(r.level or profile.levels[0]))


def conform(command: tuple[str, ...], out: Path, broker: str | None = None,
            say: Callable[[str], None] = print, suite: Suite | None = None,
            profile: str = DEFAULT, declares: Collection[str] = frozenset(),
            only: tuple[str, ...] = (), image: str | None = None) -> list[Row]:
    """Run the profile's suite with `command` in its role — or, given `image`, a container
    of that image (--mode docker: its entrypoint speaks the node-process protocol, as
    docs/PROTOCOL.md says); the rows of the report. The declarations the implementation
    makes (`declares`, of the profile's) skip their runs; `only` names the runs to make (a
    row's replay: one run of the suite, again)."""
    p = PROFILES[profile]
    broker = broker or p.broker
    skipped = p.skipped(declares)
    suite = tuple(s for s in suite or p.suite if s[0] not in skipped
                  and (not only or s[0] in only))
    runs = run_suite(suite, out, broker, say, **(
        {"images": {p.role: image}} if image else {"commands": {p.role: command}}))
    rows = judge_rules(runs, p.rules)
    if p.table:
        rows = clause_rows(rows, p, declares)
    (out / "conform.json").write_text(json.dumps(
        {"command": list(command), **({"image": image} if image else {}),
         "profile": profile, "broker": broker,
         "suite": [s for s, _t, _w in suite],
         "seeds": {s: load_scenario(SCENARIOS / f"{s}.toml").seed for s, _t, _w in suite},
         "rules": [r.to_json() for r in rows]}, indent=2) + "\n")
    return rows


def run_suite(suite: Suite, out: Path, broker: str,
              say: Callable[[str], None] = print,
              commands: dict[str, tuple[str, ...]] | None = None,
              images: dict[str, str] | None = None,
              tap_all: bool = False) -> dict[str, list[Verdict]]:
    """Each run of `suite` into out/<run>, the nodes of each role of `commands` started by
    its command, of each role of `images` containers of its image (--mode docker), the
    rest the reference (behind the wire tap too with `tap_all`: judged from its wire as
    anyone's); each run's verdicts ([] for a run that never came up)."""
    runs: dict[str, list[Verdict]] = {}
    for name, seconds, what in suite:
        scenario = load_scenario(SCENARIOS / f"{name}.toml").squeezed(seconds)
        for role, command in (commands or {}).items():
            scenario = scenario.with_node_command(role, command)
        for role, image in (images or {}).items():
            scenario = scenario.with_node_image(role, image)
        t0 = time.perf_counter()
        try:
            result = run_scenario(scenario, REFERENCE, out / name,
                                  mode="docker" if images else "live",
                                  options=Options(broker=broker, echo_node_stderr=False,
                                                  wire_tap=tap_all))
        except EnvironmentFailure as exc:   # it never came up: this run judges nothing
            runs[name] = []
            say(f"  {name:<24} {time.perf_counter() - t0:5.1f} s  {what}  NOT RUN: {exc}")
        else:
            runs[name] = result.verdicts
            off = [v.name for v in result.verdicts if v.value.value == "false"]
            say(f"  {name:<24} {time.perf_counter() - t0:5.1f} s  {what}"
                + (f"  FALSE: {', '.join(off)}" if off else ""))
        # what the implementation wrote on stderr (its warnings, its tracebacks) is its own:
        # kept in the run's logs/, and pointed at here in one line
        logs = sorted((out / name / "logs").glob("*.log"))
        if logs:
            lines = sum(len(p.read_text(errors="replace").splitlines()) for p in logs)
            say(f"  {'':<24}          stderr: {lines} line{'s' if lines != 1 else ''} in "
                f"{out / name / 'logs'}/ ({', '.join(p.stem for p in logs)})")
    return runs


def render(rows: list[Row], width: int = 100) -> str:
    w = max([26, *(len(r.rule.ids) + 1 for r in rows)])
    lines = [f"{'rule':<{w}} {'status':<8} evidence"]
    level = None
    for r in rows:
        if r.level is not None and r.level != level:
            level = r.level
            lines.append(f"-- {level}")
        evidence = r.evidence if len(r.evidence) <= width else r.evidence[:width - 1] + "…"
        lines.append(f"{r.rule.ids:<{w}} {r.status:<8} {r.rule.what}")
        lines.append(f"{'':<{w}} {'':<8} {evidence}")
    counts = {s: sum(r.status == s for r in rows) for s in ("PASS", "FAIL", "UNKNOWN")}
    lines.append(f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['UNKNOWN']} UNKNOWN "
                 f"of {len(rows)} rules")
    return "\n".join(lines)
