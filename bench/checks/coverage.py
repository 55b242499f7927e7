"""Situations: the protocol paths a run reached, recognised from the history alone.

A verdict says nothing went wrong; it says nothing about what was tried. A TRUE from a run
that never declared a relay gap says nothing about gaps. Each situation here is a
"sometimes" assertion (Antithesis's term): a path worth reaching at least once across a
matrix or an exploration, counted per run. Like the checkers, each is read from the
history only, never from the code it describes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.core.events import FaultFired, FaultStart
from bench.history import History
from bench.protocols import DEFAULT, protocols


@dataclass(frozen=True, slots=True)
class Situation:
    name: str
    description: str
    count: Callable[[History], int]
    #: the protocol whose paths it is (None: every protocol's, a fault's)
    protocol: str | None = None


#: The fault catalogue's kinds (bench.faults.CATALOGUE; the checkers import no fault code,
#: a test keeps the two equal): each has its own situation, so the coverage table shows
#: which faults really did something in which cells.
FAULT_KINDS = ("qos1_redelivery", "double_subscription", "empty_directory", "directory_wipe",
               "ghost_announcement", "stale_roster", "restart", "broker_restart", "pause", "partition", "latency", "loss",
               "duplicate_client_id", "missing_reply_node", "publish_failure", "puback_refused", "property_tampering", "malformed_request",
               "malformed_envelope", "forged_sender",
               "hostile_input", "ledger_poisoning", "replay", "tamper_payload", "tamper_routing", "tamper_headers",
               "clock_skew", "key_rotation")


def _bit(kind: str) -> Callable[[History], int]:
    def count(h: History) -> int:
        started = {f.fault_index for f in h.of(FaultStart) if f.fault == kind}
        return len({f.fault_index for f in h.of(FaultFired) if f.fault_index in started})
    return count


SITUATIONS: tuple[Situation, ...] = (
    # each protocol's own, as its checkers' module defines them (`SITUATIONS`; those in
    # its `SHARED_SITUATIONS` any protocol's run may reach): the default protocol's first
    *(Situation(name, what, count,
                None if name in getattr(spec.module("checkers"), "SHARED_SITUATIONS", ())
                else spec.name)
      for spec in sorted(protocols().values(), key=lambda p: (p.name != DEFAULT, p.name))
      for name, what, count in getattr(spec.module("checkers"), "SITUATIONS", ())),
    *(Situation(f"{kind}_bit", f"a {kind} fault did something, not only scheduled (it "
                "fired: in its own terms, what it did)", _bit(kind)) for kind in FAULT_KINDS),
)


def reached(h: History) -> dict[str, int]:
    """Situation -> how often this history reached it (zero included): a protocol's own
    situations only in a run of that protocol (a Parley commander's NO_RESPONSE is no seed
    requester giving up)."""
    from bench.checks import protocol_of
    spoken = protocol_of(h)
    return {s.name: s.count(h) if s.protocol in (None, spoken) else 0 for s in SITUATIONS}
