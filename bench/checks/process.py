"""Process checkers (DESIGN §7; seed 002 §7, seed 000 §5, seed 004): gate integrity and
context isolation, judged from the history alone."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from bench.checks import NOTHING, Collector, History, Verdict
from bench.core.context import ContextError, apply_ops, digest

IN_FLIGHT_AT_END_MS = 3_000


def _instance_events(h: History) -> dict[str, list[dict[str, Any]]]:
    kinds = ("instance_started", "context_forked", "step_started", "step_finished",
             "context_merged", "instance_state", "subflow_finished", "gate_resumed")
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for kind in kinds:
        for e in h.of(kind):
            per[e["processInstId"]].append(e)
    for events in per.values():
        events.sort(key=lambda e: e["seq"])
    return per


def gate_integrity(h: History) -> Verdict:
    """Every decided gate resumes exactly the instance that opened it, exactly once, after
    the decision and with that decision — across restarts of either side; a restart never
    loses an instance paused at a gate; every click gets an explicit outcome (the first
    decides, later ones are ALREADY_DECIDED); every decision is acknowledged or explicitly
    given up on; a gate past its deadline had its timeout policy applied."""
    c = Collector("gate_integrity")
    opens = {e["gateId"]: e for e in h.of("gate_open_sent")}
    opened = {e["gateId"]: e for e in h.of("gate_opened")}
    decided = {e["gateId"]: e for e in h.of("gate_decided")}
    resumes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in h.of("gate_resumed"):
        resumes[e["gateId"]].append(e)
    ends: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in h.of("instance_state"):
        if e["status"] in ("FAILED", "COMPLETED"):
            ends[e["processInstId"]].append(e)
    nacks: dict[str, list[str]] = defaultdict(list)
    for e in h.of("gate_decision_received"):
        if e["status"] in ("UNKNOWN_INSTANCE", "NOT_WAITING"):
            nacks[e["gateId"]].append(e["status"])
    c.count("gates_opened", len(opens))
    c.count("gates_decided", len(decided))
    c.count("by_timeout", sum(1 for d in decided.values() if d["decidedBy"] == "timeout"))
    c.count("resumes", sum(len(v) for v in resumes.values()))
    c.count("rehydrated", len(h.of("instance_rehydrated")))
    c.count("already_decided", len(h.of("gate_already_decided")))
    c.count("negative_acks", sum(len(v) for v in nacks.values()))
    late = h.end_ms - IN_FLIGHT_AT_END_MS

    for gate_id, rs in sorted(resumes.items()):
        gate, d = opens.get(gate_id), decided.get(gate_id)
        for r in rs:
            if gate is not None and r["processInstId"] != gate["processInstId"]:
                c.violation(f"the decision for gate {gate_id} (instance {gate['processInstId']}) "
                            f"resumed instance {r['processInstId']}", gate, r)
            if d is None or d["seq"] > r["seq"]:
                c.violation(f"gate {gate_id} resumed without a decision", r)
            elif r["decision"] != d["decision"]:
                c.violation(f"gate {gate_id} was decided {d['decision']!r} but resumed with "
                            f"{r['decision']!r}", d, r)
        if len(rs) > 1:
            c.violation(f"gate {gate_id} resumed {len(rs)} times", *rs)

    for gate_id, gate in sorted(opens.items()):
        pi = gate["processInstId"]
        d = decided.get(gate_id)
        mine = [r for r in resumes.get(gate_id, []) if r["processInstId"] == pi]
        lost = [e for e in ends.get(pi, []) if e["seq"] > gate["seq"]
                and str(e.get("reason") or "").startswith("interrupted")
                and not any(r["seq"] < e["seq"] for r in mine)]
        if lost:
            c.violation(f"instance {pi}, paused at gate {gate_id}, was lost in a restart "
                        f"({lost[0]['reason']})", gate, lost[0])
            continue
        if gate_id not in opened:
            if float(gate["tMs"]) > late:
                c.unknown("gate_open_in_flight_at_end")
            else:
                c.violation(f"GATE_OPEN for {gate_id} never reached the gate store", gate)
            continue
        if d is None:
            o = opened[gate_id]
            if float(o["deadlineMs"]) < late:
                c.violation(f"gate {gate_id} passed its deadline undecided: the timeout "
                            f"policy {o['onTimeout']!r} was never applied", o)
            else:
                c.count("open_at_end")
            continue
        if mine:
            continue
        closed = [e for e in ends.get(pi, []) if e["seq"] < d["seq"]]
        if closed and not any(str(e.get("reason") or "").startswith("interrupted") for e in closed):
            c.count("instance_closed_before_decision")   # e.g. its task timed out
            continue
        if float(d["tMs"]) > late:
            c.unknown("decision_in_flight_at_end")
            continue
        c.violation(f"gate {gate_id} was decided {d['decision']!r} but instance {pi} never "
                    f"resumed" + (f" (the executor answered {nacks[gate_id]})"
                                  if nacks.get(gate_id) else ""), gate, d)

    outcomes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for kind in ("gate_decided", "gate_already_decided", "gate_click_rejected"):
        for e in h.of(kind):
            if e.get("click"):
                outcomes[e["click"]].append(e)
    for e in h.of("human_clicked"):
        c.count("clicks")
        got = outcomes.get(e["click"], [])
        if len(got) != 1:
            c.violation(f"click {e['click']} had {len(got)} recorded outcomes (want exactly 1: "
                        "decided, already decided or rejected)", e, *got)

    acked = {e["gateId"] for e in h.of("gate_acked") if not e.get("duplicate")}
    unacked = {e["gateId"] for e in h.of("gate_unacked")}
    for gate_id, d in sorted(decided.items()):
        if gate_id in acked or gate_id in unacked:
            continue
        if float(d["tMs"]) > late:
            c.unknown("ack_in_flight_at_end")
        else:
            c.violation(f"the decision for gate {gate_id} was neither acknowledged nor given "
                        "up on (GATE_UNACKED)", d)
    return c.verdict("" if opens else NOTHING + "no gate was opened in this run")


def _foreign_values(value: Any, instance: str) -> list[str]:
    """Values written by another instance (every step's value starts with its instance)."""
    found: list[str] = []
    if isinstance(value, dict):
        for v in value.values():
            found.extend(_foreign_values(v, instance))
    elif isinstance(value, list):
        for v in value:
            found.extend(_foreign_values(v, instance))
    elif isinstance(value, str) and value.startswith("pi-") \
            and value.split("/", 1)[0] != instance:
        found.append(value)
    return found


def _diff(expected: Any, actual: Any) -> str:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            if expected.get(k) != actual.get(k):
                return f"{k}: {_diff(expected.get(k), actual.get(k))}"
        return "equal"
    if isinstance(expected, list) and isinstance(actual, list):
        extra = [x for x in actual if x not in expected]
        missing = [x for x in expected if x not in actual]
        return f"extra {extra[:3]} missing {missing[:3]}"
    return f"expected {expected!r}, got {actual!r}"


def context_isolation(h: History) -> Verdict:
    """Copy-on-write, replayed: every attempt starts from exactly its scope's current
    snapshot (a retry from the same pre-attempt snapshot, every parallel branch from the
    same parent); a context after a merge is the context before plus the writes of the
    successful attempt merged — nothing from failed attempts, other branches' copies or
    other tasks; a fresh instance's context holds nothing; a failed sub-flow is never
    merged and fails its parent, which never ends COMPLETED."""
    c = Collector("context_isolation")
    for pi, events in sorted(_instance_events(h).items()):
        ctx: dict[str, Any] = {}
        head: dict[str, tuple[str | None, int]] = {}   # scope -> (snapshot id, version)
        first_base: dict[str, str] = {}
        finished: dict[tuple[str, int], dict[str, Any]] = {}
        sub_ops: dict[str, list[Any]] = defaultdict(list)
        failed_subflows: dict[str, dict[str, Any]] = {}
        failed_main: dict[str, Any] | None = None
        for e in events:
            kind = e["kind"]
            if kind == "instance_started":
                c.count("instances")
                ctx["main"] = e["context"]
                head["main"] = (None, 0)
                held = {k: v for k, v in e["context"].items() if k != "input" and v}
                if held:
                    c.violation(f"instance {pi} started with a context that already holds "
                                f"{str(held)[:120]} (shared with another task)", e)
            elif kind == "context_forked":
                ctx[e["scope"]] = copy.deepcopy(ctx.get("main"))
                head[e["scope"]] = (e["parentSnapshotId"], 0)
                if e["digest"] != digest(ctx[e["scope"]]):
                    c.violation(f"{pi}: sub-flow {e['scope']} forked from something other than "
                                "its parent's current context", e)
            elif kind == "step_started":
                c.count("attempts")
                current = ctx.get(e["scope"])
                if current is not None and e["baseDigest"] != digest(current):
                    c.violation(f"{pi}: {e['path']} attempt {e['attempt']} started from a context "
                                f"that is not its snapshot (version {e['baseVersion']})", e)
                if e["attempt"] == 1:
                    first_base[e["path"]] = e["baseDigest"]
                elif e["baseDigest"] != first_base.get(e["path"]):
                    c.violation(f"{pi}: retry {e['attempt']} of {e['path']} does not start from "
                                "the pre-attempt snapshot", e)
            elif kind == "step_finished":
                finished[(e["path"], e["attempt"])] = e
                if not e["ok"]:
                    c.count("failed_attempts")
                    started = [s for s in events if s["kind"] == "step_started"
                               and s["path"] == e["path"] and s["attempt"] == e["attempt"]]
                    final = bool(started) and e["attempt"] > started[0]["retries"]
                    if final and e["scope"] != "main":
                        failed_subflows[e["scope"]] = e
                    elif final:
                        failed_main = e
            elif kind == "context_merged":
                c.count("merges")
                scope, path = e["scope"], e["path"]
                prev = head.get(scope)
                if prev is not None and (e["version"] != prev[1] + 1 or (
                        prev[0] is not None and e["parentSnapshotId"] != prev[0]
                        and prev[1] > 0)):
                    c.violation(f"{pi}: version chain of {scope} broken at {path}: v{e['version']} "
                                f"(parent {e['parentSnapshotId']}) after v{prev[1]} ({prev[0]})", e)
                head[scope] = (e["snapshotId"], e["version"])
                step = finished.get((path, e["attempt"]))
                if path in failed_subflows:
                    c.violation(f"{pi}: failed sub-flow {path} was merged into its parent",
                                failed_subflows[path], e)
                    ops = e["ops"]
                elif step is not None:
                    if not step["ok"]:
                        c.violation(f"{pi}: failed attempt {e['attempt']} of {path} was merged",
                                    step, e)
                    ops = step["ops"]
                elif scope == "main" and path in sub_ops:
                    ops = sub_ops.pop(path)
                else:
                    ops = e["ops"]   # a gate's decision: it may only write under "gates"
                    if any(not op["path"] or op["path"][0] != "gates" for op in ops):
                        c.violation(f"{pi}: merge of {path} wrote outside 'gates' with no step "
                                    "behind it", e)
                if scope != "main":
                    sub_ops[scope].extend(ops)
                expected = copy.deepcopy(ctx.get(scope))
                try:
                    apply_ops(expected, list(ops))
                except ContextError as exc:
                    c.violation(f"{pi}: the writes merged for {path} do not apply: {exc}", e)
                if expected != e["context"]:
                    c.violation(f"{pi}: context after merging {path} is not its snapshot plus "
                                f"the step's writes ({_diff(expected, e['context'])[:160]})", e)
                foreign = _foreign_values(e["context"], pi)
                if foreign:
                    c.violation(f"{pi}: context holds values written by another instance: "
                                f"{foreign[:3]}", e)
                ctx[scope] = e["context"]
            elif kind == "instance_state" and e["status"] == "COMPLETED":
                if failed_subflows:
                    scope, f = next(iter(failed_subflows.items()))
                    c.violation(f"{pi}: sub-flow {scope} failed but the instance COMPLETED", f, e)
                if failed_main is not None:
                    c.violation(f"{pi}: step {failed_main['path']} failed for good but the "
                                "instance COMPLETED", failed_main, e)
                c.count("completed")
            elif kind == "instance_state" and e["status"] == "FAILED":
                c.count("failed")
        if failed_subflows:
            c.count("subflows_failed")
    return c.verdict("" if c.counts.get("instances") else NOTHING + "no process instance ran")
