"""A node's link to the broker: latency from a distribution, loss as TCP would see it.

Over TCP a lost segment is retransmitted, not dropped: loss shows up as a retransmission
timeout added to the latency (200 ms, doubling). A link that is down (a partition) loses
what is in transit; the connection on it dies and MQTT's own redelivery takes over. A
partition may cut one way only (`blocked`: "up", the node's packets, or "down", the
broker's): what goes the other way still arrives.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from bench.faults.primitives import BOTH_WAYS
from bench.spec.topology import LinkSpec
from bench.substrates.tcp import retransmission_delay_ms


class Link:
    def __init__(self, spec: LinkSpec, rng: random.Random) -> None:
        self.spec = spec
        self.base = spec
        self.rng = rng
        self.up = True      # False: partitioned, one way or both (`blocked`)
        #: the ways a partition cuts: both, or {"up"} (the node's packets) or {"down"}
        self.blocked = BOTH_WAYS
        self.downs = 0      # how many times it went down (a partition's identity)
        self.unplugged = False   # down with no interface: a connect fails at once
        self.packets = 0
        self.lost = 0
        self.passed = 0     # packets that crossed a partition the way it left open
        self.retransmissions = 0
        # the spec's latency sampler, made again when a fault changes the spec
        self._sampled_spec: LinkSpec | None = None
        self._latency: Callable[[random.Random], float] = spec.latency_ms.sample

    def transit_ms(self, direction: str = "up") -> float | None:
        """Delay of one packet sent `direction`, or None if it is lost with the link."""
        self.packets += 1
        if not self.up:
            if direction in self.blocked:
                self.lost += 1
                return None
            self.passed += 1     # a one-way partition's other way
        spec = self.spec
        if spec is not self._sampled_spec:
            self._sampled_spec, self._latency = spec, spec.latency_ms.sampler()
        delay = self._latency(self.rng)
        if not spec.loss:
            return delay    # no segment lost: no draw for one (what the loop below does)
        extra, retransmissions = retransmission_delay_ms(self.rng, spec.loss)
        self.retransmissions += retransmissions
        if extra == float("inf"):
            self.lost += 1
            return None     # TCP gave up: the connection dies with the segment
        return delay + extra
