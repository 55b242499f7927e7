"""Auth admission (DESIGN §5, seed 002 §8): what each mode let through, and whether the
nodes kept to the admission matrix."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bench.checks import NOTHING, Collector, History, Verdict

#: DESIGN §5, written out again here (not imported from the core it judges).
ADMITTED = {"strict": {"VERIFIED"}, "loose": {"VERIFIED", "UNSIGNED"},
            "audit": {"VERIFIED", "UNSIGNED", "BAD_SIGNATURE", "UNKNOWN_KID", "KID_MISMATCH",
                      "STALE"}}


def _boot_of(h: History, node: str, seq: int) -> dict[str, Any] | None:
    current = None
    for e in h.of("node_started"):
        if e["node"] == node and e["seq"] <= seq:
            current = e
    return current


def auth_admission(h: History) -> Verdict:
    """Every inbound decision keeps the mode's admission matrix (strict: VERIFIED only;
    loose: also UNSIGNED; audit: everything); every attack message got the verdict an
    honest verifier gives it; audit mode records every violation it admits. Counts say,
    per mode, signature version and attack, what was sent, admitted and executed."""
    c = Collector("auth_admission")
    audit_log = {(e["node"], e["messageId"]) for e in h.of("auth_verdict")}
    decisions: list[dict[str, Any]] = []
    for e in h.of("inbound_admitted"):
        if e.get("via") == "mqtt" and e.get("verdict"):
            decisions.append({**e, "admitted": True})
    for e in h.of("inbound_dropped"):
        if e.get("reason") == "AUTH_REJECTED":
            decisions.append({**e, "admitted": False})
    for d in decisions:
        boot = _boot_of(h, d["node"], d["seq"])
        if boot is None:
            continue
        mode = boot["authMode"]
        c.count(f"{mode}: {'admitted' if d['admitted'] else 'rejected'} {d['verdict']}")
        if d["admitted"] != (d["verdict"] in ADMITTED[mode]):
            c.violation(f"{d['node']} ({mode} mode) {'admitted' if d['admitted'] else 'rejected'} "
                        f"{d.get('messageType')} {d.get('messageId')} with verdict {d['verdict']}",
                        d)
        if d["admitted"] and mode == "audit" and d["verdict"] != "VERIFIED" \
                and (d["node"], d.get("messageId")) not in audit_log:
            c.violation(f"{d['node']} (audit mode) admitted {d.get('messageId')} "
                        f"({d['verdict']}) without recording it", d)

    attacks = h.of("attack_sent")
    outcomes: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for kind in ("inbound_admitted", "inbound_dropped"):
        for e in h.of(kind):
            if e.get("messageId"):
                outcomes[(e["node"], e["messageId"])].append(e)
    executions: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in h.of("task_executed"):
        executions[(e["node"], e.get("messageId") or "")].append(e)
    for a in attacks:
        node = a["targetNodeId"]
        key = (node, a["messageId"])
        after = sorted((o for o in outcomes.get(key, []) if o["seq"] > a["seq"]),
                       key=lambda o: o["seq"])
        boot = _boot_of(h, node, a["seq"])
        attack = f"{a['attack']}:{a['how']}" if a["attack"] in ("forged_sender", "replay") \
            else a["attack"]
        label = (f"{boot['authMode'] if boot else '?'}/v{boot['signatureVersion'] if boot else '?'}"
                 f" {attack}")
        c.count(f"{label} sent")
        if not after:
            if float(a["tMs"]) > h.end_ms - 2_000:
                c.unknown("attack_in_flight_at_end")
            else:
                c.violation(f"attack message {a['messageId']} to {node} has no recorded outcome",
                            a)
            continue
        first = after[0]
        recorded = first.get("verdict")
        if recorded is not None and recorded != a["honestVerdict"]:
            c.violation(f"{node} recorded {recorded} for {a['attack']} message {a['messageId']} "
                        f"({a['how']}); an honest verifier says {a['honestVerdict']}", a, first)
        if first["kind"] == "inbound_admitted":
            c.count(f"{label} admitted")
            ran = [x for x in executions.get(key, []) if x["seq"] > a["seq"]]
            if ran:
                c.count(f"{label} executed")
    if not decisions and not attacks:
        return c.verdict(NOTHING + "no signed or rejected inbound message")
    return c.verdict()
