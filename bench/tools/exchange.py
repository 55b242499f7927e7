"""`a2a-bench exchange`: the smallest real end-to-end exchange the reference core can do.

Two reference nodes (an orchestrator in namespace `fin`, an executor in `llm`) wired back
to back, each with its own data dir (SQLite + atomic JSON files). The script drives a
handful of requests through the seeds' failure shapes — QoS1 redelivery, a retry under a
new messageId, an unresolvable agent, a request stripped of replyNodeId, and an executor
crash mid-task — records one history, and judges it. Every figure printed is computed from
that history; nothing is canned.
"""

from __future__ import annotations

import json
import os
import secrets
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.core.auth import AuthConfig, AuthMode, KeyRing, Secret, SignatureVersion, sign
from bench.core.commands import Execute
from bench.core.config import NodeConfig
from bench.core.envelope import Envelope, Header, Json, MessageType, decode, encode
from bench.core.inputs import MessageReceived, TaskRequested
from bench.core.topics import Topics
from bench.history import Recorder
from bench.storage.files import FileStore
from bench.substrates.wire import Wire

ORCH, EXEC = "orch-1", "exec-1"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Summary:
    run_dir: str
    checks: list[Check] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    executions: dict[str, int] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    events: int = 0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"runDir": self.run_dir, "ok": self.ok, "events": self.events,
                "outcomes": self.outcomes, "executions": self.executions, "drops": self.drops,
                "checks": [c.__dict__ for c in self.checks]}


def run_exchange(out_dir: Path, mode: AuthMode, version: SignatureVersion, requests: int) -> Summary:
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = KeyRing(flat_token=Secret(secrets.token_hex(16)),
                   agent_keys={"fin.orchestrator": Secret(secrets.token_hex(16)),
                               "llm.tax": Secret(secrets.token_hex(16))})
    auth = AuthConfig(mode, keys, version)
    recorder = Recorder(out_dir / "history.jsonl", keep=True)

    def executor(cmd: Execute) -> tuple[int, bool, Json, str | None]:
        slow = isinstance(cmd.payload, dict) and cmd.payload.get("slow")
        return (20_000 if slow else 40), True, {"answer": f"done {cmd.task_id}"}, None

    wire = Wire(recorder, executor)
    stores = {n: FileStore(out_dir / "data" / n) for n in (ORCH, EXEC)}
    wire.add(NodeConfig(ORCH, "fin", ("fin.orchestrator",), auth=auth), stores[ORCH])
    wire.add(NodeConfig(EXEC, "llm", ("llm.tax",), auth=auth), stores[EXEC])
    captured: list[tuple[str, bytes]] = []
    strip_reply_for: set[str] = set()

    def on_publish(node: str, topic: str, payload: bytes) -> list[bytes]:
        captured.append((topic, payload))
        env = decode(payload)
        if isinstance(env, Envelope) and env.header(Header.REQUEST_ID) in strip_reply_for \
                and env.message_type is MessageType.TASK_REQUEST:
            # The requester's own defect (D14), so the message is signed without the header,
            # as the sender would; stripping it in transit would be tampering instead.
            stripped = env.with_headers(**{Header.REPLY_NODE_ID.value: None})
            return [encode(sign(stripped, keys, node, version))]
        return [payload]

    wire.on_publish = on_publish
    try:
        wire.start(ORCH)
        wire.start(EXEC)

        def ask(rid: str, to: str = "llm.tax", payload: Json = None) -> None:
            wire.feed(ORCH, TaskRequested(wire.now_ms, rid, f"msg-{rid}", "fin.orchestrator", to,
                                          payload if payload is not None else {"q": rid}))

        for i in range(1, requests + 1):
            ask(f"req-{i}")
            wire.advance(wire.now_ms + 100)
        # QoS1 redelivery: the broker hands the executor the very same PUBLISH twice more.
        inbox = Topics().inbox(EXEC)
        topic, first = next((t, p) for t, p in captured if t == inbox)
        for _ in range(2):
            wire.feed(EXEC, MessageReceived(wire.now_ms, topic, first))
        # A retry by the requester: same requestId, new messageId, signed afresh (v1 signs
        # the messageId, so re-using the old signature would be a BAD_SIGNATURE).
        original = decode(first)
        assert isinstance(original, Envelope)
        retry = sign(replace(original, message_id="msg-req-1-retry"), keys, ORCH, version)
        wire.feed(EXEC, MessageReceived(wire.now_ms, topic, encode(retry)))
        ask("to-nobody", to="llm.nobody")
        strip_reply_for.add("no-reply-node")
        ask("no-reply-node")
        ask("crash-mid-task", payload={"slow": True})
        wire.advance(wire.now_ms + 1_000)
        wire.crash(EXEC)
        stores[EXEC].close()
        stores[EXEC] = FileStore(out_dir / "data" / EXEC)
        wire.hosts[EXEC].store = stores[EXEC]
        wire.start(EXEC)
        wire.advance(wire.now_ms + 35_000)
    finally:
        recorder.close()
        for s in stores.values():
            s.close()
    return judge(recorder, out_dir, requests)


def judge(recorder: Recorder, out_dir: Path, requests: int) -> Summary:
    s = Summary(str(out_dir), events=len(recorder.events))
    executed = Counter(str(e.fields["taskId"]) for e in recorder.of_kind("task_executed"))
    s.executions = dict(sorted(executed.items()))
    sent = [str(e.fields["requestId"]) for e in recorder.of_kind("request_sent")]
    settled: dict[str, list[str]] = defaultdict(list)
    for e in recorder.of_kind("request_settled"):
        settled[str(e.fields["requestId"])].append(str(e.fields["outcome"]))
    s.outcomes = {r: ",".join(settled[r]) or "(none)" for r in sent}
    s.drops = dict(Counter(f"{e.fields['reason']}" for e in recorder.of_kind("inbound_dropped")))
    warnings = [str(e.fields.get("what")) for e in recorder.of_kind("warning")]

    def check(name: str, ok: bool, detail: str) -> None:
        s.checks.append(Check(name, ok, detail))

    check("no duplicate execution", all(n == 1 for n in executed.values()),
          f"{sum(executed.values())} executions for {len(executed)} requestIds")
    check("every request ends in exactly one outcome", all(len(settled[r]) == 1 for r in sent),
          f"{len(sent)} sent, {sum(len(v) for v in settled.values())} settled")
    expected = {f"req-{i}": "COMPLETED" for i in range(1, requests + 1)} | {
        "to-nobody": "UNDELIVERABLE", "no-reply-node": "NO_RESPONSE", "crash-mid-task": "FAILED"}
    wrong = {r: s.outcomes.get(r) for r, o in expected.items() if s.outcomes.get(r) != o}
    check("outcomes are the expected ones", not wrong, f"unexpected: {wrong}" if wrong else
          "req-* COMPLETED, to-nobody UNDELIVERABLE, no-reply-node NO_RESPONSE, crash FAILED")
    check("QoS1 redelivery dropped as DUPLICATE", s.drops.get("DUPLICATE", 0) == 2,
          f"{s.drops.get('DUPLICATE', 0)} DUPLICATE drops (2 redeliveries injected)")
    dups = [e.fields for e in recorder.of_kind("task_duplicate")]
    check("retry under a new messageId re-sends the stored result",
          any(d["taskId"] == "req-1" and d["action"] == "resend stored result" for d in dups),
          f"{len(dups)} duplicate request(s) answered from the task table")
    check("missing replyNodeId is warned about", "missing replyNodeId" in warnings,
          f"warnings: {sorted(set(warnings))}")
    interrupted = [e for e in recorder.of_kind("task_state")
                   if e.fields["taskId"] == "crash-mid-task" and e.fields["error"] == "interrupted"]
    check("task RUNNING at restart ends FAILED(interrupted)", len(interrupted) == 1,
          f"{len(interrupted)} interrupted transition(s)")
    (out_dir / "summary.json").write_text(json.dumps(s.to_json(), indent=2) + "\n")
    return s


def render(s: Summary) -> str:
    lines = [f"history: {s.run_dir}/history.jsonl ({s.events} events)", "",
             "request outcomes (from the history):"]
    lines += [f"  {rid:<16} {outcome:<14} executed {s.executions.get(rid, 0)}x"
              for rid, outcome in s.outcomes.items()]
    lines += ["", "inbound drops: " + (", ".join(f"{k} {v}" for k, v in sorted(s.drops.items())) or "none"),
              "", "checks:"]
    lines += [f"  [{'PASS' if c.ok else 'FAIL'}] {c.name}: {c.detail}" for c in s.checks]
    lines += ["", "verdict: " + ("all checks passed" if s.ok else "SOME CHECKS FAILED")]
    return "\n".join(lines)


def default_run_dir(results: Path) -> Path:
    import datetime
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    return results / f"exchange-{stamp}-{os.getpid()}"
