"""The protocols the bench judges, side by side. The seed documents' protocol (ooder topics,
its envelope, HMAC headers) is the default; `a2a_mqtt` is the public A2A-over-MQTT
transport profile (v0.1, EMQX's `emqx/mqtt-for-ai`), built here from its own clause table
outward: the clauses, then the sans-IO responder and requester, then the substrates."""
