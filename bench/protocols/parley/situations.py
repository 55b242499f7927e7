"""The coverage table's situations of Parley v1: the paths of the library's promises a run
reached — a request re-sent before a sign of life, a result re-sent before its rak, a
duplicate request answered from the handler's state, a command that waited for an
execution slot, a cancel that reached a running command, each liveness outcome, §9's
residual case — read from the history alone, as the rules read it (`rules.read`).

The simulator runs no Parley node: their witnesses are the recorded live runs of
tests/data/parley (tests/checks/test_coverage.py)."""

from __future__ import annotations

from collections.abc import Callable

from bench.history import History
from bench.protocols.parley import rules
from bench.protocols.parley.rules import Run, _run


def _resent(kind: str, out_of: str) -> Callable[[History], int]:
    """Commands whose `kind` its sender published more than once (the tap's copies: DUPs
    of one packet are one)."""
    def count(h: History) -> int:
        run = _run(h)
        nodes = run.commanders if out_of == "commander" else run.handlers
        return sum(len(run.of(node, command, kind, True)) > 1
                   for node, command in list(run.by) if node in nodes)
    return count


def _duplicate_request_answered(h: History) -> int:
    """A request for an id its handler had admitted reached it again, and was answered
    (from the handler's state: an hb or the cached res) — H1's path."""
    run = _run(h)
    found = 0
    for (node, _command), msgs in run.by.items():
        reqs = [m for m in msgs if m.kind == "req" and not m.out]
        admitted = [m for m in msgs if m.kind == "hb" and m.out]
        if node in run.handlers and len(reqs) > 1 and admitted \
                and reqs[1].at_ms > admitted[0].at_ms \
                and any(m.out and m.at_ms >= reqs[1].at_ms for m in msgs):
            found += 1
    return found


def _outcome(code: str) -> Callable[[History], int]:
    def count(h: History) -> int:
        return sum(s.code == code for settled in _run(h).settled.values() for s in settled)
    return count


def _cancel_while_running(h: History) -> int:
    run: Run = _run(h)
    found = 0
    for (node, _command), msgs in run.by.items():
        cnls = [m for m in msgs if m.kind == "cnl" and not m.out]
        if node not in run.handlers or not cnls:
            continue
        hbs = [m for m in msgs if m.kind == "hb" and m.out and m.at_ms <= cnls[0].at_ms]
        results = [m for m in msgs if m.kind == "res" and m.out]
        if hbs and (not results or results[0].at_ms >= cnls[0].at_ms):
            found += 1
    return found


def _counted(rule_id: str, prefix: str) -> Callable[[History], int]:
    """How many cases of the counts the rule `rule_id` keeps whose key begins with `prefix`
    (the rule's own reading of the run; looked up when counted: the rules import this
    module)."""
    from bench.checks import Collector, Rule

    def count(h: History) -> int:
        rule: Rule = getattr(rules, rule_id)
        c = Collector("situations")
        c.enter(rule.id)
        rule.fn(h, c)
        return sum(n for key, n in c.counts.items() if key.startswith(prefix))
    return count


#: (name, what it is, how often a history reached it)
SITUATIONS: tuple[tuple[str, str, Callable[[History], int]], ...] = (
    ("parley_request_resent", "a commander published a command's req again before a sign "
     "of life (C1)", _resent("req", "commander")),
    ("parley_result_resent", "a handler published a command's res again before its rak "
     "(H5)", _resent("res", "handler")),
    ("parley_duplicate_request_answered", "a req for an id its handler had admitted reached "
     "it again and was answered from its state (H1)", _duplicate_request_answered),
    ("parley_waited_for_a_slot", "a command was admitted while the handler's execution slots "
     "were full, and waited (H4)", _counted("executions_within_the_cap", "waited_for_a_slot")),
    ("parley_cancel_while_running", "a cnl reached a handler for a command it had admitted "
     "and not yet answered (H7)", _cancel_while_running),
    ("parley_no_ack", "a command ended $noAck: no sign of life in its window (C3)",
     _outcome("$noAck")),
    ("parley_execution_stale", "a command ended $executionStale: its heartbeats stopped (C3)",
     _outcome("$executionStale")),
    ("parley_execution_timeout", "a command ended $executionTimeout: it ran past its cap (C3)",
     _outcome("$executionTimeout")),
    ("parley_residual_declared", "a handler ran a command again once its state was gone "
     "(§9's residual case, declared)", _counted("executed_at_most_once", "declared_residual")),
)
