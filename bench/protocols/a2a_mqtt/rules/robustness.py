"""A2A over MQTT: no agent dies of its own exception (`a2a_robustness`)."""

from __future__ import annotations

from bench.checks import Checker, Collector, rule
from bench.checks.shared import never_raises
from bench.core.events import (
    ExecutorsRegistered,
    NodeStarted,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC


def _no_agent(h: History) -> str | None:
    up = bool(h.of(ExecutorsRegistered)) or bool(h.of(NodeStarted))
    return None if up else "no agent came up"


@rule("DESIGN §3, A2M-RSP-3: whatever an agent is given, it answers with a recorded outcome, "
      "never by dying of its own exception")
def agents_never_raise(h: History, c: Collector) -> None:
    """No requester or responder of the profile raises while handling an input (the seed
    protocol's `never_raises`, on the profile's agents: one rule, two checkers)."""
    never_raises.fn(h, c)


A2A_ROBUSTNESS = Checker(
    "a2a_robustness", "A2A over MQTT: no agent dies of its own exception — whatever it is "
    "given, a requester or a responder answers with a recorded outcome (the seed protocol's "
    "robustness rule, on the profile's agents).",
    (agents_never_raise,), _no_agent, protocols=frozenset({SPEC.name}))
