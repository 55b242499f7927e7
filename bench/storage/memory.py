"""In-memory durable store with an explicit crash model (for the simulator and tests).

Durable is exactly what was committed. A transaction that was begun but not committed
when `crash()` is called is lost, and `crash()` says what it lost. Values are deep-copied
through JSON on the way in and out, so a caller can never alias durable state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import orjson

from bench.core.commands import Table
from bench.core.envelope import Json, non_finite
from bench.storage import StoreError, check_document_name


def _copy(value: Json) -> Json:
    """`json.loads(json.dumps(value))`, through orjson where that gives the same value (it
    refuses ints beyond 64 bits and keys that are not strings, and writes NaN as null)."""
    try:
        text = orjson.dumps(value)
    except TypeError:
        text = b""
    if not text or (b"null" in text and non_finite(value)):
        copied: Json = json.loads(json.dumps(value))
        return copied
    fast: Json = orjson.loads(text)
    return fast


@dataclass
class CrashReport:
    """What a crash destroyed: writes staged in transactions that never committed."""

    lost_documents: list[str] = field(default_factory=list)
    lost_records: list[tuple[str, str]] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return len(self.lost_documents) + len(self.lost_records)


class MemoryTransaction:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.documents: dict[str, Json] = {}
        self.records: dict[tuple[Table, str], Json] = {}
        self.open = True

    def put_document(self, name: str, value: Json) -> None:
        self._check_open()
        self._store._staged(self)
        self.documents[check_document_name(name)] = _copy(value)

    def put_record(self, table: Table, key: str, value: Json) -> None:
        self._check_open()
        self._store._staged(self)
        self.records[(table, key)] = _copy(value)

    def commit(self) -> None:
        self._check_open()
        self._store._commit(self)
        self.open = False

    def _check_open(self) -> None:
        if not self.open:
            raise StoreError("transaction already committed or lost in a crash")


class MemoryStore:
    def __init__(self) -> None:
        self._documents: dict[str, Json] = {}
        self._tables: dict[Table, dict[str, Json]] = {t: {} for t in Table}
        # the transactions with something staged and not committed (a crash loses them); one
        # that stages nothing is never here: a batch without writes begins one and leaves it,
        # and a list of those grew by one per message (a million at 1,000 nodes)
        self._open: dict[int, MemoryTransaction] = {}
        self.commits = 0
        self.crashes = 0

    def load_document(self, name: str) -> Json:
        return _copy(self._documents.get(check_document_name(name)))

    def records(self, table: Table) -> dict[str, Json]:
        return {k: _copy(v) for k, v in self._tables[table].items()}

    def begin(self) -> MemoryTransaction:
        return MemoryTransaction(self)

    def _staged(self, txn: MemoryTransaction) -> None:
        self._open.setdefault(id(txn), txn)

    def _commit(self, txn: MemoryTransaction) -> None:
        self._documents.update(txn.documents)
        for (table, key), value in txn.records.items():
            self._tables[table][key] = value
        self._open.pop(id(txn), None)
        self.commits += 1

    def crash(self) -> CrashReport:
        """The process died: every uncommitted transaction is gone."""
        report = CrashReport()
        for txn in self._open.values():
            report.lost_documents.extend(sorted(txn.documents))
            report.lost_records.extend(sorted((t.value, k) for (t, k) in txn.records))
            txn.open = False
        self._open.clear()
        self.crashes += 1
        return report

    def close(self) -> None:
        if self._open:
            raise StoreError(f"closing a store with {len(self._open)} uncommitted transaction(s)")
