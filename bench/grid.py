"""`a2a-bench grid`: which A2A-over-MQTT implementations work with which, on which brokers.

A cell is one broker, one responder and one requester: the reference, or anyone's by its
command line. The cell runs the conform suites of both roles once (the responder's, then
the requester's runs the first has not made), every responder of the topology started by
the responder's command and the requester by the requester's, and judges each role's
clauses as `conform` does (from the profile's conform kit, `ProtocolSpec.conform`): one
table per role, every agent behind the wire tap, the reference too. A violation counts
against the side its counterexample is about (a node one of its history lines is of, or
its words name); one about the other side only leaves the row UNKNOWN, naming it, so a
requester's fault never shows as its responder's. Each cell's folder holds its runs and,
per role, compatibility.json, junit.xml and conform.html (bench/certify.py); the grid's
own folder grid.json, grid.md and grid.html, each cell linking to its evidence.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import certify
from bench.checks import Verdict, judge
from bench.conform import PROFILES, Row, clause_rows, judge_rules, run_suite
from bench.history import read_jsonl
from bench.protocols import protocol
from bench.run import read_for_judging
from bench.spec.brokers import BEHAVIOURS
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates.live import EMBEDDED

#: the protocol whose implementations a cell pairs
PROTOCOL = "a2a-mqtt"
#: the roles of a cell (its conform kit's), each with the conform profile that holds it
ROLES = {p.role: key for key, p in PROFILES.items() if p.name == PROTOCOL}
REFERENCE = "reference"
FORMAT = "a2a-bench/grid/1"


def mqtt5_brokers() -> tuple[str, ...]:
    """The embedded brokers that speak MQTT 5 (the profile needs it): the grid's default."""
    return tuple(b for b in EMBEDDED if BEHAVIOURS[b].v5 is not None)


#: what an implementation may declare it leaves out, as conform's flags say it (its conform
#: kit's declarations): the clauses it names are then not applicable to it, in every cell
DECLARATIONS = tuple(d.name for d in PROFILES[PROTOCOL].declarations)


@dataclass(frozen=True)
class Impl:
    """One implementation of a role: the reference (no command) or anyone's, with what it
    declares it leaves out (DECLARATIONS) and the version it says it is."""

    name: str
    command: tuple[str, ...] = ()
    declares: frozenset[str] = frozenset()
    version: str | None = None

    @property
    def flag(self) -> str:
        return f"{self.name}={shlex.join(self.command)}"

    @property
    def flags(self) -> tuple[tuple[str, str], ...]:
        """Its declarations and version as the grid command line gives them."""
        return (*((("--declare", f"{self.name}={','.join(sorted(self.declares))}"),)
                  if self.declares else ()),
                *((("--impl-version", f"{self.name}={self.version}"),) if self.version else ()))


@dataclass
class Cell:
    broker: str
    responder: Impl
    requester: Impl
    out: Path
    rows: dict[str, list[Row]] = field(default_factory=dict)    # role -> its table

    @property
    def name(self) -> str:
        return self.out.name

    def impl(self, role: str) -> Impl:
        return self.responder if role == "responder" else self.requester

    def counts(self, role: str) -> dict[str, int]:
        return {s: sum(certify.status(r) == s for r in self.rows[role])
                for s in ("PASS", "FAIL", "UNKNOWN", "NOT_APPLICABLE")}

    def exit_code(self, role: str) -> int:
        return certify.exit_code(self.rows[role], strict=False)


def suite(only: tuple[str, ...] = ()) -> tuple[tuple[str, float, str], ...]:
    """Both roles' runs, each once: the responder's suite, then the requester's others."""
    runs: dict[str, tuple[str, float, str]] = {}
    for profile in ROLES.values():
        for s in PROFILES[profile].suite:
            runs.setdefault(s[0], s)
    return tuple(s for name, s in runs.items() if not only or name in only)


def _owner(out: Path, role: str) -> Callable[[str, dict[str, Any]], bool]:
    """Whether a run's counterexample is about a node of `role`: one of its history lines
    is that node's, or its words name it; else, if it names a node of the other side, it
    is not; a case about neither (the bench's own lines only) counts against both."""
    nodes: dict[str, dict[int, str]] = {}
    sides: dict[str, tuple[set[str], set[str]]] = {}

    def owns(run: str, case: dict[str, Any]) -> bool:
        if run not in nodes:
            nodes[run] = {int(x["seq"]): str(x["node"])
                          for x in read_jsonl(out / run / "history.jsonl")}
            topology = load_scenario(SCENARIOS / f"{run}.toml").topology
            plays = protocol(PROTOCOL).roles[role]
            sides[run] = ({n.id for n in topology.nodes if n.role is plays},
                          {n.id for n in topology.nodes if n.role is not plays})
        mine, theirs = sides[run]
        why = str(case.get("why", ""))
        about = {nodes[run].get(int(s), "") for s in case.get("seq") or ()} | {
            n for n in mine | theirs if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", why)}
        return bool(about & mine) or not about & theirs

    return owns


def _every_case(run: Path, verdicts: list[Verdict]) -> list[Verdict]:
    """The run's verdicts with every counterexample, not the first few of each rule: which
    side a violation is about is read from its case, and a side's case past the few a
    verdict keeps would otherwise leave its row UNKNOWN, naming the other side."""
    kept: dict[tuple[str, str], int] = {}
    for v in verdicts:
        for c in v.counterexamples:
            kept[v.name, c["rule"]] = kept.get((v.name, c["rule"]), 0) + 1
    if all(n["violations"] <= kept.get((v.name, rule), 0)
           for v in verdicts for rule, n in v.rules.items()):
        return verdicts
    return judge(read_for_judging(run / "history.jsonl"), [v.name for v in verdicts],
                 keep=None)


def run_cell(cell: Cell, only: tuple[str, ...], say: Callable[[str], None]) -> Cell:
    """Make the cell's runs and judge both roles from them."""
    commands = {role: cell.impl(role).command for role in ROLES if cell.impl(role).command}
    # every side behind the wire tap: the reference is judged from its wire as anyone's
    runs = run_suite(suite(only), cell.out, cell.broker, say, commands=commands, tap_all=True)
    runs = {name: _every_case(cell.out / name, verdicts) for name, verdicts in runs.items()}
    for role, key in ROLES.items():
        p = PROFILES[key]
        mine = {s for s, _t, _w in p.suite}
        rows = judge_rules({k: v for k, v in runs.items() if k in mine}, p.rules,
                           owns=_owner(cell.out, role))
        cell.rows[role] = clause_rows(rows, p, cell.impl(role).declares)
    return cell


def grid(brokers: tuple[str, ...], responders: tuple[Impl, ...], requesters: tuple[Impl, ...],
         out: Path, only: tuple[str, ...] = (),
         say: Callable[[str], None] = print) -> list[Cell]:
    """Every cell, its tables written beside its runs; grid.json, grid.md, grid.html."""
    cells = []
    for broker in brokers:
        for r in responders:
            for q in requesters:
                cell = Cell(broker, r, q, out / f"{broker}--{r.name}--{q.name}")
                say(f"{cell.name}: responder {r.name}, requester {q.name}, on {broker}")
                cells.append(run_cell(cell, only, say))
                _write_cell(cell, only)
    write(cells, out)
    return cells


def again(cell: Cell) -> tuple[str, ...]:
    """The grid command that makes this cell's runs again, this cell alone (less `--only
    RUN`): a side not given is the reference, and --no-reference keeps it off the other."""
    flags = [f for role in ROLES for f in
             ((f"--{role}", cell.impl(role).flag) if cell.impl(role).command else ())]
    # (a responder and a requester of one name declare once)
    flags += [f for pair in dict.fromkeys(p for role in ROLES for p in cell.impl(role).flags)
              for f in pair]
    return ("a2a-bench", "grid", "--broker", cell.broker, "--no-reference", *flags)


def _write_cell(cell: Cell, only: tuple[str, ...]) -> None:
    seeds = {s: load_scenario(SCENARIOS / f"{s}.toml").seed for s, _t, _w in suite(only)}
    for role, key in ROLES.items():
        impl = cell.impl(role)
        meta = certify.Meta(impl.command, PROTOCOL, PROFILES[key].role, cell.broker,
                            cell.out, seeds, implementation_version=impl.version,
                            again=again(cell), name=impl.name)
        certify.write(cell.rows[role], meta, into=cell.out / role)


def to_json(cells: list[Cell]) -> dict[str, Any]:
    return {"format": FORMAT, "cells": [{
        "broker": c.broker, "folder": c.name,
        **{role: {"name": c.impl(role).name, "command": list(c.impl(role).command),
                  "declares": sorted(c.impl(role).declares),
                  **({"version": c.impl(role).version} if c.impl(role).version else {}),
                  "counts": c.counts(role), "exitCode": c.exit_code(role),
                  # every FAIL, at any level; a SHOULD among them fails no cell
                  "failed": [{"ids": r.rule.ids, "level": certify.level(r)}
                             for r in c.rows[role] if r.status == "FAIL"],
                  "compatibility": f"{c.name}/{role}/compatibility.json"}
           for role in ROLES}} for c in cells]}


def _summary(c: Cell, role: str) -> str:
    n = c.counts(role)
    return f"{n['PASS']} PASS, {n['FAIL']} FAIL, {n['UNKNOWN']} UNKNOWN"


def render(cells: list[Cell]) -> str:
    """The grid as a Markdown table: a row per cell, each role's counts."""
    lines = ["| broker | responder | requester | responder's clauses | requester's clauses |",
             "|---|---|---|---|---|"]
    for c in cells:
        lines.append(f"| {c.broker} | {c.responder.name} | {c.requester.name} | "
                     f"[{_summary(c, 'responder')}]({c.name}/responder/conform.html) | "
                     f"[{_summary(c, 'requester')}]({c.name}/requester/conform.html) |")
    return "\n".join(lines)


COLOURS = {0: "#2e7d32", 1: "#c62828", 2: "#9e9e9e"}


def page(cells: list[Cell]) -> str:
    """grid.html: per broker, responders down and requesters across; each cell both roles'
    counts, coloured by the worse, each linking to its role's page."""
    parts = []
    for broker in dict.fromkeys(c.broker for c in cells):
        mine = [c for c in cells if c.broker == broker]
        qs = list(dict.fromkeys(c.requester.name for c in mine))
        rs = list(dict.fromkeys(c.responder.name for c in mine))
        by = {(c.responder.name, c.requester.name): c for c in mine}
        head = "".join(f"<th>requester {html.escape(q)}</th>" for q in qs)
        body = []
        for r in rs:
            tds = []
            for q in qs:
                c = by[r, q]
                worst = 1 if 1 in (c.exit_code("responder"), c.exit_code("requester")) else \
                    2 if 2 in (c.exit_code("responder"), c.exit_code("requester")) else 0
                links = "".join(
                    f"<div><a href='{c.name}/{role}/conform.html'>{role}</a>: "
                    f"{_summary(c, role)}</div>" for role in ROLES)
                tds.append(f"<td style='border-left:6px solid {COLOURS[worst]}'>{links}</td>")
            body.append(f"<tr><th>responder {html.escape(r)}</th>{''.join(tds)}</tr>")
        parts.append(f"<h2>on {html.escape(broker)}</h2><table><tr><th></th>{head}</tr>"
                     + "".join(body) + "</table>")
    # (a responder and a requester may share a name: each is listed as its role's)
    given = {(role, c.impl(role).name): c.impl(role) for c in cells for role in ROLES
             if c.impl(role).command}
    if given:
        parts.append("<p>" + "<br>".join(
            f"{role} <b>{html.escape(name)}</b>: <code>{html.escape(shlex.join(i.command))}"
            "</code>" for (role, name), i in given.items()) + "</p>")
    return ("<!doctype html><meta charset=utf-8><title>a2a-bench grid</title><style>"
            "body{font:14px/1.4 system-ui,sans-serif;margin:2em}table{border-collapse:"
            "collapse}td,th{border:1px solid #ddd;padding:6px 10px;text-align:left;"
            "vertical-align:top}</style><h1>A2A over MQTT: who works with whom</h1>"
            "<p>Each cell: the conform suites of both roles, run once with that responder "
            "and that requester; the left border red where a MUST fails, grey where some "
            "clause is UNKNOWN, green where every clause passed.</p>" + "".join(parts) + "\n")


def write(cells: list[Cell], out: Path) -> list[Path]:
    files = {"grid.json": json.dumps(to_json(cells), indent=2) + "\n",
             "grid.md": render(cells) + "\n", "grid.html": page(cells)}
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / name for name in files]
