"""The wire tap and the verdicts judged from it (issue 17: evidence that does not trust the
node). One real quickstart on amqtt with every node tapped gives a history whose wire
events agree with what the nodes report; each rule of wire_evidence is then shown to fail
on that real history mutated the way a plausible node bug would change it, and on the
seeded defects a wire can show."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.checks import judge
from bench.cli import EXIT_OK
from bench.history import History
from bench.run import run_scenario
from bench.substrates import Options
from bench.variants import REFERENCE, VARIANTS
from tests.live.conftest import compressed

Lines = list[dict[str, Any]]


@pytest.fixture(scope="module")
def tapped(tmp_path_factory: pytest.TempPathFactory) -> Lines:
    out = tmp_path_factory.mktemp("tapped")
    result = run_scenario(compressed("quickstart", 4), REFERENCE, out, mode="live",
                          options=Options(broker="amqtt", wire_tap=True))
    verdicts = {v.name: v.value.value for v in result.verdicts}
    # wire-judged and node-reported verdicts agree on the reference: all TRUE
    assert result.exit_code == EXIT_OK and set(verdicts.values()) == {"true"}, verdicts
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def _wire(lines: Lines, **match: Any) -> list[dict[str, Any]]:
    return [e for e in lines if e["kind"] == "wire" and all(e.get(k) == v for k, v in match.items())]


def _clean_session(lines: Lines) -> None:
    _wire(lines, packet="CONNECT", node="exec-1")[0]["cleanSession"] = True


def _subscribe_other_inbox(lines: Lines) -> None:
    sub = _wire(lines, packet="SUBSCRIBE", node="exec-1")[0]
    sub["filters"] = [*sub["filters"], "ooder/node/+/inbox"]


def _publish_to_another_inbox(lines: Lines) -> None:
    e = _wire(lines, packet="PUBLISH", direction="out", node="orch-1", messageType="TASK_REQUEST")[0]
    e["topic"] = "ooder/node/exec-9/inbox"


def _answer_elsewhere(lines: Lines) -> None:
    """A response addressed to a real node, consistently, but not the one that asked."""
    e = _wire(lines, packet="PUBLISH", direction="out", messageType="TASK_RESPONSE")[0]
    other = "exec-2" if e["node"] != "exec-2" else "exec-3"
    e["topic"], e["targetNodeId"] = f"ooder/node/{other}/inbox", other


def _repeat_a_seq(lines: Lines) -> None:
    frames = _wire(lines, packet="PUBLISH", direction="out", messageType="FLOW_EVENT")
    first = frames[0]
    later = next(f for f in frames[1:] if f["stream"] == first["stream"] and f["node"] == first["node"])
    later["streamSeq"] = first["streamSeq"]


def _skip_an_ack(lines: Lines) -> None:
    """A node that never acknowledges one message but goes on acknowledging later ones."""
    acks = _wire(lines, packet="PUBACK", direction="out", node="exec-1")
    lines.remove(acks[len(acks) // 2])


def _admit_what_never_came(lines: Lines) -> None:
    admitted = next(e for e in lines if e["kind"] == "inbound_admitted" and e["via"] == "mqtt"
                    and e["node"] == "exec-2")
    for e in _wire(lines, packet="PUBLISH", direction="in", messageId=admitted["messageId"]):
        lines.remove(e)


def _take_without_a_word(lines: Lines) -> None:
    """A node that PUBACKs a request and reports nothing of it (a silent loss at the node)."""
    admitted = next(e for e in lines if e["kind"] == "inbound_admitted" and e["via"] == "mqtt"
                    and e["node"] == "exec-3" and e["messageType"] == "TASK_REQUEST")
    lines.remove(admitted)


MUTATIONS: dict[str, tuple[Callable[[Lines], None], str]] = {
    "clean session": (_clean_session, "connects_with_its_session_and_will"),
    "another node's inbox subscribed": (_subscribe_other_inbox, "subscribes_to_its_own_inbox"),
    "published to an inbox it does not name": (_publish_to_another_inbox,
                                               "publishes_to_the_inbox_it_names"),
    "response to another node": (_answer_elsewhere, "responses_return_to_the_requester"),
    "a seq repeated": (_repeat_a_seq, "frames_never_repeat_a_seq"),
    "a PUBACK skipped": (_skip_an_ack, "acknowledges_what_it_takes"),
    "admitted what never came": (_admit_what_never_came, "reports_match_the_wire"),
    "acknowledged without a word": (_take_without_a_word, "reports_match_the_wire"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_wire_rule_fails_on_a_real_history_mutated_as_a_bug_would(
        tapped: Lines, mutation: str) -> None:
    mutate, rule = MUTATIONS[mutation]
    lines = copy.deepcopy(tapped)
    mutate(lines)
    [v] = judge(History.from_lines(lines), ["wire_evidence"])
    assert v.value.value == "false", (mutation, v.counts)
    assert v.rules[rule]["violations"] >= 1, (mutation, v.rules)
    assert {c["rule"] for c in v.counterexamples} == {rule}, v.counterexamples


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Lines:
    """The attacks scenario (strict mode: forged senders, a replay) with every node tapped."""
    out = tmp_path_factory.mktemp("attacked")
    result = run_scenario(compressed("attacks", 12), REFERENCE, out, mode="live",
                          options=Options(broker="amqtt", wire_tap=True))
    [v] = [v for v in result.verdicts if v.name == "wire_evidence"]
    assert v.value.value == "true" and v.counts.get("refusable", 0) > 0, v.counts
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def _answer_a_refused_attack(lines: Lines) -> None:
    """The node answered an attack its mode refuses (as if it had admitted it)."""
    reached = {(e["node"], e.get("messageId")) for e in _wire(lines, packet="PUBLISH", direction="in")}
    a = next(e for e in lines if e["kind"] == "attack_sent" and e["honestVerdict"] != "VERIFIED"
             and e.get("requestId") and (e["targetNodeId"], e["messageId"]) in reached)
    answer = copy.deepcopy(_wire(lines, packet="PUBLISH", direction="out",
                                 messageType="TASK_RESPONSE")[0])
    answer.update(node=a["targetNodeId"], requestId=a["requestId"], messageId="forged-answer")
    lines.insert(lines.index(a) + 1, answer)


#: the rules whose mutation needs the attacks scenario's history, not the quickstart's
ATTACK_MUTATIONS: dict[str, tuple[Callable[[Lines], None], str]] = {
    "an attack answered": (_answer_a_refused_attack, "refused_requests_get_no_answer"),
}


def test_an_answer_to_a_refused_attack_fails_the_wire(attacked: Lines) -> None:
    mutate, rule = ATTACK_MUTATIONS["an attack answered"]
    lines = copy.deepcopy(attacked)
    mutate(lines)
    [v] = judge(History.from_lines([{**e, "seq": i + 1} for i, e in enumerate(lines)]),
                ["wire_evidence"])
    assert v.value.value == "false" and v.rules[rule]["violations"] >= 1, v.rules
    assert {c["rule"] for c in v.counterexamples} == {rule}, v.counterexamples


def test_strict_mode_that_trusts_claims_answers_forgeries_on_the_wire(tmp_path: Path) -> None:
    """The seeded defect strict_trusts_claims admits what claims to be signed: its answers
    to forged requests cross the wire, whatever it says it admitted."""
    result = run_scenario(compressed("attacks", 12), VARIANTS["strict_trusts_claims"], tmp_path,
                          mode="live", options=Options(broker="amqtt", wire_tap=True))
    [v] = [v for v in result.verdicts if v.name == "wire_evidence"]
    rule = "refused_requests_get_no_answer"
    assert v.value.value == "false" and v.rules[rule]["violations"] >= 1, (v.rules, v.counts)


@pytest.mark.parametrize(("variant", "rule"), [
    ("agent_id_as_node_id", "publishes_to_the_inbox_it_names"),
    ("reply_to_from_agent", "responses_return_to_the_requester"),
    ("clean_session", "connects_with_its_session_and_will"),
])
def test_seeded_defects_show_on_the_wire(tmp_path: Path, variant: str, rule: str) -> None:
    """The wire alone shows what the node's own account also shows (a request to an
    agentId's inbox, a response to the requester's agentId), and what only a restart would
    otherwise show (a clean session: on the wire from its first CONNECT)."""
    result = run_scenario(compressed("quickstart", 4), VARIANTS[variant], tmp_path, mode="live",
                          options=Options(broker="amqtt", wire_tap=True))
    [v] = [v for v in result.verdicts if v.name == "wire_evidence"]
    assert v.value.value == "false" and v.rules[rule]["violations"] >= 1, (v.rules, v.counterexamples)
    caught_by = VARIANTS[variant].caught_by
    if VARIANTS[variant].scenario == "quickstart":
        assert {x.name: x.value.value for x in result.verdicts}[caught_by] == "false"


def test_untapped_runs_say_why_the_wire_was_not_judged(tmp_path: Path) -> None:
    result = run_scenario(compressed("quickstart", 3), REFERENCE, tmp_path, mode="live",
                          options=Options(broker="amqtt"))
    [v] = [v for v in result.verdicts if v.name == "wire_evidence"]
    assert v.value.value == "unknown" and "no node was behind a wire tap" in v.note
    assert result.exit_code == EXIT_OK
