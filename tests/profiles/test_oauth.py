"""Bearer tokens of the profile (A2M-REQ-5, A2M-RSP-7): what the reference requester mints,
the reference responder takes; each spoilt token the bench's attack builds — by its own
code, not the requester's — the responder refuses before it processes the request."""

from __future__ import annotations

import json
import uuid

import pytest

from bench.core import events as ev
from bench.core.commands import Execute, Publish, Record
from bench.core.config import OAuth
from bench.core.inputs import MessageReceived
from bench.protocols.a2a_mqtt import oauth
from bench.protocols.a2a_mqtt.attacks import TOKEN_CASES, bearer
from bench.protocols.a2a_mqtt.responder import Responder, ResponderConfig
from bench.protocols.a2a_mqtt.wire import AUTHORIZATION, Props, Topics

NOW_MS = 1_753_104_622_663.0
TOPICS = Topics("acme", "billing")


def _settings(signer: bool) -> OAuth:
    return OAuth.of_run(7, "acme", "billing", signer=signer, issuer="https://idp.test",
                        scope="a2a:invoke", ttl_s=60)


def test_a_minted_token_is_good_for_its_unit_until_it_expires() -> None:
    token, expires = oauth.mint(_settings(True), "billing.client1", "a2a://acme/billing", NOW_MS)
    held = _settings(False)
    assert held.signing_seed is None                    # a responder holds no signing key
    assert oauth.refused(held, token, NOW_MS) is None
    assert oauth.refused(held, token, expires - 1) is None
    assert oauth.refused(held, token, expires) == "token expired"
    other, _ = oauth.mint(_settings(True), "billing.client1", "a2a://acme/other", NOW_MS)
    assert "InvalidAudience" in (oauth.refused(held, other, NOW_MS) or "")


def _request(value: str | None) -> MessageReceived:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
        "taskId": str(uuid.UUID(int=5, version=4))}}}
    users = ((AUTHORIZATION, value),) if value is not None else ()
    return MessageReceived(NOW_MS, TOPICS.request("billing.tax1"), json.dumps(body).encode(), 1,
                           False, False, 1, Props(response_topic="$a2a/v1/reply/x/y/z/r",
                                                 correlation_data=b"c1",
                                                 user_properties=users))


def _responder() -> Responder:
    return Responder(ResponderConfig(TOPICS, "billing.tax1", oauth=_settings(False)))


@pytest.mark.parametrize("case", ["", *TOKEN_CASES])
def test_the_responder_runs_a_request_only_on_a_good_token(case: str) -> None:
    """A2M-RSP-7: each of the attack's spoilt tokens is refused with an error, nothing runs;
    the attack's good token (its own JWS code) runs the task."""
    value = bearer(_settings(True), "a2a://acme/billing", NOW_MS, case)
    commands = _responder().handle(_request(value))
    ran = [c for c in commands if isinstance(c, Execute)]
    replies = [json.loads(c.payload) for c in commands if isinstance(c, Publish)
               and c.topic.startswith("$a2a/v1/reply/")]
    taken = [c.event for c in commands if isinstance(c, Record)
             and isinstance(c.event, ev.A2mRequestTaken)]
    if not case:
        assert ran and taken[0].intake is ev.Intake.NEW
        return
    assert not ran and taken[0].intake is ev.Intake.REFUSED, taken
    assert replies and replies[0]["error"]["code"] == -32600
    assert "unauthorized" in taken[0].reason and "eyJ" not in json.dumps(replies)


def test_no_tokens_asked_for_none_looked_at() -> None:
    commands = Responder(ResponderConfig(TOPICS, "billing.tax1")).handle(_request(None))
    assert [c for c in commands if isinstance(c, Execute)]


def test_every_case_the_attack_sends_has_the_answer_the_judge_wants() -> None:
    """The judge's tables (written apart from the attack: an oracle shares no code with
    what it judges) name exactly the cases the attack can send: a case added to the attack
    and not to its table would be sent and never judged."""
    from bench.protocols.a2a_mqtt.attacks import CASES, PROP_CASES, PROPERTY_FORMS, TOKEN_CASES
    from bench.protocols.a2a_mqtt.rules.common import ARTIFACT_MODE_ANSWER, IGNORED_ANSWER
    from bench.protocols.a2a_mqtt.rules.replies import MALFORMED_ANSWER
    from bench.protocols.a2a_mqtt.rules.tokens import TOKEN_ANSWER
    assert set(MALFORMED_ANSWER) - set(PROP_CASES) == set(CASES)
    # the property cases: each judged by exactly one table (the MQTT 5 forms of bad input,
    # or the metadata a valid request carries that changes nothing)
    tables = (MALFORMED_ANSWER, IGNORED_ANSWER, ARTIFACT_MODE_ANSWER)
    assert all(sum(case in t for t in tables) == 1 for case in PROP_CASES)
    assert not (set(IGNORED_ANSWER) | set(ARTIFACT_MODE_ANSWER)) - set(PROP_CASES)
    assert len(PROP_CASES) == sum(map(len, PROPERTY_FORMS.values())) == 7
    assert set(TOKEN_ANSWER) == set(TOKEN_CASES)
    # the wrong-type cases: the judge knows an answer for every field the fault derives them from
    from bench.protocols.a2a_mqtt.attacks import TYPE_CASES, TYPED_FIELDS
    from bench.protocols.a2a_mqtt.rules.replies import WRONG_TYPE_ANSWER, answer_to
    assert set(WRONG_TYPE_ANSWER) == set(TYPED_FIELDS)
    assert all(answer_to(case) for case in TYPE_CASES) and len(TYPE_CASES) == 57
    # the malformed-value cases: an answer for every field the value table names
    from bench.protocols.a2a_mqtt.attacks import MALFORMED_VALUES, VALUE_CASES
    from bench.protocols.a2a_mqtt.rules.replies import WRONG_VALUE_ANSWER
    assert set(WRONG_VALUE_ANSWER) == set(MALFORMED_VALUES) <= set(TYPED_FIELDS)
    assert all(answer_to(case) for case in VALUE_CASES) and len(VALUE_CASES) == 9
    assert not set(CASES) & set(TOKEN_CASES)
