"""Issue 50: "after" means after in the history. A live history puts two events of one
node in one millisecond all the time — a ledger flush and an admission, a give-up and an
unmatched response — and a rule that orders them by milliseconds reads the wrong one as
first. A module that uses `one_millisecond_too` runs each of its hand-written histories
twice: one millisecond apart as written, and every event in the same millisecond, where
only the history's order (seq) tells what came first. A verdict that changes between the
two orders by time; a test whose point is two nodes' clocks (a tie between two nodes'
events cannot be ordered, and reads as overlap) gives its own step_ms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import helpers


@pytest.fixture(params=[1.0, 0.0], ids=["1ms-apart", "one-ms"])
def one_millisecond_too(request: pytest.FixtureRequest) -> Iterator[None]:
    helpers.STEP_MS[0] = request.param
    yield
    helpers.STEP_MS[0] = 1.0
