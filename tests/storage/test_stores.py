from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.core.commands import PersistDocument, PersistRecord, Record, Table
from bench.core.events import NodeWarning, WarningKind
from bench.storage import Store, StoreError, apply, restore, stage
from bench.storage.files import FileStore
from bench.storage.memory import MemoryStore


@pytest.fixture(params=["memory", "files"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return MemoryStore() if request.param == "memory" else FileStore(tmp_path / "node")


def test_round_trip(store: Store) -> None:
    n = apply(store, [PersistDocument("a2a-agents.json", {"agents": ["llm.tax"]}),
                      PersistRecord(Table.TASKS, "r1", {"taskId": "r1", "state": "RUNNING"}),
                      Record(NodeWarning(WarningKind.UNDELIVERABLE))])
    assert n == 2
    assert store.load_document("a2a-agents.json") == {"agents": ["llm.tax"]}
    assert store.records(Table.TASKS) == {"r1": {"taskId": "r1", "state": "RUNNING"}}
    assert store.load_document("absent.json") is None
    restored = restore(store)
    assert restored.roster == {"agents": ["llm.tax"]}
    assert restored.tasks == {"r1": {"taskId": "r1", "state": "RUNNING"}}


def test_latest_write_wins(store: Store) -> None:
    apply(store, [PersistRecord(Table.TASKS, "r1", {"s": 1}), PersistRecord(Table.TASKS, "r1", {"s": 2})])
    apply(store, [PersistRecord(Table.TASKS, "r1", {"s": 3})])
    assert store.records(Table.TASKS) == {"r1": {"s": 3}}


@pytest.mark.parametrize("name", ["../escape.json", "/abs", "", ".hidden", "a/b"])
def test_document_names_cannot_escape_the_data_dir(store: Store, name: str) -> None:
    with pytest.raises(StoreError):
        apply(store, [PersistDocument(name, 1)])


def test_values_are_copied_not_aliased() -> None:
    store = MemoryStore()
    value = {"nested": [1]}
    apply(store, [PersistDocument("d.json", value)])
    value["nested"].append(2)
    loaded = store.load_document("d.json")
    assert loaded == {"nested": [1]}
    assert isinstance(loaded, dict)
    loaded["nested"] = []
    assert store.load_document("d.json") == {"nested": [1]}


def test_memory_crash_loses_exactly_the_uncommitted_transaction() -> None:
    store = MemoryStore()
    apply(store, [PersistRecord(Table.TASKS, "r1", {"s": "SUBMITTED"}), PersistDocument("a.json", 1)])
    txn = store.begin()
    stage(txn, [PersistRecord(Table.TASKS, "r1", {"s": "COMPLETED"}),
                PersistRecord(Table.TASKS, "r2", {"s": "SUBMITTED"}), PersistDocument("a.json", 2)])
    report = store.crash()
    assert report.lost == 3
    assert report.lost_documents == ["a.json"]
    assert report.lost_records == [("tasks", "r1"), ("tasks", "r2")]
    assert store.records(Table.TASKS) == {"r1": {"s": "SUBMITTED"}}
    assert store.load_document("a.json") == 1
    with pytest.raises(StoreError):
        txn.commit()  # a transaction of a dead process cannot come back


def test_file_store_survives_reopen_and_leaves_no_temp_files(tmp_path: Path) -> None:
    s = FileStore(tmp_path)
    for i in range(5):
        apply(s, [PersistDocument("a2a-inbound-ledger.json", {"i": i}),
                  PersistRecord(Table.MESSAGES, f"SEND|m{i}", {"i": i})])
    s.close()
    s2 = FileStore(tmp_path)
    assert s2.load_document("a2a-inbound-ledger.json") == {"i": 4}
    assert len(s2.records(Table.MESSAGES)) == 5
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert (tmp_path / "a2a-node.db").exists()


def test_file_store_refuses_a_corrupted_document(tmp_path: Path) -> None:
    s = FileStore(tmp_path)
    (tmp_path / "a2a-agents.json").write_text("{half")
    with pytest.raises(StoreError, match="a2a-agents.json"):
        s.load_document("a2a-agents.json")


def test_committed_state_survives_sigkill(tmp_path: Path) -> None:
    """A real process commits in a loop and is killed with SIGKILL mid-stream: every
    commit it reported is on disk, and the document is never torn."""
    script = textwrap.dedent(f"""
        import sys
        from bench.core.commands import PersistDocument, PersistRecord, Table
        from bench.storage import apply
        from bench.storage.files import FileStore
        s = FileStore({str(tmp_path)!r})
        i = 0
        while True:
            apply(s, [PersistRecord(Table.TASKS, f"t{{i}}", {{"i": i}}),
                      PersistDocument("a2a-inbound-ledger.json", {{"upto": i, "pad": "x" * 4096}})])
            print(i, flush=True)
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    last = -1
    for line in proc.stdout:
        last = int(line)
        if last >= 30:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    s = FileStore(tmp_path)
    tasks = s.records(Table.TASKS)
    assert all(f"t{i}" in tasks for i in range(last + 1))
    doc = s.load_document("a2a-inbound-ledger.json")
    assert isinstance(doc, dict) and isinstance(doc["upto"], int) and doc["upto"] >= last
