"""The EMQX A2A-over-MQTT SDK's README quick start, "Build a responder (agent)", as its users
run it: the README's code verbatim but for where it connects and the names it uses (argv:
host port org unit agent). No signal handler, no reconnect, no exception handling: what
tests/live/test_adapters_change_nothing.py compares the bench's adapter with."""

import asyncio
import sys

from a2a_over_mqtt import A2ARequest, MqttConfig, Responder, TopicSpace, build_card

HOST, PORT, ORG, UNIT, AGENT = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]


class MyAgent(Responder):
    async def on_request(self, request: A2ARequest, stream) -> str:
        await stream("thinking...")
        return f"You said: {request.text}"


async def main():
    mqtt = MqttConfig(host=HOST, port=PORT)
    topics = TopicSpace(org=ORG, unit=UNIT)
    card = build_card(
        name="Echo Agent",
        description="Echoes back whatever you send",
        url=f"mqtt://{HOST}:{PORT}",
    )

    agent = MyAgent(
        agent_id=AGENT,
        mqtt=mqtt,
        topics=topics,
        card=card,
    )
    await agent.run()

asyncio.run(main())
