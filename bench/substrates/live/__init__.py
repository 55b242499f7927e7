"""The live substrate: real MQTT brokers on 127.0.0.1 (embedded amqtt, Mosquitto, or any
broker URL), reference nodes on asyncio in-process or one OS process each, real sockets,
real QoS1 and real SIGKILLs — driving the same core as the simulator."""
