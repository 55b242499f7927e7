"""`python -m bench.substrates.live.amqtt_server PORT`: the embedded amqtt broker, in its own process.

Only the authentication plugin is loaded (the rest cost throughput, DESIGN §10), with
anonymous access off so every client's persistent session is kept (each client sends its
client id as username). Prints `ready` once it listens on 127.0.0.1:PORT.
"""

from __future__ import annotations

import asyncio
import sys


async def serve(host: str, port: int) -> None:
    from amqtt.broker import Broker  # type: ignore[import-untyped]
    config = {"listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
              "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin":
                          {"allow_anonymous": False}}}
    broker = Broker(config)
    await broker.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    port = int(sys.argv[1])
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    try:
        import uvloop
        uvloop.run(serve(host, port))
    except ImportError:  # uvloop is optional: measured x1.7-2.0, not required
        asyncio.run(serve(host, port))


if __name__ == "__main__":
    main()
