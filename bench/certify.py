"""What `a2a-bench conform` leaves for an SDK's CI and its users, beside the table: levels
as A2A's TCK has them, `compatibility.json`, JUnit XML and an HTML page.

Levels: a MUST (or MUST NOT) that FAILs fails the run (exit 1); a SHOULD that FAILs is
reported and fails it only under `--strict`. (The TCK also skips a MAY unless the
implementation declares it; the profile's table holds no MAY that binds a responder or a
requester, so there is none to skip.) A seed-protocol rule has no level: it counts as a
MUST. A row is PASS, FAIL, UNKNOWN (no run decided it: its evidence says why) or
NOT_APPLICABLE (the implementation declared it leaves that part out: `--core`,
`--no-tokens`).

`compatibility.json` is one object per row — its clauses, level, status, evidence, the
run of the suite it comes from, that run's seed, the command that runs it again and the
one that judges the stored run again — and validates against
`docs/schemas/compatibility.schema.json`. `junit.xml` is one testcase per row (a FAIL a
<failure>; a SHOULD that fails without --strict, an UNKNOWN and a NOT_APPLICABLE a
<skipped> saying so) and validates against `docs/schemas/junit.xsd`. `conform.html` is the
table to read. No I/O but `write`.
"""

from __future__ import annotations

import html
import shlex
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from bench.conform import PROFILES, Row
from bench.protocols import DEFAULT, TableClause

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"
FAILING = ("MUST", "MUST NOT")
FORMAT = "a2a-bench/compatibility/1"


@dataclass(frozen=True)
class Meta:
    """What the run was: the implementation's command and version as given, the profile
    and role it was held to, where, and how strictly."""

    command: tuple[str, ...]
    profile: str                    # the protocol (conform --protocol)
    role: str                       # what the command played
    broker: str
    out: Path
    seeds: dict[str, int] = field(default_factory=dict)
    implementation_version: str | None = None
    strict: bool = False
    level: str = "may"              # the table down to this level
    image: str | None = None        # --image: the implementation's container image
    #: the command that makes one run of the suite again, less `--only RUN` (None: conform's)
    again: tuple[str, ...] | None = None
    name: str | None = None         # grid: the implementation's name ("reference": no command)

    @property
    def shown(self) -> str:
        """The implementation as a reader knows it: its command line, or its image."""
        return f"image {self.image}" if self.image else shlex.join(self.command) \
            if self.command else f"the bench's reference {self.role}"

    @property
    def suite_flags(self) -> list[str]:
        return [*(["--protocol", self.profile] if self.profile != DEFAULT else []),
                *(["--role", self.role] if self.role != PROFILES[self.profile].role else []),
                "--broker", self.broker]

    @property
    def table(self) -> dict[str, TableClause]:
        """Its protocol's clause table, by id (empty: a protocol without one)."""
        return {c.id: c for p in PROFILES.values() if p.name == self.profile for c in p.table}

    @property
    def spec(self) -> dict[str, str]:
        """The document the clauses come from, and its commit where its kit names one."""
        p = PROFILES[self.profile]
        return {"document": p.document, **({"commit": p.commit} if p.commit else {})}


def status(row: Row) -> str:
    return "NOT_APPLICABLE" if row.declared_out else row.status


def level(row: Row) -> str:
    return row.level or "MUST"


def fails(row: Row, strict: bool) -> bool:
    """Whether this row fails the run: a FAIL at MUST, or at SHOULD under --strict."""
    return row.status == "FAIL" and (level(row) in FAILING or strict)


def exit_code(rows: list[Row], strict: bool) -> int:
    """1 a row fails the run; else 2 some row is UNKNOWN (not declared out); else 0."""
    if any(fails(r, strict) for r in rows):
        return 1
    return 2 if any(r.status == "UNKNOWN" and not r.declared_out for r in rows) else 0


def replay(row: Row, meta: Meta) -> str | None:
    """The one command that runs the row's run of the suite again."""
    if row.scenario is None:
        return None
    if meta.again is not None:
        return shlex.join([*meta.again, "--only", row.scenario])
    return shlex.join(["a2a-bench", "conform", *meta.suite_flags, "--only", row.scenario,
                       *(["--image", meta.image] if meta.image else [shlex.join(meta.command)])])


def _ids(row: Row) -> list[str]:
    return [i.strip() for i in row.rule.ids.split(",")]


def compatibility(rows: list[Row], meta: Meta) -> dict[str, Any]:
    """compatibility.json's object (docs/schemas/compatibility.schema.json)."""
    entries = []
    table = meta.table
    for r in rows:
        first = table.get(_ids(r)[0])
        entry: dict[str, Any] = {
            "ids": _ids(r), "what": r.rule.what, "level": level(r), "status": status(r),
            "evidence": r.evidence, "judgedBy": list(r.rule.judged_by),
            "failsTheRun": fails(r, meta.strict)}
        if first is not None and first.conformance is not None:
            entry["conformance"] = first.conformance
        if first is not None and first.section is not None:
            entry["section"] = first.section
        if r.scenario is not None:
            entry["scenario"] = r.scenario
            entry["seed"] = meta.seeds.get(r.scenario)
            entry["replay"] = replay(r, meta)
            entry["stored"] = f"a2a-bench check {shlex.quote(str(meta.out / r.scenario))}"
        entries.append(entry)
    counts = {s: sum(status(r) == s for r in rows)
              for s in ("PASS", "FAIL", "UNKNOWN", "NOT_APPLICABLE")}
    return {
        "format": FORMAT,
        "bench": {"name": "a2a-bench", "version": metadata.version("a2a-bench")},
        "implementation": {"command": list(meta.command),
                           **({"image": meta.image} if meta.image else {}),
                           **({"name": meta.name} if meta.name else {}),
                           "version": meta.implementation_version},
        "profile": meta.profile, "role": meta.role, "broker": meta.broker,
        "spec": meta.spec,
        "level": meta.level, "strict": meta.strict,
        "exitCode": exit_code(rows, meta.strict),
        "counts": counts, "clauses": entries}


def junit(rows: list[Row], meta: Meta) -> str:
    """JUnit XML (docs/schemas/junit.xsd): one testsuite, one testcase per row."""
    suite_name = f"a2a-bench conform {meta.profile} {meta.role}"
    failures = sum(fails(r, meta.strict) for r in rows)
    skipped = sum(1 for r in rows if not fails(r, meta.strict) and r.status != "PASS")
    root = ET.Element("testsuites", name="a2a-bench conform", tests=str(len(rows)),
                      failures=str(failures), errors="0")
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(rows)),
                          failures=str(failures), errors="0", skipped=str(skipped), time="0")
    props = ET.SubElement(suite, "properties")
    for name, value in (("command", meta.shown), ("broker", meta.broker),
                        ("implementation.version", meta.implementation_version or ""),
                        ("strict", str(meta.strict).lower())):
        ET.SubElement(props, "property", name=name, value=value)
    for r in rows:
        case = ET.SubElement(suite, "testcase", name=f"{r.rule.ids}: {r.rule.what}",
                             classname=f"{meta.profile}.{meta.role}.{level(r)}", time="0")
        how = replay(r, meta)
        text = r.evidence + (f"\nreplay: {how}" if how else "")
        if fails(r, meta.strict):
            ET.SubElement(case, "failure", message=r.evidence, type=level(r)).text = text
        elif r.status == "FAIL":
            ET.SubElement(case, "skipped", message=f"SHOULD not kept (reported; --strict fails "
                                                   f"it): {r.evidence}")
        elif r.status != "PASS":
            ET.SubElement(case, "skipped", message=f"{status(r)}: {r.evidence}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


COLOURS = {"PASS": "#2e7d32", "FAIL": "#c62828", "UNKNOWN": "#8d6e63",
           "NOT_APPLICABLE": "#78909c"}


def page(rows: list[Row], meta: Meta) -> str:
    """conform.html: the table to read, grouped by level."""
    c = compatibility(rows, meta)
    head = (f"<h1>{html.escape(meta.shown)}</h1>"
            f"<p>{html.escape(meta.profile)} profile, as the {html.escape(meta.role)}, on "
            f"{html.escape(meta.broker)}"
            + (f"; implementation version {html.escape(meta.implementation_version)}"
               if meta.implementation_version else "")
            + f" &middot; a2a-bench {html.escape(c['bench']['version'])}</p><p class=counts>"
            + " &middot; ".join(f"<b style='color:{COLOURS[k]}'>{v} {k.replace('_', ' ')}</b>"
                                for k, v in c["counts"].items())
            + f" &middot; exit {c['exitCode']}"
            + (" (--strict: a SHOULD that fails fails the run)" if meta.strict else "")
            + "</p>")
    body = []
    shown = None
    for r, e in zip(rows, c["clauses"], strict=True):
        if e["level"] != shown:
            shown = e["level"]
            body.append(f"<tr class=level><th colspan=3>{html.escape(shown)}</th></tr>")
        how = e.get("replay") if e["status"] != "PASS" else None   # what to run again
        body.append(
            f"<tr><td class=id>{html.escape(', '.join(e['ids']))}</td>"
            f"<td><span class=status style='background:{COLOURS[e['status']]}'>"
            f"{e['status'].replace('_', ' ')}</span>"
            + ("<br><small>fails the run</small>" if e["failsTheRun"] else "")
            + f"</td><td>{html.escape(r.rule.what)}<div class=evidence>"
            f"{html.escape(r.evidence)}</div>"
            + (f"<code>{html.escape(how)}</code>" if how else "") + "</td></tr>")
    return ("<!doctype html><meta charset=utf-8><title>conform: "
            f"{html.escape(meta.shown)}</title><style>"
            "body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1100px}"
            "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;"
            "padding:6px 8px;vertical-align:top;text-align:left}tr.level th{background:#f3f3f3;"
            "font-size:15px}td.id{width:14em;font-family:monospace;font-size:13px}"
            ".status{color:#fff;border-radius:3px;padding:1px 6px;font-size:12px;"
            "white-space:nowrap}.evidence{color:#555;margin-top:2px}"
            "code{display:block;font-size:12px;color:#777;margin-top:3px;word-break:break-all}"
            "</style>" + head + "<table><tr><th>clause</th><th>status</th>"
            "<th>what, and the evidence</th></tr>" + "".join(body) + "</table>\n")


def write(rows: list[Row], meta: Meta, into: Path | None = None) -> list[Path]:
    """compatibility.json, junit.xml and conform.html into the run's folder (or `into`)."""
    import json
    into = into or meta.out
    into.mkdir(parents=True, exist_ok=True)
    files = {"compatibility.json": json.dumps(compatibility(rows, meta), indent=2) + "\n",
             "junit.xml": junit(rows, meta), "conform.html": page(rows, meta)}
    for name, text in files.items():
        (into / name).write_text(text)
    return [into / name for name in files]
