"""The fault proxy's latency is a link's: each packet delayed by its own draw, side by side,
and still in the order it was sent (one TCP stream)."""

from __future__ import annotations

import asyncio
import random
import time

from bench.spec.distribution import fixed, parse_distribution
from bench.substrates.live.proxy import FaultProxy, Faults, read_packet

PUBLISH_QOS0 = 0x30


def _publish(n: int) -> bytes:
    body = (3).to_bytes(2, "big") + b"t/x" + str(n).encode()
    return bytes([PUBLISH_QOS0, len(body)]) + body


async def _arrivals(latency: object, packets: int) -> list[tuple[float, bytes]]:
    """Sends `packets` PUBLISHes back to back through a proxy to a sink; returns when each
    reached the sink (s after the first was sent) and what it was."""
    got: list[tuple[float, bytes]] = []
    done = asyncio.Event()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while packet := await read_packet(reader):
            got.append((time.monotonic(), packet))
            if len(got) == packets:
                done.set()
        writer.close()

    server = await asyncio.start_server(sink, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = FaultProxy(("127.0.0.1", port), random.Random(1),
                       faults=Faults(latency_ms=latency))   # type: ignore[arg-type]
    await proxy.start()
    _reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    t0 = time.monotonic()
    for n in range(packets):
        writer.write(_publish(n))
    await writer.drain()
    await asyncio.wait_for(done.wait(), 30)
    writer.close()
    await proxy.close()
    server.close()
    return [(t - t0, p) for t, p in got]


def test_packets_are_delayed_side_by_side_not_one_after_another() -> None:
    """Ten packets through a 300 ms link all arrive about 300 ms later (one after another
    they would take 3 s). The bound leaves room for a loaded machine: what it rules out
    is ten delays in turn."""
    arrivals = asyncio.run(_arrivals(fixed(300.0), 10))
    assert [p for _, p in arrivals] == [_publish(n) for n in range(10)]
    assert all(t >= 0.29 for t, _ in arrivals), arrivals
    assert max(t for t, _ in arrivals) < 1.5, arrivals


def test_a_long_draw_holds_back_the_packets_behind_it() -> None:
    """Draws of 50-700 ms: never reordered, each at least its own draw, and the whole
    run of 20 within the longest draws, not their sum (about 7.5 s)."""
    arrivals = asyncio.run(_arrivals(parse_distribution(
        {"dist": "uniform", "low": 50, "high": 700}, "latency_ms"), 20))
    assert [p for _, p in arrivals] == [_publish(n) for n in range(20)]
    times = [t for t, _ in arrivals]
    assert times == sorted(times) and min(times) >= 0.049
    assert times[-1] < 3.0, times


def test_tls_offered_beside_plain_tcp_is_ended_at_the_proxy_and_told_to_the_tap() -> None:
    """Where a run offers TLS the proxy listens for it beside its plain port: a client that
    verifies the run's CA (ssl, not paho: an observation of its own) gets through with its
    packets read in the clear, and the tap hears which connection came by TLS; a client
    that does not trust the run's CA is refused, and plain TCP still works on the other
    port."""
    import ssl

    from bench.substrates.live.certs import run_ca

    async def scenario() -> tuple[list[tuple[bytes, bool]], list[bytes], bool]:
        got: list[bytes] = []
        tapped: list[tuple[bytes, bool]] = []

        async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while packet := await read_packet(reader):
                got.append(packet)
            writer.close()

        server = await asyncio.start_server(sink, "127.0.0.1", 0)
        ca = run_ca(("127.0.0.1",))
        proxy = FaultProxy(("127.0.0.1", server.sockets[0].getsockname()[1]),
                           random.Random(1), server_tls=ca.server,
                           tap=lambda _up, packet, _v5, tls: tapped.append((packet, tls)))
        await proxy.start()
        assert proxy.tls_port not in (0, proxy.port)
        trusted = ssl.create_default_context(cadata=ca.ca_pem)
        for n, (port, context) in enumerate(((proxy.tls_port, trusted), (proxy.port, None))):
            _r, w = await asyncio.open_connection("127.0.0.1", port, ssl=context)
            w.write(_publish(n))
            await w.drain()
            while len(got) <= n:
                await asyncio.sleep(0.01)     # until the sink has it
            w.close()
        refused = False
        try:                                   # the system's CAs do not know the run's
            await asyncio.open_connection("127.0.0.1", proxy.tls_port,
                                          ssl=ssl.create_default_context())
        except ssl.SSLCertVerificationError:
            refused = True
        await proxy.close()
        server.close()
        return tapped, got, refused

    tapped, got, refused = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert got == [_publish(0), _publish(1)]
    assert tapped == [(_publish(0), True), (_publish(1), False)]
    assert refused
