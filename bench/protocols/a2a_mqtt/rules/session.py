"""A2A over MQTT, an agent's session and presence as its wire shows them (`a2a_session`)."""

from __future__ import annotations

import re
from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.core.events import (
    FaultStart,
    NodeCrashed,
    Wire,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC
from bench.protocols.a2a_mqtt.rules.common import (
    BINDING_PROPERTIES,
    DISCOVERY_PREFIX,
    REQUEST_PREFIX,
    _props,
    _tokens_required,
    _user,
)


@rule("A2M-RSP-6: a bearer token is echoed nowhere: no reply, stream item or other message "
      "an agent publishes carries one, in its payload or its properties")
def tokens_never_echoed(h: History, c: Collector) -> None:
    """Off the wire tap (the tap fingerprints every JWT anywhere in a PUBLISH and records
    none): no PUBLISH a tapped agent sends, other than its own requests' a2a-authorization,
    carries a bearer token — a reply that copies the request's User Properties, an error
    that quotes the header, a stream item with the caller's claims."""
    required = _tokens_required(h)
    received: dict[str, set[str]] = defaultdict(set)
    for w in h.of(Wire):
        if w.packet != "PUBLISH" or not w.tokens:
            continue
        if w.direction == "in":
            received[w.node].update(w.tokens)
            continue
        topic = w.topic or ""
        # a request's own header carries its token: the one place a token belongs
        own = _user(w, "a2a-authorization") if topic.startswith(REQUEST_PREFIX) else None
        echoed = [t for t in w.tokens if own is None or t not in own]
        c.count("token_carrying_publishes")
        if echoed:
            whose = "a token it was sent" if set(echoed) & received[w.node] else "a token"
            c.violation(f"{w.node} published {whose} on {topic} (fingerprint {echoed[0]}): "
                        "a bearer token is never echoed", w)
    if required and not received:
        c.unknown("no_token_reached_a_tapped_agent")   # tokens were due, none was seen


@rule("A2M-SESS-6: a connection that carries bearer tokens uses TLS")
def tokens_travel_over_tls(h: History, c: Collector) -> None:
    """Off the wire tap: every PUBLISH carrying a bearer token — a request as its requester
    sent it, the same request as the broker delivered it to its responder — crossed a
    connection that came by TLS (its CONNECT, as the tap stamped it). A token on plain TCP
    can be read by anyone on the path and replayed until it expires."""
    crossed = 0
    for node, ws in sorted(h.memo(_tapped).items()):
        connect: Wire | None = None      # the CONNECT of the connection the packets cross
        plain: list[Wire] = []           # what crossed it with a token, where it was plain
        for w in [*ws, None]:
            if w is None or (w.packet == "CONNECT" and w.direction == "out"):
                if connect is not None and plain:
                    first = plain[0]
                    verb = "sent" if first.direction == "out" else "was delivered"
                    c.violation(f"{node} {verb} a bearer token (fingerprint "
                                f"{(first.tokens or ['?'])[0]})"
                                f" on {first.topic} over plain TCP, and {len(plain)} in all on "
                                "that connection: it did not come by TLS", connect, first)
                connect, plain = w, []
            elif w.packet == "PUBLISH" and w.tokens:
                crossed += 1
                if connect is None:
                    c.unknown("tokens_on_a_connection_whose_connect_was_not_seen")
                elif not connect.tls:
                    plain.append(w)
    c.count("tokens_crossing_taps", crossed)
    if _tokens_required(h) and not crossed:
        c.unknown("no_token_crossed_a_tapped_connection")


# -- an agent's session and presence, from its wire tap --------------------------------------------
#: A2M-SESS-3's client id, read here on its own: three A2M-ID-1 identifiers (a run isolated on
#: a shared broker appends "-<run id>" to the last, which keeps it one identifier)
CLIENT_ID = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def _tapped(h: History) -> dict[str, list[Wire]]:
    """Each node behind a wire tap -> the packets the tap saw cross its connection."""
    out: dict[str, list[Wire]] = defaultdict(list)
    for w in h.of(Wire):
        out[w.node].append(w)
    return out


def _responders(tapped: dict[str, list[Wire]]) -> set[str]:
    """The tapped nodes that subscribed a request topic of the profile: responders."""
    return {n for n, ws in tapped.items() if any(
        f.startswith(REQUEST_PREFIX) or (f.startswith("$share/") and REQUEST_PREFIX in f)
        for w in ws if w.packet == "SUBSCRIBE" for f in (w.filters or ()))}


@rule("A2M-SESS-1: MQTT 5")
def connects_with_mqtt5(h: History, c: Collector) -> None:
    """Every CONNECT a tapped agent sent speaks MQTT 5: the profile's Response Topic,
    Correlation Data and User Properties do not exist in 3.1.1."""
    for node, ws in sorted(h.memo(_tapped).items()):
        for w in ws:
            if w.packet == "CONNECT" and w.direction == "out":
                c.count("connects")
                if w.mqtt != "5":
                    c.violation(f"{node} connected with MQTT {w.mqtt or '3.1.1'}, not 5", w)


@rule("A2M-SESS-5 (SHOULD): a session that outlives a connection (clean start 0, a Session "
      "Expiry Interval above 0)")
def connects_with_a_persistent_session(h: History, c: Collector) -> None:
    """Every MQTT 5 CONNECT a tapped agent sent asks to resume its session (clean start 0)
    and gives it a Session Expiry Interval above 0: with clean start 1, or an expiry of 0,
    what the broker queued for it while it was away — requests, replies — is gone when it
    comes back."""
    for node, ws in sorted(h.memo(_tapped).items()):
        for w in ws:
            if w.packet != "CONNECT" or w.direction != "out" or w.mqtt != "5":
                continue
            if w.clean_session or not w.session_expiry_s:
                c.violation(f"{node} connected with clean start {int(bool(w.clean_session))} "
                            f"and a Session Expiry Interval of {w.session_expiry_s or 0} s: "
                            "its session does not outlive the connection", w)


@rule("A2M-RSP-1: a responder subscribes its direct request topic")
def subscribes_its_request_topic(h: History, c: Collector) -> None:
    """A tapped responder's SUBSCRIBE names `$a2a/v1/request/{org}/{unit}/{agent}` for the
    org, unit and agent of its client id: a responder only in a pool, or under another
    agent's topic, cannot be asked directly (a pooled task's follow-ups go there)."""
    tapped = h.memo(_tapped)
    for node in sorted(_responders(tapped)):
        ws = tapped[node]
        c.count("responders_subscribed")
        ids = [w.client_id or "" for w in ws if w.packet == "CONNECT" and w.direction == "out"]
        parts = ids[-1].split("/") if ids else []
        if len(parts) != 3:
            continue          # connects_as_org_unit_agent says so
        org, unit, agent = parts
        # a run isolated on a shared broker appends "-<run id>" to the client id
        want = {f"{REQUEST_PREFIX}{org}/{unit}/{a}" for a in (agent, agent.rsplit("-", 1)[0])}
        filters = {f for w in ws if w.packet == "SUBSCRIBE" for f in (w.filters or ())}
        if not filters & want:
            c.violation(f"{node} ({ids[-1]}) never subscribed its request topic "
                        f"{sorted(want)[0]!r}; it subscribed {sorted(filters)}", ws[0])


#: A2M-ID-1's alphabet, for a pool's and a shared group's ids
PROFILE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@rule("A2M-SESS-3, A2M-ID-1: the client id is {org_id}/{unit_id}/{agent_id}; every id the "
      "profile names (org, unit, agent, pool, group) is of [A-Za-z0-9_.-]")
def connects_as_org_unit_agent(h: History, c: Collector) -> None:
    """Every CONNECT a tapped agent sent names it {org}/{unit}/{agent}, each of the three
    of A2M-ID-1's alphabet: the broker's ACLs and the other agents find it by that id, and
    two agents never share one; and a pool it subscribes names its group and its pool in
    the same alphabet (`$share/{group}/$a2a/v1/request/{org}/{unit}/pool/{pool}`)."""
    for node, ws in sorted(h.memo(_tapped).items()):
        for w in ws:
            if w.packet == "CONNECT" and w.direction == "out":
                c.count("client_ids")
                if not CLIENT_ID.match(w.client_id or ""):
                    c.violation(f"{node} connected as {w.client_id!r}, not "
                                "{org}/{unit}/{agent}", w)
            elif w.packet == "SUBSCRIBE" and w.direction == "out":
                for f in w.filters or ():
                    if not f.startswith("$share/") or REQUEST_PREFIX not in f:
                        continue
                    group, _, rest = f.removeprefix("$share/").partition("/")
                    pool = rest.rsplit("/", 1)[-1]
                    c.count("pool_ids")
                    if not (PROFILE_ID.match(group) and PROFILE_ID.match(pool)):
                        c.violation(f"{node} subscribed pool {pool!r} of group {group!r}: "
                                    "ids of [A-Za-z0-9_.-] only (A2M-ID-1)", w)


@rule("A2M-TOPIC-1, A2M-DISC-1, A2M-PRES-1, A2M-PRES-2: a responder's card is retained at "
      "QoS 1 on its own discovery topic, online once it serves, and its Last Will is the card "
      "on the same topic")
def announces_its_card_with_a_will(h: History, c: Collector) -> None:
    """A tapped responder's CONNECT carries a will on a discovery topic; once subscribed it
    publishes its card there retained, at QoS 1, with a2a-status=online — on
    `$a2a/v1/discovery/{org}/{unit}/{agent}` of its own client id. A responder that never
    says it is online is invisible to discovery; one without a will stays 'online' after
    it died; a card on another agent's topic, or one without the org and unit, is found by
    nobody looking for this agent."""
    tapped = h.memo(_tapped)
    for node in sorted(_responders(tapped)):
        ws = tapped[node]
        c.count("responders")
        wills = [w for w in ws if w.packet == "CONNECT" and w.direction == "out"]
        parts = (wills[-1].client_id or "").split("/") if wills else []
        if len(parts) == 3:
            org, unit, agent = parts
            # a run isolated on a shared broker appends "-<run id>" to the client id
            own = {f"{DISCOVERY_PREFIX}{org}/{unit}/{a}" for a in (agent, agent.rsplit("-", 1)[0])}
            for w in ws:
                if w.direction == "out" and w.packet == "PUBLISH" and w.retain \
                        and (w.topic or "").startswith(DISCOVERY_PREFIX) and w.topic not in own:
                    c.violation(f"{node} ({wills[-1].client_id}) published its card on "
                                f"{w.topic!r}, not on {sorted(own)[0]!r}", w)
        for w in wills:
            if not (w.will_topic or "").startswith(DISCOVERY_PREFIX):
                c.violation(f"{node} connected with no will on its discovery topic "
                            f"(will: {w.will_topic!r})", w)
        cards = [w for w in ws if w.packet == "PUBLISH" and w.direction == "out"
                 and (w.topic or "").startswith(DISCOVERY_PREFIX)]
        online = [w for w in cards if _user(w, "a2a-status") == "online"]
        if not online:
            c.violation(f"{node} served requests and never published its card online", *wills[:1])
            continue
        for w in online:
            if not w.retain or w.qos != 1:
                c.violation(f"{node} published its card online with retain={w.retain}, "
                            f"QoS {w.qos} (retained, QoS 1)", w)


#: `$a2a/v1/{method}/{org_id}/{unit_id}/{agent_id}` (a reply topic may add its suffix, a
#: pool's request topic is `.../pool/{pool_id}`), each id of A2M-ID-1's alphabet
INTERACTION_TOPIC = re.compile(r"^\$a2a/v1/(request|reply|event|discovery)/[A-Za-z0-9_.-]+/"
                               r"[A-Za-z0-9_.+-]+/[A-Za-z0-9_.+#-]+(/[A-Za-z0-9_.+#-]+)*$")


@rule("A2M-PROP-1: the User Properties the binding defines carry their a2a- prefix")
def binding_properties_carry_the_prefix(h: History, c: Collector) -> None:
    """Off its wire: no message an agent publishes under `$a2a/` carries one of the
    binding's User Properties without its `a2a-` prefix (`status` for `a2a-status`): a peer
    reading the binding's names finds nothing there."""
    bare = {name.removeprefix("a2a-"): name for name in BINDING_PROPERTIES}
    for node, wire in sorted(h.memo(_tapped).items()):
        for w in wire:
            if w.direction != "out" or w.packet != "PUBLISH" \
                    or not (w.topic or "").startswith("$a2a/"):
                continue
            users = _props(w).get("userProperties") or []
            c.count("publishes_read")
            for pair in users if isinstance(users, list) else []:
                name = str(pair[0]).lower() if isinstance(pair, list) and pair else ""
                if name in bare:
                    c.violation(f"{node} published {w.topic} with User Property {pair[0]!r}: "
                                f"the binding names it {bare[name]!r}", w)


@rule("A2M-TOPIC-2 (SHOULD), A2M-ID-1: what an agent publishes and subscribes under $a2a/ is "
      "an interaction topic $a2a/v1/{method}/{org_id}/{unit_id}/{agent_id}")
def interaction_topics_keep_the_shape(h: History, c: Collector) -> None:
    """Off its wire: every topic an agent publishes to under `$a2a/`, and every filter it
    subscribes under `$a2a/` (a shared one's after its `$share/{group}/`), is
    `$a2a/v1/{request|reply|event|discovery}/{org_id}/{unit_id}/{agent_id}`, a reply topic
    with its suffix, or a pool's request topic."""
    for node, wire in sorted(h.memo(_tapped).items()):
        for w in wire:
            if w.direction != "out":
                continue
            if w.packet == "PUBLISH":
                topics = [w.topic or ""]
            elif w.packet == "SUBSCRIBE":
                topics = [re.sub(r"^\$share/[^/]+/", "", f) for f in w.filters or ()]
            else:
                continue
            for topic in topics:
                if not topic.startswith("$a2a/"):
                    continue
                c.count("topics_read")
                if not INTERACTION_TOPIC.match(topic):
                    did = "published to" if w.packet == "PUBLISH" else "subscribed"
                    c.violation(f"{node} {did} {topic!r}: not $a2a/v1/{{method}}/{{org_id}}/"
                                "{unit_id}/{agent_id}", w)


@rule("A2M-PRES-3 (SHOULD): a responder that leaves on purpose says so: its card offline, said "
      "by the agent, before its DISCONNECT")
def leaves_offline(h: History, c: Collector) -> None:
    """A tapped responder that ends a connection with a DISCONNECT (a graceful stop: the
    broker then publishes no will) has, on that connection, since its card last said
    online, published its card again retained with a2a-status=offline and
    a2a-status-source=agent — or cleared it (an empty retained card: unregistered,
    A2M-DISC-2). One that just disconnects leaves a retained card saying online for an agent
    that is gone, and no will corrects it.

    A responder the bench stopped as an operator does (the restart fault's `graceful`:
    SIGTERM) that sent no DISCONNECT before its process ended did not leave gracefully:
    its will speaks for it, and this clause is undecided for that stop (UNKNOWN, not TRUE)."""
    tapped = h.memo(_tapped)
    began = {f.fault_index: f.seq for f in h.of(FaultStart)     # graceful stop -> its start
             if f.fault == "restart" and isinstance(f.params, dict) and f.params.get("graceful")}
    responders = _responders(tapped)
    for stop in h.of(NodeCrashed):
        if stop.fault_index in began and stop.node in responders:
            if not any(w.direction == "out" and w.packet == "DISCONNECT"
                       and began[stop.fault_index] < w.seq < stop.seq
                       for w in tapped[stop.node]):
                c.unknown("stops_without_a_disconnect")
    for node in sorted(responders):
        said: str | None = None       # what its card says now, as this connection set it
        for w in tapped[node]:
            if w.direction != "out":
                continue
            if w.packet == "CONNECT":
                said = None
            elif w.packet == "PUBLISH" and (w.topic or "").startswith(DISCOVERY_PREFIX) \
                    and w.retain:
                status = _user(w, "a2a-status")
                said = "cleared" if not w.size_bytes else \
                    "offline" if status == "offline" and _user(w, "a2a-status-source") == "agent" \
                    else status or "no status"
            elif w.packet == "DISCONNECT" and said is not None:
                c.count("graceful_leaves")
                if said not in ("offline", "cleared"):
                    c.violation(f"{node} disconnected on purpose while its card still said "
                                f"{said!r}: no offline card before its DISCONNECT", w)


def _untapped(h: History) -> str | None:
    if h.of(Wire):
        return None
    return ("no agent was behind a wire tap (agents started by --node-command are; "
            "--wire-tap taps every agent)")


A2A_SESSION = Checker(
    "a2a_session", "A2A over MQTT, an agent's session and presence as its wire shows them: "
    "MQTT 5 with a session that outlives its connection, the client id {org}/{unit}/{agent}, "
    "a responder's card retained online with a will on it, and offline when it leaves on "
    "purpose; no bearer token echoed in anything it publishes, none over plain TCP.",
    (connects_with_mqtt5, connects_with_a_persistent_session, connects_as_org_unit_agent,
     subscribes_its_request_topic, announces_its_card_with_a_will, leaves_offline,
     tokens_never_echoed, tokens_travel_over_tls, binding_properties_carry_the_prefix,
     interaction_topics_keep_the_shape), _untapped,
    needs="wire",
    protocols=frozenset({SPEC.name}))
