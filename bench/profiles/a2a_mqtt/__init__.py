"""The A2A-over-MQTT transport profile v0.1 (A2A v1.0 JSON-RPC on MQTT 5): its clauses
(`clauses`), the single table every rule, seeded defect and conformance line cites."""
