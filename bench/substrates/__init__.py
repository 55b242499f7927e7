"""The substrates a scenario runs on: the simulator, live brokers and nodes, and the
back-to-back wire for tests — siblings that drive the one node core."""
