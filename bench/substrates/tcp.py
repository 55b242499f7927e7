"""What TCP makes of a lost segment, once for every substrate: it is not dropped but sent
again after a retransmission timeout (200 ms, doubling, at most 60 s, RFC 6298's floor and
ceiling), so loss on a live connection shows up as added latency, in order. A segment
still unacknowledged after 15 retransmissions (Linux's tcp_retries2) kills the connection:
a link that loses everything is a dead link, not an endless wait.

The simulator's links and the live fault proxy both draw from this model.
"""

from __future__ import annotations

import math
import random

RTO_MS = 200.0
MAX_RTO_MS = 60_000.0
#: Retransmissions before the connection is given up (Linux net.ipv4.tcp_retries2).
MAX_RETRANSMISSIONS = 15


def retransmission_delay_ms(rng: random.Random, loss: float) -> tuple[float, int]:
    """Extra delay of one segment on a link losing `loss` of its segments, and how many
    retransmissions it took; an infinite delay when the connection gave up on it."""
    delay, rto, retransmissions = 0.0, RTO_MS, 0
    while loss > 0 and rng.random() < loss:
        if retransmissions == MAX_RETRANSMISSIONS:
            return math.inf, retransmissions
        delay += rto
        rto = min(rto * 2, MAX_RTO_MS)
        retransmissions += 1
    return delay, retransmissions
