"""Durable store under a node's data dir: JSON documents written atomically (temp file,
fsync, rename, fsync of the directory) and record tables in SQLite (`a2a-node.db`, WAL).

A commit writes the SQLite transaction first, then the documents: a crash between the two
keeps the task table (the stronger dedup) and loses at most the document batch.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

from bench.core.commands import Table
from bench.core.envelope import Json
from bench.storage import StoreError, check_document_name

DB_NAME = "a2a-node.db"


class FileTransaction:
    def __init__(self, store: FileStore) -> None:
        self._store = store
        self.documents: dict[str, Json] = {}
        self.records: dict[tuple[Table, str], str] = {}
        self.open = True

    def put_document(self, name: str, value: Json) -> None:
        self.documents[check_document_name(name)] = value

    def put_record(self, table: Table, key: str, value: Json) -> None:
        self.records[(table, key)] = json.dumps(value, sort_keys=True, separators=(",", ":"))

    def commit(self) -> None:
        if not self.open:
            raise StoreError("transaction already committed")
        self.open = False
        self._store._commit(self)


class FileStore:
    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.data_dir / DB_NAME
        self._db = sqlite3.connect(self.db_path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        for table in Table:
            self._db.execute(f'CREATE TABLE IF NOT EXISTS "{table.value}" '
                             "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def load_document(self, name: str) -> Json:
        path = self.data_dir / check_document_name(name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            value: Json = json.loads(text)
        except ValueError as exc:
            raise StoreError(f"{path}: not valid JSON ({exc}); the file was written "
                             "atomically, so something else changed it") from exc
        return value

    def records(self, table: Table) -> dict[str, Json]:
        rows = self._db.execute(f'SELECT key, value FROM "{table.value}" ORDER BY key').fetchall()
        return {key: json.loads(value) for key, value in rows}

    def begin(self) -> FileTransaction:
        return FileTransaction(self)

    def _commit(self, txn: FileTransaction) -> None:
        if txn.records:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for (table, key), text in txn.records.items():
                    self._db.execute(f'INSERT OR REPLACE INTO "{table.value}" (key, value) '
                                     "VALUES (?, ?)", (key, text))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        for name, value in txn.documents.items():
            self._write_atomic(name, value)

    def _write_atomic(self, name: str, value: Json) -> None:
        data = json.dumps(value, sort_keys=True, indent=1).encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.data_dir)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.data_dir / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def close(self) -> None:
        self._db.close()
