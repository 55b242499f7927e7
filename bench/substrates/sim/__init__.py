"""The simulation substrate: a simpy model of an MQTT broker and of the links to it,
driving the very same reference node core as every other substrate."""
