"""Entry points that are tools rather than layers, each `python -m bench.tools.<name>` (the
back-to-back exchange is `a2a-bench exchange`); docs/reference/commands.md lists every one,
generated from their docstrings."""
