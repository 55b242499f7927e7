"""The A2A-over-MQTT profile's rules (docs/profiles/a2a-mqtt.md), judged from what its
agents recorded — the requester's attempts, replies and settlements, the responder's
intake and replies — never from the agents' code. Each rule cites its clause ids.

The generic ones the profile shares with the seed protocol (one execution per task) live
with their family (`duplicate_execution`); these are the profile's own: every operation
ends, the retry profile is kept, every reply answers a request that was sent, on its path.

Split by concern, as the seed's checkers are: `common` (the profile's numbers, and what
its agents took in and sent, read once for every checker), then one module per checker —
`requests`, `replies`, `pools`, `broker`, `session`, `tokens`, `handover`, `robustness` —
and `situations` (the coverage table's)."""

from __future__ import annotations

from bench.protocols.a2a_mqtt.rules.broker import A2A_BROKER
from bench.protocols.a2a_mqtt.rules.handover import A2A_HANDOVER
from bench.protocols.a2a_mqtt.rules.pools import A2A_POOLS
from bench.protocols.a2a_mqtt.rules.replies import A2A_REPLIES
from bench.protocols.a2a_mqtt.rules.requests import A2A_REQUESTS
from bench.protocols.a2a_mqtt.rules.robustness import A2A_ROBUSTNESS
from bench.protocols.a2a_mqtt.rules.session import A2A_SESSION
from bench.protocols.a2a_mqtt.rules.situations import SITUATIONS
from bench.protocols.a2a_mqtt.rules.tokens import A2A_OAUTH

__all__ = ["CHECKERS", "SITUATIONS"]

CHECKERS = (A2A_REQUESTS, A2A_REPLIES, A2A_POOLS, A2A_HANDOVER, A2A_BROKER, A2A_SESSION,
            A2A_OAUTH, A2A_ROBUSTNESS)

