from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from bench.core.envelope import Envelope, MessageType
from bench.protocols.seed.ledger import InboundLedger, LedgerConfig, dedup_key


def test_dedup_key_is_type_and_message_id() -> None:
    e = Envelope("m1", MessageType.TASK_REQUEST, "fin.a", 0)
    assert dedup_key(e) == "TASK_REQUEST|m1"


def test_defaults_match_the_seed() -> None:
    c = LedgerConfig()
    assert (c.ttl_ms, c.cap, c.flush_interval_ms) == (86_400_000, 20_000, 5_000)


def test_ttl_and_cap_are_counted() -> None:
    led = InboundLedger(LedgerConfig(ttl_ms=100, cap=2))
    assert led.admit("a", 0) and led.admit("b", 1)
    assert not led.admit("a", 50)
    assert led.admit("c", 60)          # evicts a (oldest)
    assert led.evicted == 1 and "a" not in led
    assert led.admit("a", 61)          # a was evicted: seen as new again
    assert led.expire(500) == 2 and led.expired == 2


def test_document_round_trip_drops_expired_entries() -> None:
    led = InboundLedger(LedgerConfig(ttl_ms=100))
    led.admit("a", 0)
    led.admit("b", 90)
    doc = led.to_document()
    fresh = InboundLedger(LedgerConfig(ttl_ms=100))
    assert fresh.restore(doc, now_ms=150) is None
    assert "b" in fresh and "a" not in fresh
    assert not fresh.admit("b", 150)


def test_damaged_document_is_a_problem_not_a_crash() -> None:
    led = InboundLedger(LedgerConfig())
    assert led.restore([1, 2], 0) is not None
    assert "skipped" in (led.restore({"entries": {"a": "x", "b": 3}}, 0) or "")
    assert "b" in led


class LedgerModel(RuleBasedStateMachine):
    """The ledger against a plain model: a key is a duplicate iff it was admitted within
    TTL and not pushed out by the cap."""

    @initialize(ttl=st.integers(1, 50), cap=st.integers(1, 6))
    def setup(self, ttl: int, cap: int) -> None:
        self.led = InboundLedger(LedgerConfig(ttl_ms=ttl, cap=cap))
        self.ttl, self.cap = ttl, cap
        self.now = 0
        self.model: dict[str, int] = {}

    @rule(key=st.sampled_from("abcdefgh"))
    def admit(self, key: str) -> None:
        at = self.model.get(key)
        expect_new = at is None or self.now - at >= self.ttl
        assert self.led.admit(key, self.now) is expect_new
        if expect_new:
            self.model.pop(key, None)
            self.model[key] = self.now
            while len(self.model) > self.cap:
                del self.model[next(iter(self.model))]

    @rule(dt=st.integers(0, 30))
    def tick(self, dt: int) -> None:
        self.now += dt

    @rule()
    def expire(self) -> None:
        self.led.expire(self.now)
        self.model = {k: v for k, v in self.model.items() if v > self.now - self.ttl}

    @rule()
    def flush_and_reload(self) -> None:
        doc = self.led.to_document()
        self.led = InboundLedger(LedgerConfig(ttl_ms=self.ttl, cap=self.cap))
        self.led.restore(doc, self.now)
        self.model = {k: v for k, v in self.model.items() if v > self.now - self.ttl}

    @invariant()
    def never_above_cap(self) -> None:
        assert len(self.led) <= self.cap


TestLedgerModel = LedgerModel.TestCase
