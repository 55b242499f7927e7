"""Durable stores behind one small interface, and the two things drivers do with them:
`apply` a handle() batch's Persist commands as one transaction, and `restore` what a
restarting node reads back.

Implementations: `memory.MemoryStore` (sim; explicit crash model) and
`files.FileStore` (live/docker; atomic files + SQLite under the node's data dir).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

from bench.core.commands import Command, PersistDocument, PersistRecord, Table
from bench.core.envelope import Json
from bench.core.inputs import LEDGER_DOCUMENT, ROSTER_DOCUMENT, Restored

_DOCUMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class StoreError(RuntimeError):
    """The store cannot do what was asked (a bug or a broken disk): it raises."""


def check_document_name(name: str) -> str:
    if not _DOCUMENT_NAME.match(name):
        raise StoreError(f"document name {name!r} must match {_DOCUMENT_NAME.pattern} "
                         "(a plain file name inside the node's data dir)")
    return name


class Transaction(Protocol):
    def put_document(self, name: str, value: Json) -> None: ...
    def put_record(self, table: Table, key: str, value: Json) -> None: ...
    def commit(self) -> None: ...


class Store(Protocol):
    def load_document(self, name: str) -> Json: ...
    def records(self, table: Table) -> dict[str, Json]: ...
    def begin(self) -> Transaction: ...
    def close(self) -> None: ...


def stage(txn: Transaction, commands: Iterable[Command]) -> int:
    """Stage every Persist* command of a batch into `txn`; returns how many."""
    n = 0
    for cmd in commands:
        if isinstance(cmd, PersistDocument):
            txn.put_document(cmd.name, cmd.value)
            n += 1
        elif isinstance(cmd, PersistRecord):
            txn.put_record(cmd.table, cmd.key, cmd.value)
            n += 1
    return n


def apply(store: Store, commands: Iterable[Command]) -> int:
    """Make a batch's Persist* commands durable together, before its Publishes go out (a
    batch without any begins no transaction: most of a simulation's are such)."""
    txn: Transaction | None = None
    n = 0
    for cmd in commands:
        if isinstance(cmd, PersistDocument | PersistRecord):
            if txn is None:
                txn = store.begin()
            n += stage(txn, (cmd,))
    if txn is not None:
        txn.commit()
    return n


def restore(store: Store) -> Restored:
    return Restored(roster=store.load_document(ROSTER_DOCUMENT),
                    ledger=store.load_document(LEDGER_DOCUMENT),
                    tasks=store.records(Table.TASKS),
                    requests=store.records(Table.REQUESTS),
                    streams=store.records(Table.STREAMS),
                    instances=store.records(Table.INSTANCES),
                    gates=store.records(Table.GATES))
