"""The inbound ledger (DESIGN §3, seed 000 §3.2 A9): durable dedup of `type|messageId`.

Entries live for a TTL (24 h) up to a cap (20,000, oldest evicted first); the node flushes
them on a timer (every 5 s) as a document. What arrived since the last flush is lost in a
crash: that window is real and the bench measures it. No I/O, no clock.
"""

from __future__ import annotations

from bench.core.config import LedgerConfig as LedgerConfig
from bench.core.envelope import Envelope, Json
from bench.core.inputs import LEDGER_DOCUMENT as LEDGER_DOCUMENT


def dedup_key(envelope: Envelope) -> str:
    return f"{envelope.message_type.value}|{envelope.message_id}"


class InboundLedger:
    """Seen keys in first-seen order, with counters for what was evicted or expired."""

    def __init__(self, config: LedgerConfig) -> None:
        self.config = config
        self._seen: dict[str, int] = {}  # key -> first-seen ms, insertion-ordered
        self.dirty = False
        self.evicted = 0
        self.expired = 0
        self.duplicates = 0

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def admit(self, key: str, now_ms: int) -> bool:
        """True if `key` is new (and now recorded); False if it is a duplicate within TTL."""
        seen_at = self._seen.get(key)
        if seen_at is not None:
            if now_ms - seen_at < self.config.ttl_ms:
                self.duplicates += 1
                return False
            del self._seen[key]
            self.expired += 1
        self._seen[key] = now_ms
        self.dirty = True
        while len(self._seen) > self.config.cap:
            del self._seen[next(iter(self._seen))]
            self.evicted += 1
        return True

    def expire(self, now_ms: int) -> int:
        """Drop entries older than the TTL; returns how many."""
        cutoff = now_ms - self.config.ttl_ms
        old = [k for k, at in self._seen.items() if at <= cutoff]
        for k in old:
            del self._seen[k]
        if old:
            self.expired += len(old)
            self.dirty = True
        return len(old)

    def to_document(self) -> dict[str, Json]:
        return {"version": 1, "entries": {k: v for k, v in self._seen.items()}}

    def mark_flushed(self) -> None:
        self.dirty = False

    def restore(self, document: Json, now_ms: int) -> str | None:
        """Load a flushed document. Returns a problem description instead of raising."""
        if document is None:
            return None
        if not isinstance(document, dict) or not isinstance(document.get("entries"), dict):
            return "ledger document has no 'entries' object"
        entries = document["entries"]
        assert isinstance(entries, dict)
        bad = 0
        for key, at in sorted(entries.items(), key=lambda kv: kv[1] if isinstance(kv[1], int) else -1):
            if isinstance(at, int) and not isinstance(at, bool):
                self._seen[key] = at
            else:
                bad += 1
        self.expire(now_ms)
        while len(self._seen) > self.config.cap:
            del self._seen[next(iter(self._seen))]
            self.evicted += 1
        self.dirty = False
        return f"{bad} ledger entries with a non-integer time were skipped" if bad else None
