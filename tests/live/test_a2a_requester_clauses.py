"""The requester's clauses judged last (A2M-REQ-3, A2M-ERR-3, A2M-RETRY-7, A2M-STREAM-2/3),
each off the wire of examples/a2a-requester, a requester written outside the bench: as
written it keeps them (its runs below, recorded once); a real history of it, mutated where
the clause would be broken, turns the rule FALSE (CLAUSE_MUTATIONS); and with a bug of its
own (`--bug`) it breaks the clause the bug is about."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.checks import Value, checkers
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import Options
from bench.variants import REFERENCE
from tests.helpers import from_lines
from tests.live.conftest import compressed
from tests.live.test_a2a_live import REQUESTER

Lines = list[dict[str, Any]]


def _run(out: Path, name: str, *bug: str) -> tuple[Any, Lines]:
    scenario = load_scenario(SCENARIOS / f"{name}.toml").with_node_command(
        "requester", (*REQUESTER, *(("--bug", bug[0]) if bug else ())))
    result = run_scenario(scenario, REFERENCE, out, mode="live",
                          options=Options(broker="mosquitto"))
    [v] = [v for v in result.verdicts if v.name == "a2a_requests"]
    return v, [json.loads(line) for line in (out / "history.jsonl").open()]


def _judged(lines: Lines) -> Any:
    return checkers()["a2a_requests"](from_lines([{**e, "seq": i + 1}
                                                  for i, e in enumerate(lines)]))


def _wire(lines: Lines, direction: str, prefix: str) -> Lines:
    return [e for e in lines if e["kind"] == "wire" and e["node"] == "client-1"
            and e["direction"] == direction and e["packet"] == "PUBLISH"
            and (e.get("topic") or "").startswith(prefix)]


def _correlation(e: dict[str, Any]) -> str | None:
    return (e.get("properties") or {}).get("correlationData")


# -- mutations of its real histories ----------------------------------------------------------------
def _unnamed_reply_taken(lines: Lines) -> None:
    """The first task that got a pooled reply naming no responder is never asked about
    again: as if the requester had taken that reply for its answer (A2M-REQ-3)."""
    asked = _wire(lines, "out", "$a2a/v1/request/")
    unnamed = next(e for e in _wire(lines, "in", "$a2a/v1/reply/")
                   if not any(u[0] == "a2a-responder-agent-id"
                              for u in (e.get("properties") or {}).get("userProperties", []))
                   and any(a["seq"] > e["seq"] and a.get("taskId") == e.get("taskId")
                           for a in asked))
    later = [a for a in asked if a["seq"] > unnamed["seq"] and a.get("taskId") == unnamed["taskId"]]
    gone = {_correlation(a) for a in later}
    lines[:] = [e for e in lines if e not in later and not (
        e in _wire(lines, "in", "$a2a/v1/reply/") and _correlation(e) in gone)]


def _refused_sent_again(lines: Lines) -> None:
    """A request the responder refused -32005 is published again a second later, its
    binding metadata as it was (A2M-ERR-3)."""
    error = next(e for e in _wire(lines, "in", "$a2a/v1/reply/") if e.get("rpcError") == -32005)
    sent = next(e for e in _wire(lines, "out", "$a2a/v1/request/")
                if _correlation(e) == _correlation(error))
    again = copy.deepcopy(sent)
    again["properties"]["correlationData"] = "0f" * 16
    again["tMs"] = error["tMs"] + 1_000
    lines.insert(lines.index(error) + 1, again)


def _gets(lines: Lines) -> Lines:
    return [e for e in _wire(lines, "out", "$a2a/v1/request/") if e.get("rpcMethod") == "GetTask"]


def _no_get_task(lines: Lines) -> None:
    """No GetTask after the streams stalled (A2M-RETRY-7)."""
    gets = _gets(lines)
    lines[:] = [e for e in lines if e not in gets]


def _request_again_for_get_task(lines: Lines) -> None:
    """The stalled streams' request published again where the GetTask was (A2M-RETRY-7)."""
    for e in _gets(lines):
        e["rpcMethod"] = "SendStreamingMessage"


def _never_said_ended(lines: Lines) -> None:
    """Its first operation, answered early, is never said ended (request_settled gone):
    liveness, the requester's side."""
    first = next(e for e in lines if e["kind"] == "request_settled"
                 and e["outcome"] == "COMPLETED" and e["tMs"] < 15_000)
    lines.remove(first)


#: name -> (the scenario its as-written history comes from, the mutation, the rule it breaks)
CLAUSE_MUTATIONS: dict[str, tuple[str, Callable[[Lines], None], str]] = {
    "an unnamed pooled reply taken for the answer": (
        "a2a_pool_unnamed", _unnamed_reply_taken, "unnamed_pooled_replies_answer_nothing"),
    "a request refused -32005 sent again unchanged": (
        "a2a_binding_errors", _refused_sent_again, "protocol_errors_not_retried_unchanged"),
    "a stalled stream with no GetTask": (
        "a2a_stream_stall", _no_get_task, "stalled_streams_recovered_with_get_task"),
    "an operation it never said it ended": (
        "a2a_stream_stall", _never_said_ended, "every_operation_settles"),
    "a stalled stream's request sent again": (
        "a2a_stream_stall", _request_again_for_get_task,
        "stalled_streams_recovered_with_get_task"),
}
#: what each as-written run must have exercised, and seen kept
EXERCISED = {"a2a_pool_unnamed": "unnamed_pooled_replies_ignored",
             "a2a_binding_errors": "protocol_errors",
             "a2a_stream_stall": "stalled_streams_recovered"}


@pytest.fixture(scope="module")
def as_written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lines]:
    """examples/a2a-requester as written on each scenario: every rule of a2a_requests TRUE,
    and the clause the scenario is about exercised."""
    out: dict[str, Lines] = {}
    for name, seen in EXERCISED.items():
        v, lines = _run(tmp_path_factory.mktemp(name), name)
        assert v.value is Value.TRUE and v.counts.get(seen, 0) >= 1, \
            (name, v.counts, v.counterexamples[:2])
        out[name] = lines
    return out


@pytest.mark.parametrize("mutation", sorted(CLAUSE_MUTATIONS))
def test_its_history_mutated_where_the_clause_breaks_is_false(
        as_written: dict[str, Lines], mutation: str) -> None:
    scenario, mutate, rule = CLAUSE_MUTATIONS[mutation]
    lines = copy.deepcopy(as_written[scenario])
    mutate(lines)
    v = _judged(lines)
    assert v.value is Value.FALSE and rule in {c["rule"] for c in v.counterexamples}, \
        (v.rules, v.counterexamples[:2])


def _burst_before(replies: Lines, i: int) -> int:
    """How many replies reached client-1 right before replies[i]: each within 50 ms of the
    one before, all within a second of it (written here apart from the rule's own count)."""
    n = 0
    while n < i and replies[i - n]["tMs"] - replies[i - n - 1]["tMs"] <= 50 \
            and replies[i]["tMs"] - replies[i - n - 1]["tMs"] <= 1_000:
        n += 1
    return n


def _retry_after(lines: Lines, reply: dict[str, Any], after_ms: float) -> None:
    """The request `reply` answered, published again under new Correlation Data
    `after_ms` after the reply reached the requester."""
    sent = next(e for e in _wire(lines, "out", "$a2a/v1/request/")
                if _correlation(e) == _correlation(reply))
    again = copy.deepcopy(sent)
    again["properties"]["correlationData"] = "ab" * 16
    again["tMs"] = reply["tMs"] + after_ms
    lines.insert(next((i for i, e in enumerate(lines) if e["tMs"] > again["tMs"]), len(lines)),
                 again)


@pytest.mark.parametrize(("in_a_burst", "after_ms", "crossed"), [
    (True, -50.0, True), (True, 50.0, False), (False, 550.0, False), (False, 450.0, True)])
def test_a_retry_right_after_a_reply_crossed_it_only_if_the_requester_could_not_read_it_yet(
        as_written: dict[str, Lines], in_a_burst: bool, after_ms: float, crossed: bool) -> None:
    """A retry published within RETRY_CROSSING_MS (500 ms) of a reply, or 20 ms more for
    each reply that came right before it in a burst (a2a_stream_stall's partition ends with
    one), was written before the requester read the reply: counted. Later, it is A2M-RETRY-4
    broken. `after_ms` counts from that bound (the burst as this test counts it)."""
    lines = copy.deepcopy(as_written["a2a_stream_stall"])
    replies = [e for e in lines if e["kind"] == "wire" and e["node"] == "client-1"
               and e["direction"] == "in" and e["packet"] == "PUBLISH"]
    ahead = [_burst_before(replies, i) for i in range(len(replies))]
    # the first reply its task got: none before it stopped the retries already
    firsts = [i for i, e in enumerate(replies) if (e.get("topic") or "").startswith(
        "$a2a/v1/reply/") and e.get("taskId") and not any(
            r.get("taskId") == e["taskId"] for r in replies[:i])]
    i = max(firsts, key=lambda i: ahead[i]) if in_a_burst else \
        next(i for i in firsts if ahead[i] == 0)
    assert not in_a_burst or ahead[i] >= 10, ahead[i]
    before = _judged(lines).counts.get("retries_that_crossed_a_reply", 0)
    _retry_after(lines, replies[i], (500 + 20 * ahead[i] if in_a_burst else 0) + after_ms)
    v = _judged(lines)
    rule = v.rules["no_request_again_after_a_reply"]
    assert rule["violations"] == (0 if crossed else 1), (rule, v.counterexamples[:2])
    assert v.counts.get("retries_that_crossed_a_reply", 0) == before + crossed


@pytest.mark.parametrize(("name", "bug", "rule"), [
    ("a2a_pool_unnamed", "trusts-unnamed-pool-replies", "unnamed_pooled_replies_answer_nothing"),
    ("a2a_binding_errors", "retries-protocol-errors", "protocol_errors_not_retried_unchanged")])
def test_its_bug_breaks_the_clause(tmp_path: Path, name: str, bug: str, rule: str) -> None:
    """With the bug, examples/a2a-requester takes a pooled reply that names no responder
    for the answer (A2M-REQ-3), or sends a request refused -32005 again (A2M-ERR-3)."""
    v, _lines = _run(tmp_path, name, bug)
    assert v.rules[rule]["violations"] >= 1 and rule in {c["rule"] for c in v.counterexamples}, \
        (v.counts, v.counterexamples[:2])


def test_a_requester_that_waits_out_a_finished_stream_is_seen(tmp_path: Path) -> None:
    """examples/a2a-requester --bug waits-out-the-stream takes only a Task result for an
    operation's end: a stream that ended on a status update (A2M-STREAM-2) is left open
    until its 30 s idle wait."""
    scenario = compressed("a2a_streams", 20).with_node_command(
        "requester", (*REQUESTER, "--bug", "waits-out-the-stream"))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    [v] = [v for v in result.verdicts if v.name == "a2a_requests"]
    assert "final_statuses_end_the_operation" in {c["rule"] for c in v.counterexamples}, \
        (v.counts, v.counterexamples[:2])
