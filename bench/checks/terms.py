"""The checkers' own words and numbers, declared once: what DESIGN calls a task's ending,
the default executor, the admission matrix of each mode, how close to the end a message
may still be on its way, how far node clocks round.

Written out again from DESIGN, not imported from the core the checkers judge: a renamed
value in the core must make a rule fail, not follow along silently.
"""

from __future__ import annotations

from bench.core.events import (
    WALL_CLOCK_RECORDS_LATE_MS,
    WALL_CLOCK_TIMERS_LATE_MS,
    AuthMode,
    InstanceStatus,
    MessageType,
    OutboundState,
    RunStarted,
    SignatureVerdict,
    TaskStatus,
)
from bench.history import History

#: DESIGN §3: the executor every node registers when its roster is empty.
DEFAULT_EXECUTOR = "a2a-local-executor"

#: DESIGN §3 Tasks: SUBMITTED → RUNNING → COMPLETED | FAILED | TIMEOUT | CANCELLED; a
#: request cancelled before it ran, and a task found SUBMITTED or RUNNING after a restart,
#: end FAILED("interrupted").
_T = TaskStatus
TASK_ENDS = frozenset({_T.COMPLETED, _T.FAILED, _T.TIMEOUT, _T.CANCELLED})
TASK_MOVES = frozenset({(_T.SUBMITTED, _T.RUNNING), (_T.SUBMITTED, _T.CANCELLED),
                        (_T.SUBMITTED, _T.FAILED), (_T.RUNNING, _T.COMPLETED),
                        (_T.RUNNING, _T.FAILED), (_T.RUNNING, _T.TIMEOUT),
                        (_T.RUNNING, _T.CANCELLED)})
#: The ends a task answers its requester with (a TIMEOUT and a CANCELLED are told too,
#: DESIGN §3; these two carry a result or an error).
TASK_ANSWERS = frozenset({_T.COMPLETED, _T.FAILED})
#: How a process instance ends.
INSTANCE_ENDS = frozenset({InstanceStatus.COMPLETED, InstanceStatus.FAILED})

#: DESIGN §3 Outbound: the send states that say "we know it did not go out".
NOT_SENT = frozenset({OutboundState.UNDELIVERABLE, OutboundState.FAILED})
#: The message types sent to one node (every other is multicast, a stream or a gate's).
TARGETED = frozenset({MessageType.TASK_REQUEST, MessageType.TASK_RESPONSE,
                      MessageType.DATA_REQUEST, MessageType.DATA_RESPONSE})

#: DESIGN §5: strict admits VERIFIED only; loose also UNSIGNED; audit everything.
_V = SignatureVerdict
ADMITTED: dict[AuthMode, frozenset[SignatureVerdict]] = {
    AuthMode.STRICT: frozenset({_V.VERIFIED}),
    AuthMode.LOOSE: frozenset({_V.VERIFIED, _V.UNSIGNED}),
    AuthMode.AUDIT: frozenset({_V.VERIFIED, _V.UNSIGNED, _V.BAD_SIGNATURE, _V.UNKNOWN_KID,
                               _V.KID_MISMATCH, _V.STALE})}

#: A message published this close to the end of the history may still be on its way.
IN_FLIGHT_AT_END_MS = 2_000
#: The same for a gate's messages and what follows them (a decision, its resume): 3 s since
#: gates came in (9ed625d). Nothing recorded says why it differs from the 2 s above, and
#: making them one would change verdicts: it stays, named.
GATE_IN_FLIGHT_AT_END_MS = 3_000

#: PROTOCOL W-GATE-4: an unacknowledged decision is re-sent 2 000 ms x attempt after each
#: attempt, 6 attempts at most; after the last one's wait the gate is given up (UNACKED).
GATE_RETRY_MS = 2_000
GATE_MAX_ATTEMPTS = 6

#: [MQTT-3.1.2-24] wants a silent client given up after 1.5 x its keepalive; brokers check in
#: sweeps (Mosquitto 2.0 every 6 s on whole seconds: 7-14 s at keepalive 5 s, measured by
#: `a2a-bench brokers`). A broker that has not given it up by twice the clause's bound
#: (3 x keepalive) is not sweeping late: it does not give silent clients up.
GIVE_UP_BOUND_KEEPALIVES = 3.0

#: Node clocks read whole milliseconds; the bench's are floats.
CLOCK_SLACK_MS = 1.0


def records_late_ms(h: History) -> float:
    """How long after a node's decision its record may be stamped in the run `h` records,
    as its substrate said in RunStarted (0 when simulated, where a record is stamped at the
    instant of the decision); a history older than that field gets a wall clock's."""
    started = h.of(RunStarted)
    late = started[0].records_late_ms if started else None
    return WALL_CLOCK_RECORDS_LATE_MS if late is None else late


def timers_late_ms(h: History) -> float:
    """How late a node's timer may fire in the run `h` records, as its substrate said in
    RunStarted (0 when simulated); a history older than that field gets a wall clock's."""
    started = h.of(RunStarted)
    late = started[0].timers_late_ms if started else None
    return WALL_CLOCK_TIMERS_LATE_MS if late is None else late

#: The fault whose messages a node must refuse as malformed input (DESIGN §3): judged by
#: robustness.malformed_envelopes_refused, left alone by the rules of other attacks and drops
MALFORMED_ENVELOPE = "malformed_envelope"
