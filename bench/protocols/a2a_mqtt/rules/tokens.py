"""A2A over MQTT, OAuth 2.0 bearer tokens (`a2a_oauth`)."""

from __future__ import annotations

from bench.checks import Checker, Collector, rule
from bench.checks.network import LINK_FAULTS, Transit, fault_windows
from bench.core.events import (
    A2mAttempt,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC
from bench.protocols.a2a_mqtt.rules.common import (
    ANY_ERROR,
    _answers_by_path,
    _code,
    _hostile,
    _tokens_required,
    asked,
)


@rule("A2M-REQ-5: where responders require bearer tokens, every request carries one in "
      "a2a-authorization")
def requests_carry_a_token(h: History, c: Collector) -> None:
    """In a run whose responders required bearer tokens (run_started.bearerTokens), every
    request a requester published (its record, or its wire) carried `a2a-authorization:
    Bearer ...` — the first attempt and every retry. A run without tokens required has
    nothing to judge here (the checker's other rules still do)."""
    if not _tokens_required(h):
        return
    for a in h.memo(asked):
        c.count("requests_published")
        if a.bearer is None:
            c.unknown("requests_whose_token_no_record_tells")
        elif a.bearer:
            c.count("requests_with_a_token")
        else:
            c.violation(f"{a.node} published a request to {a.topic} without a bearer token "
                        "in a2a-authorization, to a responder that requires one", a.event)


#: How soon after it was minted a token the bench's requester sent is still good for sure:
#: well within the shortest lifetime a topology gives its tokens (`token_ttl_s`, 60 s on the
#: shipped a2a-oauth topology), whatever the broker's delay
TOKEN_FRESH_MS = 10_000.0


#: JSON-RPC 2.0 invalid request: what a responder of the profile answers a token it refuses
INVALID_REQUEST = -32600


@rule("A2M-RSP-7: a request carrying a good bearer token is processed, not refused as "
      "unauthorized")
def good_tokens_honoured(h: History, c: Collector) -> None:
    """Where responders require tokens, each request the bench's requester sent with a
    token it had just minted (good: signed by the server, for this audience and scope) is
    not answered 'invalid request' (-32600, the refusal of a token) within TOKEN_FRESH_MS
    of its sending. Explained: a fault that may have held the request past its token's
    lifetime (a pause, a partition, latency or loss on either agent's link, a redelivery,
    the broker's restart, the responder's crash) or altered its token (property
    tampering) acted meanwhile. A responder that refuses good tokens — its clock read
    in the wrong unit, the audience compared with another name — answers every request
    with an error, which every other rule takes as an answer."""
    if not _tokens_required(h):
        return
    by_path = h.memo(_answers_by_path)
    crashes = h.memo(Transit).crashes
    # what may hold a request past its token's lifetime (a link fault: a pause, a partition;
    # a redelivery, the broker's restart) or alter its token (property tampering)
    held = [w for w in h.memo(fault_windows) if w.fault in LINK_FAULTS or w.fault in (
        "property_tampering", "qos1_redelivery", "broker_restart")]
    for a in h.memo(asked):
        # the bench's requester (its records say the request carried the token it minted)
        if not isinstance(a.event, A2mAttempt) or a.bearer is not True or a.correlation is None:
            continue
        refused = [x for x in by_path.get((a.response_topic, a.correlation), ())
                   if _code(x) == INVALID_REQUEST and x.t_ms - a.t_ms <= TOKEN_FRESH_MS]
        if not refused:
            c.count("requests_with_a_good_token_not_refused")
            continue
        x = refused[0]
        if any(w.acts_on(a.t_ms, x.t_ms, x.node, a.node) for w in held) \
                or any(a.t_ms <= t <= x.t_ms for t in crashes.get(x.node, ())):
            c.count("refused_after_a_fault_held_or_altered_it")
            continue
        c.violation(f"{x.node} refused {a.node}'s {a.method or 'request'} for task "
                    f"{a.task_id}, whose token was minted {x.t_ms - a.t_ms:.0f} ms before, as "
                    "an invalid request (-32600)", a.event, x.event)


TOKEN_ANSWER: dict[str, tuple[int, ...]] = {
    case: (ANY_ERROR,) for case in ("no_token", "not_bearer", "not_a_jwt", "expired_token",
                                    "wrong_audience", "wrong_issuer", "forged_token",
                                    "missing_scope")}


@rule("A2M-RSP-7: where bearer tokens are required, a request whose token is "
      "missing, expired, for another audience, from another issuer, forged or short of the "
      "scope is refused before it is processed")
def unauthorized_requests_refused(h: History, c: Collector) -> None:
    """Each request of the malformed_request fault's token cases (valid in every other way,
    to a responder that requires tokens) is answered with a JSON-RPC error — the spec names
    no code — and its Task.id is executed nowhere; judged as malformed requests are."""
    _hostile(h, c, TOKEN_ANSWER.get, "a request with a bad token")


def _no_tokens(h: History) -> str | None:
    if _tokens_required(h):
        return None
    return "its responders required no bearer tokens (a topology's [a2a.oauth] asks for them)"


A2A_OAUTH = Checker(
    "a2a_oauth", "A2A over MQTT, bearer tokens: where responders require them, every request "
    "carries one; a request whose token is missing, expired, for another audience, from "
    "another issuer, forged or short of the scope is refused and runs nothing, one whose "
    "token is good is not refused (that no agent echoes a token is a2a_session's, off the "
    "wire).",
    (requests_carry_a_token, unauthorized_requests_refused, good_tokens_honoured), _no_tokens,
    protocols=frozenset({SPEC.name}))
