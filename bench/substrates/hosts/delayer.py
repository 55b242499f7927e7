"""Latency on a host whose kernel has no netem: what arrives from a peer is held in an
NFQUEUE and let through when its delay has passed — on the receiving side, where a delay
is what the peer's packets see (held on the sending side, it was not: DOCKER.md).

`python -m bench.substrates.hosts.delayer QUEUE DISTRIBUTION FAULT` binds the queue
(nfnetlink_queue, spoken over a netlink socket here: no library), draws each packet's
delay from the distribution (its JSON, as a scenario writes it) and accepts packets in
the order they came, none before the one ahead of it (one TCP stream is delivered in
order). The iptables rule that feeds it carries `--queue-bypass`: if this process ends,
packets pass undelayed, never dropped. Stops on SIGTERM or when stdin closes (the bench's
SSH session ended), saying how many packets it held (`held N`).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from collections import deque

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS = 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_ACCEPT = 1


def _attr(kind: int, data: bytes) -> bytes:
    body = struct.pack("=HH", 4 + len(data), kind) + data
    return body + b"\0" * (-len(body) % 4)


def _message(kind: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST) -> bytes:
    payload = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(payload), (NFNL_SUBSYS_QUEUE << 8) | kind, flags,
                       0, 0) + payload


def bind(sock: socket.socket, queue: int) -> None:
    """The queue bound to this socket, packets copied as metadata only (their id)."""
    sock.send(_message(NFQNL_MSG_CONFIG, queue, _attr(
        NFQA_CFG_CMD, struct.pack("=BBH", NFQNL_CFG_CMD_BIND, 0, socket.htons(socket.AF_INET))),
        NLM_F_REQUEST | NLM_F_ACK))
    _acked(sock)
    sock.send(_message(NFQNL_MSG_CONFIG, queue, _attr(
        NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META) + b"\0" * 3),
        NLM_F_REQUEST | NLM_F_ACK))
    _acked(sock)


def _acked(sock: socket.socket) -> None:
    data = sock.recv(65536)
    length, kind = struct.unpack_from("=IH", data)
    if kind == NLMSG_ERROR:
        (error,) = struct.unpack_from("=i", data, 16)
        if error:
            raise OSError(-error, f"nfnetlink_queue refused the queue: {os.strerror(-error)}")


def packet_ids(data: bytes) -> list[int]:
    """The ids of the packets in one read of the socket (it may hold several messages)."""
    ids, at = [], 0
    while at + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, at)
        if length < 16:
            break
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            a = at + 20                                   # nlmsghdr + nfgenmsg
            while a + 4 <= at + length:
                alen, atype = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if atype & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from(">I", data, a + 4)[0])
                a += (alen + 3) & ~3
        at += (length + 3) & ~3
    return ids


def verdict(queue: int, packet_id: int) -> bytes:
    return _message(NFQNL_MSG_VERDICT, queue,
                    _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id)))


def run(queue: int, draw_ms: object, stop: list[bool]) -> None:
    from bench.spec.distribution import parse_distribution, rng_for
    spec = parse_distribution(draw_ms, "delayer")
    fault = int(sys.argv[3]) if len(sys.argv) > 3 else 0    # the draws' stream
    rng = rng_for(fault, f"delayer/{queue}")
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.bind((0, 0))
    bind(sock, queue)
    print("ready", flush=True)
    held: deque[tuple[float, int]] = deque()      # (due, id), due never decreasing
    last_due = 0.0
    count = 0                                     # packets held, said when it stops
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    stdin = sys.stdin.fileno()
    sel.register(stdin, selectors.EVENT_READ)
    while not stop[0]:
        now = time.monotonic()
        while held and held[0][0] <= now:
            sock.send(verdict(queue, held.popleft()[1]))
        timeout = max(0.0, held[0][0] - now) if held else 0.5
        for key, _ in sel.select(timeout):
            if key.fd == stdin:
                if not os.read(stdin, 4096):
                    stop[0] = True
                continue
            now = time.monotonic()
            for pid in packet_ids(sock.recv(1 << 16)):
                count += 1
                last_due = max(now + spec.sample(rng) / 1000.0, last_due)
                held.append((last_due, pid))
    for _due, pid in held:                       # what is held goes now, undelayed
        sock.send(verdict(queue, pid))
    print(f"held {count}", flush=True)


def main() -> None:
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    run(int(sys.argv[1]), json.loads(sys.argv[2]), stop)


if __name__ == "__main__":
    main()
