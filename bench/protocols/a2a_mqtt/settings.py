"""An A2A-over-MQTT topology's own settings (`ProtocolSpec.settings`): its `[a2a]` table —
the org id (A2M-ID-1), the Message Expiry Interval its requesters set, bearer tokens
(`[a2a.oauth]`) — and what each of its nodes must be: one agent, every id in A2M-ID-1's
alphabet. Read by bench/spec/scenario.py through the protocol's spec; the topology keeps the
table as JSON (`Topology.settings["a2a"]`), which `org`, `request_expiry_s` and `oauth` read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bench.spec.distribution import SpecError
from bench.spec.topology import Topology

#: A2M-ID-1
ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True, slots=True)
class OAuthSpec:
    """`[a2a.oauth]`: responders require a bearer token of `issuer` granting `scope` on every
    request; requesters mint ones that live `token_ttl_s` (the bench plays the server)."""

    issuer: str = "https://idp.a2a-bench.invalid"
    scope: str = "a2a:invoke"
    token_ttl_s: int = 300
    #: the bench offers its agents TLS (A2M-SESS-6: a connection that carries tokens uses
    #: it); false runs tokens over plain TCP, a deployment the rule finds wanting
    tls: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "scope": self.scope, "token_ttl_s": self.token_ttl_s,
                **({} if self.tls else {"tls": False})}

    @staticmethod
    def from_json(d: dict[str, Any]) -> OAuthSpec:
        return OAuthSpec(d["issuer"], d["scope"], d["token_ttl_s"], d.get("tls", True))


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
    table_json = {"org": org, **({"request_expiry_s": expiry} if expiry is not None else {}),
                  **({"oauth": oauth.to_json()} if oauth else {})}
    return {"settings": {"a2a": table_json}, "node_tls": oauth is not None and oauth.tls}


def org(t: Topology) -> str | None:
    """The org id its agents belong to (`[a2a] org`; None on another protocol)."""
    value = t.table("a2a").get("org")
    return value if isinstance(value, str) else None


def request_expiry_s(t: Topology) -> int | None:
    """The Message Expiry Interval its requesters set (None: none; A2M-RETRY-9: it should
    exceed the 15 s first-reply wait)."""
    value = t.table("a2a").get("request_expiry_s")
    return value if isinstance(value, int) else None


def oauth(t: Topology) -> OAuthSpec | None:
    """Its responders require OAuth 2.0 bearer tokens (`[a2a.oauth]`), and its requesters send
    them (None: no tokens)."""
    value = t.table("a2a").get("oauth")
    return OAuthSpec.from_json(value) if isinstance(value, dict) else None


def check_node(t: Any, unit: str, agents: tuple[str, ...], pool: str | None) -> None:
    """An A2A-over-MQTT agent: one agent id, every id in A2M-ID-1's alphabet."""
    if len(agents) != 1:
        raise SpecError(f"{t.key('agents')}: an A2A-over-MQTT node is one agent, got "
                        f"{len(agents)}")
    for what, value in (("namespace", unit), ("agents", agents[0]), ("pool", pool)):
        if value is not None and not ID.match(value):
            raise SpecError(f"{t.key(what)}={value!r} must match {ID.pattern} (A2M-ID-1)")
