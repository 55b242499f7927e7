"""A2A over MQTT's situations: what a history reached, counted for the coverage table (never a verdict)."""

from __future__ import annotations

from collections.abc import Callable

from bench.checks.network import Transit
from bench.core.events import (
    A2mAttempt,
    A2mRequestTaken,
    AttackSent,
    AttemptWhy,
    Intake,
)
from bench.history import History
from bench.protocols.a2a_mqtt.rules.tokens import TOKEN_ANSWER


# -- the profile's situations (coverage: reached or not, never a verdict) ------------------------
def _taken(intake_kind: Intake) -> Callable[[History], int]:
    def count(h: History) -> int:
        return sum(t.intake is intake_kind for t in h.of(A2mRequestTaken))
    return count


def _retried_after_its_responder_restarted(h: History) -> int:
    """Requests for a Task.id a responder had taken in before it went down (and came back:
    it took this one in)."""
    began: dict[tuple[str, str], float] = {}
    restarts = h.memo(Transit).crashes
    n = 0
    for t in h.of(A2mRequestTaken):
        if t.task_id is None:
            continue
        if t.intake is Intake.NEW:
            began.setdefault((t.node, t.task_id), t.t_ms)
        elif t.intake is Intake.DUPLICATE and (t.node, t.task_id) in began:
            n += any(began[(t.node, t.task_id)] < x < t.t_ms for x in restarts[t.node])
    return n


def _attempts(why: AttemptWhy) -> Callable[[History], int]:
    def count(h: History) -> int:
        return sum(a.why is why for a in h.of(A2mAttempt))
    return count


#: (name, what it is, how often a history reached it): the coverage table counts these
#: beside the seed protocol's situations (bench/checks/coverage.py)
SITUATIONS: tuple[tuple[str, str, Callable[[History], int]], ...] = (
    ("a2a_retry_answered_from_the_task_table", "a responder took a request for a Task.id it "
     "had, and answered from its task table (nothing ran again)", _taken(Intake.DUPLICATE)),
    ("a2a_retry_after_its_responder_restarted", "a request reached a responder for a Task.id "
     "it took in before it restarted", _retried_after_its_responder_restarted),
    ("a2a_retried_for_no_first_reply", "a requester retried an operation no reply came to in "
     "its first-reply wait", _attempts(AttemptWhy.NO_FIRST_REPLY)),
    ("a2a_sent_again_after_a_requester_restart", "a requester restarted with an operation "
     "open and sent it again", _attempts(AttemptWhy.RESTART)),
    ("a2a_next_turn", "a task that asked for input got its next turn", _taken(Intake.CONTINUED)),
    ("a2a_cancelled_while_running", "a CancelTask reached a task not yet ended",
     _taken(Intake.CANCEL)),
    ("a2a_task_handed_over", "a card owner handed a request's task over to its delegate",
     _taken(Intake.HANDED_OVER)),
    ("a2a_spoilt_token_sent", "a responder that requires bearer tokens was sent a request "
     "whose token it must refuse", lambda h: sum(
         a.attack == "malformed_request" and a.how in TOKEN_ANSWER for a in h.of(AttackSent))),
)
