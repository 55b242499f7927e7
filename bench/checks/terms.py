"""The checkers' own words and numbers, declared once: what DESIGN calls a task's ending,
the default executor, the admission matrix of each mode, how close to the end a message
may still be on its way, how far node clocks round.

Written out again from DESIGN, not imported from the core the checkers judge: a renamed
value in the core must make a rule fail, not follow along silently.
"""

from __future__ import annotations

from bench.core.events import AuthMode

#: DESIGN §3: the executor every node registers when its roster is empty.
DEFAULT_EXECUTOR = "a2a-local-executor"

#: DESIGN §3 Tasks: SUBMITTED → RUNNING → COMPLETED | FAILED | TIMEOUT | CANCELLED; a
#: request cancelled before it ran, and a task found SUBMITTED or RUNNING after a restart,
#: end FAILED("interrupted").
TASK_ENDS = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"})
TASK_MOVES = frozenset({("SUBMITTED", "RUNNING"), ("SUBMITTED", "CANCELLED"),
                        ("SUBMITTED", "FAILED"), ("RUNNING", "COMPLETED"), ("RUNNING", "FAILED"),
                        ("RUNNING", "TIMEOUT"), ("RUNNING", "CANCELLED")})

#: DESIGN §5: strict admits VERIFIED only; loose also UNSIGNED; audit everything.
ADMITTED: dict[AuthMode, frozenset[str]] = {
    AuthMode.STRICT: frozenset({"VERIFIED"}),
    AuthMode.LOOSE: frozenset({"VERIFIED", "UNSIGNED"}),
    AuthMode.AUDIT: frozenset({"VERIFIED", "UNSIGNED", "BAD_SIGNATURE", "UNKNOWN_KID",
                               "KID_MISMATCH", "STALE"})}

#: A message published this close to the end of the history may still be on its way.
IN_FLIGHT_AT_END_MS = 2_000
#: The same for a gate's messages and what follows them (a decision, its resume): 3 s since
#: gates came in (9ed625d). Nothing recorded says why it differs from the 2 s above, and
#: making them one would change verdicts: it stays, named.
GATE_IN_FLIGHT_AT_END_MS = 3_000

#: Node clocks read whole milliseconds; the bench's are floats.
CLOCK_SLACK_MS = 1.0
