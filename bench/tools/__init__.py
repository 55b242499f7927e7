"""Entry points that are tools rather than layers: the attack table, the benchmark, the
fuzzer and the back-to-back exchange (`python -m bench.tools.<name>`)."""
