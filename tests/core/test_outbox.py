from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from bench.core.auth import AuthConfig
from bench.core.commands import PersistRecord, Publish, Record
from bench.core.effects import Effects
from bench.core.envelope import Envelope, MessageType
from bench.core.machine import IllegalTransition
from bench.core.outcome import EventKind
from bench.core.topics import Topics
from bench.protocols.seed.directory import AgentDescriptor, Announcement, Directory
from bench.protocols.seed.outbox import OUTBOUND, OutboundEvent, OutboundState, Outbox


def test_terminal_states_take_no_events() -> None:
    for state in OUTBOUND.terminal:
        for event in OutboundEvent:
            with pytest.raises(IllegalTransition, match=f"state {state.name} cannot take"):
                OUTBOUND.next(state, event, "m1")


def test_sending_cannot_become_undeliverable() -> None:
    with pytest.raises(IllegalTransition, match="allowed"):
        OUTBOUND.next(OutboundState.SENDING, OutboundEvent.UNRESOLVED, "m1")


def make_outbox(local: list[str]) -> Outbox:
    d = Directory()
    d.apply(Announcement("me", True, "fin", (AgentDescriptor("fin.self", "me"),)))
    d.apply(Announcement("peer", True, "llm", (AgentDescriptor("llm.tax", "peer"),)))
    return Outbox("me", Topics(), d, AuthConfig(), 1, lambda fx, env: local.append(env.message_id))


def test_unresolved_is_undeliverable_with_reason_and_warning_never_broadcast() -> None:
    box = make_outbox([])
    fx = Effects(0)
    env = Envelope("m1", MessageType.TASK_REQUEST, "fin.self", 0, to_agent_id="llm.nobody")
    assert box.send(fx, env) is OutboundState.UNDELIVERABLE
    assert not [c for c in fx.commands if isinstance(c, Publish)]  # nothing on the wire at all
    kinds = [c.kind for c in fx.commands if isinstance(c, Record)]
    assert EventKind.WARNING in kinds
    settled = [c for c in fx.commands if isinstance(c, Record) and c.kind is EventKind.OUTBOUND_SETTLED]
    assert settled[0].fields["state"] == "UNDELIVERABLE"
    assert "llm.nobody" in str(settled[0].fields["reason"])
    stored = [c for c in fx.commands if isinstance(c, PersistRecord)]
    assert stored and stored[-1].value["state"] == "UNDELIVERABLE"  # type: ignore[index]


def test_targeted_publish_goes_to_the_inbox_of_the_resolved_node() -> None:
    box = make_outbox([])
    fx = Effects(0)
    box.send(fx, Envelope("m1", MessageType.TASK_REQUEST, "fin.self", 0, to_agent_id="llm.tax"))
    (pub,) = [c for c in fx.commands if isinstance(c, Publish)]
    assert pub.topic == "ooder/node/peer/inbox"  # the nodeId, never the agentId


class OutboxMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.local: list[str] = []
        self.box = make_outbox(self.local)
        self.n = 0
        self.sent: list[str] = []
        self.published: set[str] = set()
        self.terminal: dict[str, str] = {}

    def _run(self, fn) -> None:  # type: ignore[no-untyped-def]
        fx = Effects(self.n)
        fn(fx)
        for c in fx.commands:
            if isinstance(c, Publish) and c.message_id:
                assert c.message_id not in self.published
                self.published.add(c.message_id)
            if isinstance(c, Record) and c.kind is EventKind.OUTBOUND_SETTLED:
                mid = str(c.fields["messageId"])
                assert mid not in self.terminal, f"{mid} reached a second terminal state"
                self.terminal[mid] = str(c.fields["state"])

    @rule(to=st.sampled_from(["fin.self", "llm.tax", "llm.nobody", None]),
          explicit=st.sampled_from([None, "me", "peer", "elsewhere"]),
          explicit_only=st.booleans(), group=st.booleans())
    def send(self, to: str | None, explicit: str | None, explicit_only: bool, group: bool) -> None:
        self.n += 1
        mid = f"m{self.n}"
        self.sent.append(mid)
        mtype = MessageType.EVENT if group else MessageType.TASK_REQUEST
        env = Envelope(mid, mtype, "fin.self", self.n, to_agent_id=to, target_node_id=explicit,
                       scene_group_id="g1" if group else None)
        if group:
            self._run(lambda fx: self.box.multicast(fx, env))
        else:
            self._run(lambda fx: self.box.send(fx, env, explicit_target_only=explicit_only))

    @precondition(lambda self: bool(self.box.in_flight))
    @rule(data=st.data(), ok=st.booleans())
    def settle(self, data: st.DataObject, ok: bool) -> None:
        mid = data.draw(st.sampled_from(sorted(self.box.in_flight)))
        self._run(lambda fx: self.box.settle(fx, mid, ok, None if ok else "socket closed"))

    @invariant()
    def every_message_is_in_flight_xor_terminal(self) -> None:
        for mid in self.sent:
            assert (mid in self.box.in_flight) != (mid in self.terminal)
        for mid in self.box.in_flight:
            assert self.box.in_flight[mid].state is OutboundState.SENDING
            assert mid in self.published

    @invariant()
    def local_consumption_never_publishes(self) -> None:
        for mid, state in self.terminal.items():
            if state == "LOCAL_CONSUMED":
                assert mid in self.local and mid not in self.published
            if state == "UNDELIVERABLE":
                assert mid not in self.published

    @invariant()
    def counters_agree_with_history(self) -> None:
        for state, count in self.box.counts.items():
            assert count == sum(1 for s in self.terminal.values() if s == state.value)


TestOutboxMachine = OutboxMachine.TestCase
