"""Crash and restart through the durable store (memory store with its crash model)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from bench.core.commands import RequestOutcome
from bench.core.inputs import MessageReceived, TaskRequested
from bench.protocols.seed.ledger import LEDGER_DOCUMENT
from bench.storage.memory import MemoryStore
from bench.substrates.wire import Wire
from tests.helpers import executor, orchestrator

Pair = Callable[..., Wire]


def request(w: Wire, rid: str) -> None:
    w.feed("orch-1", TaskRequested(w.now_ms, rid, f"msg-{rid}", "fin.orchestrator", "llm.tax", rid))


def record_inbox(w: Wire, node: str) -> list[bytes]:
    got: list[bytes] = []

    def hook(src: str, topic: str, payload: bytes) -> list[bytes]:
        if topic.endswith(f"{node}/inbox"):
            got.append(payload)
        return [payload]

    w.on_publish = hook
    return got


def test_crash_loses_exactly_the_ledger_entries_not_flushed(pair: Pair) -> None:
    w = pair()
    inbox = record_inbox(w, "exec-1")
    request(w, "r1")                     # t=0, first-seen by the executor's ledger
    w.advance(5_000)                     # the 5 s flush writes it
    request(w, "r2")                     # t=5000: flushed at 10000 — if the node lives
    w.advance(6_000)
    store = w.hosts["exec-1"].store
    flushed = store.load_document(LEDGER_DOCUMENT)
    assert isinstance(flushed, dict)
    assert set(flushed["entries"]) == {"TASK_REQUEST|msg-r1"}  # type: ignore[arg-type]
    w.crash("exec-1")
    node = w.start("exec-1")
    assert "TASK_REQUEST|msg-r1" in node.ledger
    assert "TASK_REQUEST|msg-r2" not in node.ledger  # lost: it was never flushed
    # QoS1 redelivery of both after the restart:
    req1, req2 = [p for p in inbox if b"TASK_REQUEST" in p][:2]
    for raw in (req1, req2):
        w.feed("exec-1", MessageReceived(w.now_ms, "ooder/node/exec-1/inbox", raw))
    drops = [e.fields for e in w.history.events if e.node == "exec-1" and e.kind == "inbound_dropped"]
    assert [(d["reason"], d["messageId"]) for d in drops] == [("DUPLICATE", "msg-r1")]
    # r2 passed the ledger, but the task table (committed per message) still stops a re-run
    dups = [e.fields for e in w.history.events if e.node == "exec-1" and e.kind == "task_duplicate"]
    assert [d["taskId"] for d in dups] == ["r2"]
    assert Counter(c.task_id for _, c in w.executed) == {"r1": 1, "r2": 1}


def test_non_durable_ledger_forgets_on_restart_and_the_task_table_catches_it() -> None:
    """The seed's A9 window, reproduced with a non-durable 60 s ledger: after a restart the
    redelivered request passes the ledger; only the durable task table stops a re-run."""
    from bench.protocols.seed.ledger import LedgerConfig
    w = Wire()
    w.add(orchestrator())
    w.add(executor(ledger=LedgerConfig(ttl_ms=60_000, durable=False)))
    w.start("orch-1"); w.start("exec-1")
    inbox = record_inbox(w, "exec-1")
    request(w, "r1")
    w.advance(10_000)
    w.crash("exec-1")
    w.start("exec-1")
    assert len(w.hosts["exec-1"].node.ledger) == 0  # type: ignore[union-attr]
    assert w.hosts["exec-1"].store.load_document(LEDGER_DOCUMENT) is None
    raw = next(p for p in inbox if b"TASK_REQUEST" in p)
    w.feed("exec-1", MessageReceived(w.now_ms, "ooder/node/exec-1/inbox", raw))
    assert not w.history.of_kind("inbound_dropped")
    assert [e.fields["taskId"] for e in w.history.of_kind("task_duplicate")] == ["r1"]
    assert len(w.executed) == 1


def test_task_running_at_restart_fails_interrupted_and_requester_is_told(pair: Pair) -> None:
    w = pair()
    w.executor = lambda cmd: (20_000, True, "done", None)
    request(w, "r1")
    w.advance(1_000)
    w.crash("exec-1")
    w.start("exec-1")
    w.advance(2_000)
    outcome, response = w.settled["r1"]
    assert outcome is RequestOutcome.FAILED
    assert isinstance(response, dict) and response["error"] == "interrupted"
    states = [e.fields["state"] for e in w.history.events
              if e.node == "exec-1" and e.kind == "task_state"]
    assert states == ["SUBMITTED", "RUNNING", "FAILED"]
    w.advance(60_000)
    assert len(w.executed) == 1  # never re-run by the restart


def test_requester_restart_keeps_pending_requests(pair: Pair) -> None:
    w = pair()
    w.executor = lambda cmd: (3_000, True, "ok", None)
    request(w, "r1")
    w.advance(1_000)
    w.crash("orch-1")
    node = w.start("orch-1")
    assert "r1" in node.requests.pending
    w.advance(5_000)
    assert w.settled["r1"][0] is RequestOutcome.COMPLETED


def test_restarted_requester_times_out_pending_requests_past_their_deadline(pair: Pair) -> None:
    w = pair()
    w.executor = lambda cmd: (100_000, True, "ok", None)
    request(w, "r1")
    w.crash("orch-1")
    w.advance(40_000)
    w.start("orch-1")
    assert w.settled["r1"][0] is RequestOutcome.NO_RESPONSE


def test_namespace_switch_rotates_roster_and_backs_it_up() -> None:
    store = MemoryStore()
    w = Wire()
    w.add(executor(namespace="fin", agents=("fin.tax",)), store=store)
    w.start("exec-1")
    w.crash("exec-1")
    w2 = Wire()
    w2.add(executor(namespace="llm", agents=("llm.tax",)), store=store)
    node = w2.start("exec-1")
    assert node.roster.agent_ids == ("llm.tax",)
    (rot,) = w2.history.of_kind("roster_rotated")
    assert rot.fields["fromNamespace"] == "fin" and rot.fields["droppedAgents"] == ["fin.tax"]
    assert store.load_document("a2a-agents.json.bak-fin") == {
        "version": 1, "namespace": "fin", "nodeId": "exec-1", "agents": ["fin.tax"]}


def test_stale_roster_variant_keeps_both_sets() -> None:
    from bench.protocols.seed.node import Node

    class NoRotation(Node):
        rotates_roster_on_namespace_switch = False

    store = MemoryStore()
    w = Wire()
    w.add(executor(namespace="fin", agents=("fin.tax",)), store=store)
    w.start("exec-1")
    w2 = Wire()
    w2.add(executor(namespace="llm", agents=("llm.tax",)), store=store, make_node=NoRotation)
    node = w2.start("exec-1")
    assert set(node.roster.agent_ids) == {"llm.tax", "fin.tax"}


def test_a_restored_request_waits_no_longer_than_its_timeout_whatever_its_deadline_says(
        pair: Pair) -> None:
    """Sent while the requester's clock was 400 s ahead, restored after the clock was set
    right: its deadline on disk is 430 s away, but it times out within its 30 s (explore:
    restart + clock_skew, three requests never settled)."""
    w = pair()
    w.executor = lambda cmd: (1_000_000, True, "ok", None)
    w.feed("orch-1", TaskRequested(w.now_ms + 400_000, "r1", "msg-r1", "fin.orchestrator",
                                   "llm.tax", "r1"))
    w.crash("orch-1")
    node = w.start("orch-1")
    assert "r1" in node.requests.pending
    w.advance(w.now_ms + 30_001)
    assert w.settled["r1"][0] is RequestOutcome.NO_RESPONSE
