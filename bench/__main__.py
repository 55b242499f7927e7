"""`python -m bench` is the `a2a-bench` command."""

from bench.cli import main

raise SystemExit(main())
