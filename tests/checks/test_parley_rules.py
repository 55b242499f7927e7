"""Every Parley rule shown to fail on a mutated real history.

The histories (tests/data/parley/) are live runs of the shipped scenarios of the same name:
the library's own `ParleyCommander` and `ParleyCommandHandler` behind examples/parley, on the
embedded broker, every Parley verdict TRUE. Each mutation changes one thing as a library with
that bug would have put it on the wire (a rak never sent, a request sent after a heartbeat
came, a result sent again after its acknowledgement, ...), and the rule must report it. The
same rules turn FALSE on the library itself with a bug written into it, live, in
tests/live/test_parley.py.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bench.checks import Value, checkers, judge
from bench.protocols.parley import wire
from tests.helpers import Lines, from_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "parley"
Mutation = Callable[[Lines], None]
Event = dict[str, Any]


@cache
def _history(name: str) -> tuple[Event, ...]:
    with gzip.open(DATA / f"{name}.jsonl.gz", "rt") as f:
        return tuple(json.loads(line) for line in f)


def lines_of(name: str) -> Lines:
    return copy.deepcopy(list(_history(name)))


def parley(e: Event, t: str, direction: str, node: str | None = None) -> bool:
    return (e["kind"] == "wire" and (e.get("body") or {}).get("t") == t
            and e["direction"] == direction and (node is None or e["node"] == node))


def first(lines: Lines, pred: Callable[[Event], bool]) -> int:
    return next(i for i, e in enumerate(lines) if pred(e))


def insert_at(lines: Lines, e: Event) -> None:
    """`e` where its time puts it."""
    i = next((i for i, x in enumerate(lines) if x["tMs"] > e["tMs"]), len(lines))
    lines.insert(i, e)


def renumbered(lines: Lines) -> Lines:
    return [{**e, "seq": i + 1} for i, e in enumerate(lines)]


# -- the mutations, each as a library with that bug would have recorded the run ---------------
def drop_retries(lines: Lines) -> None:
    """A commander that sent a request once and then waited: its $noAck command's second and
    third req gone from its wire."""
    noack = next(e["taskId"] for e in lines if e["kind"] == "request_settled"
                 and e.get("code") == "$noAck")
    reqs = [i for i, e in enumerate(lines) if parley(e, "req", "out", "commander-1")
            and e["body"]["id"] == noack]
    for i in sorted(reqs[1:3], reverse=True):
        del lines[i]


def req_after_life(lines: Lines) -> None:
    i = first(lines, lambda e: parley(e, "hb", "in", "commander-1"))
    command = lines[i]["body"]["id"]
    req = copy.deepcopy(lines[first(lines, lambda e: parley(e, "req", "out", "commander-1")
                                    and e["body"]["id"] == command)])
    req["tMs"] = lines[i]["tMs"] + 1500
    insert_at(lines, req)


def no_rak(lines: Lines) -> None:
    del lines[first(lines, lambda e: parley(e, "rak", "out", "commander-1"))]


def settled_twice(lines: Lines) -> None:
    i = first(lines, lambda e: e["kind"] == "request_settled")
    again = {**copy.deepcopy(lines[i]), "tMs": lines[i]["tMs"] + 50}
    insert_at(lines, again)


def noack_after_life(lines: Lines) -> None:
    """A commander that reports $noAck though the handler's heartbeat had reached it."""
    e = lines[first(lines, lambda e: e["kind"] == "request_settled")]
    e.update(outcome="NO_RESPONSE", code="$noAck")


def cancel_without_cnl(lines: Lines) -> None:
    """A commander whose cancel is a local give-up: no cnl on its wire."""
    command = next(e["taskId"] for e in lines if e["kind"] == "request_settled"
                   and e.get("code") == "$cancelled")
    lines[:] = [e for e in lines if not (parley(e, "cnl", "out", "commander-1")
                                         and e["body"]["id"] == command)]


def never_settled(lines: Lines) -> None:
    del lines[first(lines, lambda e: e["kind"] == "request_settled")]


def ran_twice(lines: Lines) -> None:
    i = first(lines, lambda e: e["kind"] == "task_executed")
    insert_at(lines, {**copy.deepcopy(lines[i]), "tMs": lines[i]["tMs"] + 300})


def ran_past_the_cap(lines: Lines) -> None:
    """A command that waited for a slot (admitted, its work begun a while later) started
    at its admission instead, as a handler that ignored its cap would."""
    for i, e in enumerate(lines):
        if e["kind"] != "task_executed":
            continue
        hb = lines[first(lines, lambda x, e=e: parley(x, "hb", "out", e["node"])
                         and x["body"]["id"] == e["taskId"])]
        if e["tMs"] - hb["tMs"] > 1_000:
            insert_at(lines, {**lines.pop(i), "tMs": hb["tMs"] + 1})
            return
    raise AssertionError("no command waited for a slot")


def request_unanswered(lines: Lines) -> None:
    """A handler that took a request in and said nothing: no hb, no res for it."""
    command = lines[first(lines, lambda e: parley(e, "req", "in", "handler-1"))]["body"]["id"]
    lines[:] = [e for e in lines if not (e["kind"] == "wire" and e["node"] == "handler-1"
                                         and e["direction"] == "out"
                                         and (e.get("body") or {}).get("id") == command)]


def hb_after_result(lines: Lines) -> None:
    res = lines[first(lines, lambda e: parley(e, "res", "out", "handler-1"))]
    hb = copy.deepcopy(lines[first(lines, lambda e: parley(e, "hb", "out", "handler-1")
                                   and e["body"]["id"] == res["body"]["id"])])
    hb["tMs"] = res["tMs"] + 400
    insert_at(lines, hb)


def result_never_acknowledged(lines: Lines) -> None:
    """A handler that sends its result once and stops, though no rak came."""
    command = lines[first(lines, lambda e: parley(e, "rak", "in", "handler-1"))]["body"]["id"]
    lines[:] = [e for e in lines if not ((parley(e, "rak", "in", "handler-1")
                                          or parley(e, "rak", "out", "commander-1"))
                                         and e["body"]["id"] == command)]


def result_after_rak(lines: Lines) -> None:
    rak = lines[first(lines, lambda e: parley(e, "rak", "in", "handler-1"))]
    res = copy.deepcopy(lines[first(lines, lambda e: parley(e, "res", "out", "handler-1")
                                    and e["body"]["id"] == rak["body"]["id"])])
    res["tMs"] = rak["tMs"] + 1000
    insert_at(lines, res)


def cancel_ignored(lines: Lines) -> None:
    """A handler that lets a cancelled command run on: its answer to the cancel is ok."""
    handler_cnls = [e for e in lines if parley(e, "cnl", "in", "handler-1")]
    for cnl in handler_cnls:
        command = cnl["body"]["id"]
        after = [e for e in lines if parley(e, "res", "out", "handler-1")
                 and e["body"]["id"] == command and e["tMs"] >= cnl["tMs"]]
        if after and after[0]["body"].get("e") == "$cancelled":
            after[0]["body"] = {"v": 1, "t": "res", "id": command, "ok": True}
            return
    raise AssertionError("no cancel answered $cancelled in the history")


def retained(lines: Lines) -> None:
    lines[first(lines, lambda e: parley(e, "req", "out"))]["retain"] = True


def not_an_envelope(lines: Lines) -> None:
    lines[first(lines, lambda e: parley(e, "hb", "out"))]["body"] = {"bad": "not JSON"}


def id_reused(lines: Lines) -> None:
    sent = [e for e in lines if e["kind"] == "request_sent"]
    sent[1]["taskId"] = sent[0]["taskId"]


#: rule -> (history, mutation)
MUTATIONS: dict[str, tuple[str, Mutation]] = {
    "requests_resent_until_a_sign_of_life": ("restart", drop_retries),
    "no_request_after_a_sign_of_life": ("quickstart", req_after_life),
    "results_acknowledged": ("quickstart", no_rak),
    "one_outcome_per_command": ("quickstart", settled_twice),
    "liveness_outcomes_are_earned": ("quickstart", noack_after_life),
    "cancels_go_on_the_wire": ("cancel", cancel_without_cnl),
    "every_command_settles": ("cancel", never_settled),
    "executed_at_most_once": ("quickstart", ran_twice),
    "requests_answered": ("quickstart", request_unanswered),
    "heartbeats_until_the_result": ("quickstart", hb_after_result),
    "results_resent_until_acknowledged": ("quickstart", result_never_acknowledged),
    "acknowledged_results_not_resent": ("quickstart", result_after_rak),
    "cancels_reach_the_running_handler": ("cancel", cancel_ignored),
    "executions_within_the_cap": ("restart", ran_past_the_cap),
    "publishes_never_retained": ("quickstart", retained),
    "messages_are_envelopes": ("quickstart", not_an_envelope),
    "command_ids_are_valid_and_fresh": ("quickstart", id_reused),
}
OWNER = {r.id: c.name for c in checkers().values() if "parley" in c.protocols for r in c.rules}


def test_every_parley_rule_has_a_mutation() -> None:
    assert set(MUTATIONS) == set(OWNER)


#: recorded runs no mutation starts from, kept for what they hold: a broker restart whose
#: outage held requests in paho until after their $noAck (on the wire after the settlement);
#: a partition whose results paho held and sent only as DUP resends once it reconnected
#: (their first copies never crossed the tap: still the results' first appearance)
ALSO = ("broker_restart", "late_redelivery", "qos0", "quickstart_loaded", "partition_held")


@pytest.mark.parametrize("name", sorted({h for h, _m in MUTATIONS.values()} | set(ALSO)))
def test_the_unmutated_histories_are_true(name: str) -> None:
    verdicts = judge(from_lines(lines_of(name)))
    assert {v.name: v.value for v in verdicts} == {n: Value.TRUE for n in set(OWNER.values())}, \
        [(v.name, v.counterexamples[:1], v.note) for v in verdicts]


@pytest.mark.parametrize("rule_id", sorted(MUTATIONS))
def test_rule_catches_its_mutation(rule_id: str) -> None:
    name, mutate = MUTATIONS[rule_id]
    lines = lines_of(name)
    mutate(lines)
    v = checkers()[OWNER[rule_id]](from_lines(renumbered(lines)))
    assert v.value is Value.FALSE and v.rules[rule_id]["violations"] > 0, \
        (v.rules, v.counterexamples[:2])


def test_the_late_redelivery_is_declared_not_a_violation() -> None:
    """§9's residual case: a command the handler ran again once its state was gone (a
    request redelivered after the tombstone's 20 s) is counted as declared, not FALSE."""
    v = checkers()["parley_handler"](from_lines(lines_of("late_redelivery")))
    assert v.value is Value.TRUE and v.counts.get("declared_residual_state_expired", 0) >= 1


def test_a_run_again_within_the_tombstones_life_is_a_violation() -> None:
    """The same second run moved to a moment the handler still held the id's tombstone."""
    lines = lines_of("late_redelivery")
    runs: dict[str, list[Event]] = {}
    for e in lines:
        if e["kind"] == "task_executed":
            runs.setdefault(e["taskId"], []).append(e)
    again = next(r[1] for r in runs.values() if len(r) > 1)
    again["tMs"] = runs[again["taskId"]][0]["tMs"] + 5_000
    v = checkers()["parley_handler"](from_lines(renumbered(sorted(lines,
                                                                  key=lambda e: e["tMs"]))))
    assert v.value is Value.FALSE and v.rules["executed_at_most_once"]["violations"] == 1


@pytest.mark.parametrize("after_the_res", [False, True])
def test_a_request_again_while_its_command_runs_is_counted_as_tried(after_the_res: bool) -> None:
    """README-1's dedup was tried only where a request reached the handler again while it
    held the command (before its first res): the count `conform` asks of the clause. A copy
    after the res is the cached result's case, not this one."""
    lines = lines_of("quickstart")
    req = lines[first(lines, lambda e: parley(e, "req", "in", "handler-1"))]
    res = lines[first(lines, lambda e: parley(e, "res", "out", "handler-1")
                      and e["body"]["id"] == req["body"]["id"])]
    at = res["tMs"] + 5 if after_the_res else req["tMs"] + 3
    insert_at(lines, {**copy.deepcopy(req), "tMs": at, "dup": True})
    v = checkers()["parley_handler"](from_lines(renumbered(lines)))
    assert v.value is Value.TRUE
    assert v.counts.get("requests_again_while_running", 0) == (0 if after_the_res else 1)
    assert "requests_again_while_running" not in \
        checkers()["parley_handler"](from_lines(lines_of("quickstart"))).counts


@pytest.mark.parametrize(("name", "checker", "count", "at_least"), [
    ("restart", "parley_commander", "requests_resent", 11),
    ("broker_restart", "parley_handler", "results_resent", 6),
    ("partition_held", "parley_handler", "results_resent", 9),
])
def test_a_retry_tried_is_counted_and_a_quiet_run_tried_none(name: str, checker: str,
                                                             count: str, at_least: int) -> None:
    """C1's and H5's re-sends, counted where the recorded run made them (conform asks some
    run of the clause to show one: a partition that caught no command running re-sends no
    result, and a PASS there said nothing of H5); none in the quickstart."""
    assert checkers()[checker](from_lines(lines_of(name))).counts.get(count, 0) >= at_least
    assert count not in checkers()[checker](from_lines(lines_of("quickstart"))).counts


def _without(lines: Lines, pred: Callable[[Event], bool]) -> Lines:
    return renumbered([e for e in lines if not pred(e)])


def test_a_cancelled_execution_whose_res_a_lossy_link_held_ends_at_its_cnl() -> None:
    """parley_qos0 as conform ran it (2026-12-07): a cnl reached handler-1 at 7,855 ms, the
    library cancelled that execution and started a queued command 1 ms later, and the
    $cancelled res left only at 8,368 ms, held by the run's 20 % loss on the handler's link
    (the tap stamps what leaves for the broker). The execution ended at the cnl: TRUE,
    counted. Without the fault, or without the cnl, the late res is the end again: FALSE."""
    lines = lines_of("qos0_late_cancel")
    v = checkers()["parley_handler"](from_lines(lines))
    assert v.value is Value.TRUE and v.counts["cancelled_ended_at_its_cnl"] >= 1
    cnl = lines[first(lines, lambda e: parley(e, "cnl", "in", "handler-1")
                      and e["tMs"] == 7_855)]
    for mutated in (_without(lines, lambda e: e["kind"].startswith("fault")
                             and e.get("fault") == "loss"),
                    _without(lines, lambda e: e is cnl)):
        v = checkers()["parley_handler"](from_lines(mutated))
        assert v.value is Value.FALSE and v.rules["executions_within_the_cap"]["violations"], \
            v.counts


def _reconnected_between_hb_and_res(lines: Lines, *hb_after_ms: float) -> Lines:
    """handler-1 connects again after a command's first hb (the old connection taken over);
    its res comes out 40 ms after the CONNECT and an hb for it each of `hb_after_ms` after it, as
    the tap saw across a takeover in parley_duplicate_client_id (docs/findings/parley-mqtt.md)."""
    res = lines[first(lines, lambda e: parley(e, "res", "out", "handler-1"))]
    hb = lines[first(lines, lambda e: parley(e, "hb", "out", "handler-1")
                     and e["body"]["id"] == res["body"]["id"])]
    connect = {"kind": "wire", "node": "handler-1", "direction": "out", "packet": "CONNECT",
               "clientId": "handler-1", "cleanSession": False, "tMs": hb["tMs"] + 100}
    insert_at(lines, connect)
    lines.remove(res)
    res["tMs"] = connect["tMs"] + 40
    insert_at(lines, res)
    for after in hb_after_ms:
        insert_at(lines, {**copy.deepcopy(hb), "tMs": res["tMs"] + after})
    return renumbered(lines)


def test_an_hb_held_through_an_outage_may_come_out_after_the_res() -> None:
    """The hb published while the connection was down and written after the res published
    once it was up: the wire cannot say the handler published it after its res."""
    v = checkers()["parley_handler"](from_lines(_reconnected_between_hb_and_res(
        lines_of("quickstart"), 6.0)))
    assert v.value is Value.TRUE, v.counterexamples[:2]
    assert v.counts["hb_held_through_an_outage_after_its_res"] == 1


@pytest.mark.parametrize("hb_after_ms", [(1_100.0,), (6.0, 906.0)])
def test_an_hb_past_the_flush_or_a_second_one_is_still_after_the_res(
        hb_after_ms: tuple[float, ...]) -> None:
    """An hb more than FLUSHED_MS after the CONNECT, or a second one after the res on the
    new connection (a heartbeat never stopped), is H3 broken."""
    v = checkers()["parley_handler"](from_lines(_reconnected_between_hb_and_res(
        lines_of("quickstart"), *hb_after_ms)))
    assert v.value is Value.FALSE
    assert v.rules["heartbeats_until_the_result"]["violations"] == 1, v.rules


@pytest.mark.parametrize(("payload", "read"), [
    (b'{"v":1,"t":"res","id":"abc","ok":false,"e":"$busy"}',
     {"v": 1, "t": "res", "id": "abc", "ok": False, "e": "$busy"}),
    (b'{"v":1,"t":"hb","id":"abc","p":null,"extra":[1]}', {"v": 1, "t": "hb", "id": "abc"}),
    (b"\xff\xfe", {"bad": "not JSON"}),
    (b"[1,2]", {"bad": "not an object"}),
    (b'{"v":true,"t":"req","id":"x"}', {"t": "req", "id": "x", "bad": "v is bool"}),
    (b'{"t":"req","id":"x"}', {"t": "req", "id": "x", "bad": "v, t or id missing"}),
    (b"", None),
])
def test_the_taps_parser_reads_the_envelope_as_section_4_says(payload: bytes,
                                                              read: Event | None) -> None:
    assert wire.read("bench/backup/res", payload) == read


def test_a_settlement_stamped_just_before_the_taps_record_of_its_result_is_no_violation() -> None:
    """CI, 2026-12-06, a loaded machine: the commander's request_settled (its own clock) came
    1 to 2 ms before the tap's record of the res behind it (the bench's clock, stamped as the
    proxy got to it); one_outcome_per_command called four library runs FALSE. The rules
    allow CROSSED_MS between a node's line and the tap's record of its cause."""
    verdicts = judge(from_lines(lines_of("quickstart_loaded")))
    assert {v.name: v.value for v in verdicts} == {n: Value.TRUE for n in set(OWNER.values())}


def test_an_overrun_shorter_than_the_tap_tolerance_is_caught() -> None:
    """A CI run of the library with its cap check written `<=` (seeded.py one-slot-too-many,
    parley_broker_restart under ten workers, 2026-12-06): three commands ran at once on a
    cap of 2, the first answered 365 ms after the third began and its res 2 ms later. When
    an execution ended at any res within CROSSED_MS of the next start, the overlap hid and
    the rule said TRUE; a result's res follows the answer, which ends it exactly."""
    v = checkers()["parley_handler"](from_lines(lines_of("seeded_one_slot_too_many")))
    assert v.value is Value.FALSE
    assert any(c["rule"] == "executions_within_the_cap" and "while 2 others ran" in c["why"]
               for c in v.counterexamples)
