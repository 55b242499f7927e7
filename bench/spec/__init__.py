"""What users write: scenarios, topologies and the distributions they draw from (TOML in,
validated values out; every error names the file, the key and what was expected)."""
