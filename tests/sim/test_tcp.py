"""The TCP loss model both substrates share: retransmissions, then a dead connection."""

from __future__ import annotations

import math
import random

from bench.spec.distribution import fixed
from bench.spec.topology import LinkSpec
from bench.substrates.sim.link import Link
from bench.substrates.tcp import MAX_RETRANSMISSIONS, retransmission_delay_ms


def test_loss_is_latency_until_tcp_gives_up() -> None:
    rng = random.Random(1)
    assert retransmission_delay_ms(rng, 0.0) == (0.0, 0)
    delays = [retransmission_delay_ms(rng, 0.5) for _ in range(2000)]
    # 200 ms, then doubling: one retransmission costs 200, two 600, three 1400
    assert {d for d, n in delays if n == 1} == {200.0}
    assert {d for d, n in delays if n == 3} == {1400.0}
    assert 0.4 < sum(n == 0 for _, n in delays) / len(delays) < 0.6
    # a link that loses everything kills the connection instead of waiting forever
    assert retransmission_delay_ms(rng, 1.0) == (math.inf, MAX_RETRANSMISSIONS)


def test_a_sim_link_that_loses_everything_loses_the_segment() -> None:
    spec = LinkSpec(latency_ms=fixed(1.0), loss=1.0)
    link = Link(spec, random.Random(2))
    assert link.transit_ms() is None and link.lost == 1


def test_a_connection_delivers_in_the_order_sent_whatever_each_packet_s_latency() -> None:
    """TCP: a packet with a short delay waits behind an earlier one that took long (a
    retransmission holds back the segments after it); the two directions are separate."""
    from bench.spec.distribution import parse_distribution
    from bench.substrates.sim.broker import Connection
    spec = LinkSpec(latency_ms=parse_distribution({"dist": "uniform", "low": 1, "high": 50},
                                                  "test"), loss=0.3)
    conn = Connection("c", None, Link(spec, random.Random(3)), False, None)  # type: ignore[arg-type]
    arrivals = []
    for i in range(500):
        now = i * 0.5
        delay = conn.transit_ms(now, "up")
        assert delay is not None and delay >= 1
        arrivals.append(now + delay)
    assert arrivals == sorted(arrivals)
    assert conn.transit_ms(0.0, "down") is not None   # not held behind the other direction
    assert conn.last_down_ms is not None and conn.last_up_ms is not None
    assert conn.last_down_ms < conn.last_up_ms
