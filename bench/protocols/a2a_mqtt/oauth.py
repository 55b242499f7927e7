"""Bearer tokens on A2A-over-MQTT requests (the spec's "OAuth 2.0 and OIDC over MQTT User
Properties"): a requester mints its access token (the bench plays the authorization
server, out of band as item 1 says) and sends it as `a2a-authorization: Bearer <token>` on
every request (A2M-REQ-5); a responder checks its signature and its `exp`, `iss`, `aud`
and scope before it processes the request (A2M-RSP-7), and echoes it nowhere (A2M-RSP-6).

Tokens are JWTs signed with Ed25519 (EdDSA) by PyJWT. `exp` is read against the node's own
clock (the simulator's virtual one, a live node's wall clock), never PyJWT's. No I/O.
"""

from __future__ import annotations

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bench.core.config import OAuth

#: the scheme of the `a2a-authorization` User Property the token travels in (item 2)
SCHEME = "Bearer "
#: a requester asks for a fresh token when less than this share of its life is left (item 7)
REFRESH_AT = 0.2


def mint(oauth: OAuth, subject: str, audience: str, now_ms: float) -> tuple[str, float]:
    """A token for `subject` to present to `audience`, issued now: the header value and
    when it expires (ms)."""
    assert oauth.signing_seed is not None, "only a requester mints tokens"
    iat = int(now_ms // 1000)
    claims = {"iss": oauth.issuer, "aud": audience, "sub": subject, "scope": oauth.scope,
              "iat": iat, "exp": iat + oauth.ttl_s}
    key = Ed25519PrivateKey.from_private_bytes(oauth.signing_seed)
    return SCHEME + jwt.encode(claims, key, algorithm="EdDSA"), (iat + oauth.ttl_s) * 1000.0


def refused(oauth: OAuth, value: str | None, now_ms: float) -> str | None:
    """Why a request carrying `value` in `a2a-authorization` may not be processed, or None
    if its token is good: EdDSA signed by the server, issued by it, for this audience,
    not expired by this clock, and granting the scope."""
    if value is None:
        return "no a2a-authorization"
    if not value.startswith(SCHEME):
        return "a2a-authorization is not a Bearer token"
    key = Ed25519PublicKey.from_public_bytes(oauth.public_key)
    try:
        claims = jwt.decode(value[len(SCHEME):], key, algorithms=["EdDSA"],
                            audience=oauth.audience, issuer=oauth.issuer,
                            options={"require": ["exp", "iss", "aud"], "verify_exp": False,
                                     "verify_iat": False, "verify_nbf": False})
    except jwt.InvalidTokenError as exc:
        return f"token refused: {type(exc).__name__}"
    exp = claims["exp"]
    if not isinstance(exp, int | float) or exp * 1000 <= now_ms:
        return "token expired"
    if oauth.scope not in str(claims.get("scope", "")).split():
        return f"token lacks scope {oauth.scope}"
    return None
