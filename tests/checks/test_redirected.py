"""What answers a request a man in the middle redirected (tamper_headers rewrites its
replyNodeId to an address that is no node) goes there, as the request said: the response,
the streamed frames, the gate it opens. Three rules excuse that, and only that: each is
shown here to fail again when the history no longer shows the redirect — the attack's
record gone, or the node's admission naming a real node — as a node that sent its
messages to a wrong address by itself would be."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.checks import Value, checkers
from tests.helpers import Lines, explored_lines, from_lines

#: regression scenario -> (checker, rule) it exercises
CASES = {"stream_to_where_a_man_in_the_middle_redirected": [
             ("targeted_delivery", "published_to_a_node"),
             ("relay_integrity", "relayed_frames_accounted")],
         "gate_opened_where_a_man_in_the_middle_redirected": [
             ("targeted_delivery", "published_to_a_node"),
             ("gate_integrity", "open_reaches_gate_store")]}

#: what each rule counts when it excuses a message sent where the attacker redirected it
COUNTER = {"published_to_a_node": "sent_where_an_attacker_redirected_it",
           "relayed_frames_accounted": "relayed_where_an_attacker_redirected_it",
           "open_reaches_gate_store": "gate_open_sent_where_an_attacker_redirected_it"}


def _no_attack_record(lines: Lines) -> None:
    lines[:] = [e for e in lines if not (e["kind"] == "attack_sent"
                                         and e["attack"] == "tamper_headers")]


def _admitted_as_addressed(lines: Lines) -> None:
    for e in lines:
        if e["kind"] == "inbound_admitted" and e.get("replyNodeId") == "mitm":
            e["replyNodeId"] = e["originNodeId"]


MUTATIONS: dict[str, Callable[[Lines], None]] = {
    "no_attack_record": _no_attack_record, "admitted_as_addressed": _admitted_as_addressed}


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lines]:
    return {name: explored_lines(tmp_path_factory.mktemp(name), name) for name in CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_redirect_is_excused_and_exercised(histories: dict[str, Lines], name: str) -> None:
    h = from_lines(histories[name])
    for checker, rule in CASES[name]:
        v = checkers()[checker](h)
        assert v.value is Value.TRUE, (rule, v.counterexamples[:2])
        assert v.counts.get(COUNTER[rule], 0) > 0, (rule, v.counts)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_without_the_redirect_each_rule_fails(histories: dict[str, Lines], name: str,
                                              mutation: str) -> None:
    lines = [dict(e) for e in histories[name]]
    MUTATIONS[mutation](lines)
    h = from_lines([{**e, "seq": i + 1} for i, e in enumerate(lines)])
    for checker, rule in CASES[name]:
        v = checkers()[checker](h)
        assert v.value is Value.FALSE and v.rules[rule]["violations"] > 0, (rule, v.rules[rule])
