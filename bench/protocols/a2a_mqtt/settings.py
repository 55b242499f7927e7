"""An A2A-over-MQTT topology's own settings (`ProtocolSpec.settings`): its `[a2a]` table —
the org id (A2M-ID-1), the Message Expiry Interval its requesters set, bearer tokens
(`[a2a.oauth]`) — and what each of its nodes must be: one agent, every id in A2M-ID-1's
alphabet. Read by bench/spec/scenario.py through the protocol's spec."""

from __future__ import annotations

import re
from typing import Any

from bench.spec.distribution import SpecError
from bench.spec.topology import OAuthSpec

#: A2M-ID-1
ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def read(raw: Any, where: str, table: Any) -> dict[str, Any]:
    """The `[a2a]` table as Topology fields; `table` wraps a TOML table as the spec layer
    reads one (`bench.spec.scenario._Table`)."""
    t = table(raw, where, {"org", "request_expiry_s", "oauth"})
    org = t.text("org")
    if not ID.match(org):
        raise SpecError(f"{t.key('org')}={org!r} must match {ID.pattern} (A2M-ID-1)")
    expiry = t.integer("request_expiry_s", 0, low=1) if "request_expiry_s" in t.raw else None
    oauth = None
    if "oauth" in t.raw:
        o = table(t.raw["oauth"], f"{where}.oauth", {"issuer", "scope", "token_ttl_s", "tls"})
        default = OAuthSpec()
        oauth = OAuthSpec(o.text("issuer", default.issuer), o.text("scope", default.scope),
                          o.integer("token_ttl_s", default.token_ttl_s, low=1),
                          o.boolean("tls", default.tls))
    return {"a2a_org": org, "a2a_request_expiry_s": expiry, "a2a_oauth": oauth}


def check_node(t: Any, unit: str, agents: tuple[str, ...], pool: str | None) -> None:
    """An A2A-over-MQTT agent: one agent id, every id in A2M-ID-1's alphabet."""
    if len(agents) != 1:
        raise SpecError(f"{t.key('agents')}: an A2A-over-MQTT node is one agent, got "
                        f"{len(agents)}")
    for what, value in (("namespace", unit), ("agents", agents[0]), ("pool", pool)):
        if value is not None and not ID.match(value):
            raise SpecError(f"{t.key(what)}={value!r} must match {ID.pattern} (A2M-ID-1)")
