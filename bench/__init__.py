"""a2a-bench: a distributed multi-node test bench and simulator for A2A systems over MQTT."""

__version__ = "0.1.0"
