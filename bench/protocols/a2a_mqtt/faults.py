"""A2A over MQTT's own fault kinds (`ProtocolSpec.faults`): the requests a responder must
refuse (its hostile inputs, `attacks`), as the fault catalogue lists them and the one script
that sends them on every substrate."""

from __future__ import annotations

from bench.core.config import OAuth
from bench.faults.primitives import FaultRef, Firing, Inject
from bench.faults.scripts import Context, Refuse, Script, Wait
from bench.faults.spec import FaultKind, FaultSpec, Param
from bench.protocols.a2a_mqtt import attacks, settings


def malformed_request(spec: FaultSpec, ctx: Context) -> Script:
    """Requests an A2A-over-MQTT responder must refuse, one case after another, to every
    responder in turn (or the one named), journaled before each is published."""
    org = settings.org(ctx.topology)
    assert org is not None    # (its protocol's only: parse_fault)
    named = spec.params.get("node")
    targets = [n for n in ctx.topology.nodes if n.role.value == "executor"
               and (named is None or n.id == named)]
    if not targets:
        yield Refuse(f"{named} is no responder of topology {ctx.topology.name}" if named
                     else f"topology {ctx.topology.name} has no responder")
        return
    cases = spec.params["cases"]
    spec_oauth = settings.oauth(ctx.topology)
    if spec_oauth is None and (tokens := [c for c in cases if c in attacks.TOKEN_CASES]):
        yield Refuse(f"malformed_request's token cases ({', '.join(tokens)}) need responders "
                     f"that require bearer tokens, and topology {ctx.topology.name} has no "
                     "[a2a.oauth]")
        return
    n = 0
    while ctx.now_ms() < ctx.end_ms:
        node = targets[n % len(targets)]
        case = cases[n % len(cases)]
        n += 1
        # the bench is the authorization server: it signs the good tokens, and spoils some
        oauth = None if spec_oauth is None else OAuth.of_run(
            ctx.seed, org, node.namespace, signer=True,
            issuer=spec_oauth.issuer, scope=spec_oauth.scope, ttl_s=spec_oauth.token_ttl_s)
        for kind in (attacks.OPENING, case) if case == "context_switch" else (case,):
            msg = attacks.malformed_request(kind, n, spec.index, org=org,
                                                unit=node.namespace, agent=node.agents[0],
                                                target_node=node.id, oauth=oauth,
                                                now_ms=ctx.wall_ms())
            ctx.attack_sent(msg.event)     # journaled first: in the history before the wire
            yield Inject(FaultRef(spec.index, spec.kind), msg.topic, msg.payload, props=msg.props)
            ctx.fired(Firing(attacks.ATTACK, node.id, {"case": kind,
                                                           "messageId": msg.event.message_id}))
        yield Wait(spec.params["interval_ms"])


FAULTS = (
    FaultKind("malformed_request", "A2A over MQTT: the bench publishes requests a responder "
              "must refuse — malformed JSON, non-UTF-8 bytes, a JSON array or null, no "
              "jsonrpc, an unknown method, a missing or non-UUID Task.id, a context id that "
              "differs between User Property and payload, a task's context switched, an "
              "empty payload, no Correlation Data, no Response Topic, and a valid request "
              "with binary Correlation Data — each case in turn; each must get the JSON-RPC "
              "error the profile names (none where there is no reply path; the valid one "
              "its answer), run nothing it should not, and leave the responder serving. "
              "Where responders require bearer tokens ([a2a.oauth]), the token cases: a "
              "request missing its token, or with one not Bearer, not a JWT, expired, for "
              "another unit, from another issuer, forged or short of the scope — each "
              "refused with an error before it is processed (A2M-RSP-7)", {
                  "node": Param("node", "the responder (default: every responder in turn)",
                                required=False),
                  "interval_ms": Param("ms", "time between two requests", 500.0),
                  "cases": Param("texts", "the cases to send, in turn (default: every one "
                                 "but the token cases, the wrong-type ones, "
                                 "type:<field>:<type>, a field of the request given a JSON "
                                 "type A2A does not allow there, the malformed-value "
                                 "ones, value:<field>:<name>, a field given a value of its "
                                 "type the rules forbid, and the property ones, "
                                 "prop:<property>:<form>, an MQTT 5 property in a form the "
                                 "profile forbids or lets vary)", attacks.CASES,
                                 choices=attacks.CASES + attacks.TOKEN_CASES
                                 + attacks.TYPE_CASES + attacks.VALUE_CASES
                                 + attacks.PROP_CASES)},
              malformed_request),
)
