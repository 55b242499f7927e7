"""The EMQX A2A-over-MQTT SDK's README quick start, "Send a request (client)", as its users
run it: the README's code verbatim but for where it connects and the names it uses (argv:
host port org unit agent). No signal handler, no reconnect, no exception handling: what
tests/live/test_adapters_change_nothing.py compares the bench's adapter with."""

import asyncio
import sys

from a2a_over_mqtt import A2ARequest, MqttConfig, Requester, TopicSpace

HOST, PORT, ORG, UNIT, AGENT = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]


async def main():
    mqtt = MqttConfig(host=HOST, port=PORT)
    topics = TopicSpace(org=ORG, unit=UNIT)
    requester = Requester(mqtt, topics)

    req = A2ARequest(text="Hello, agent!", request_id="req-1")
    async for kind, content in requester.stream(AGENT, req.to_json(), "corr-1"):
        print(f"{kind}: {content}")

asyncio.run(main())
