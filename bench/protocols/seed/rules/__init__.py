"""The seed protocol's rules (DESIGN.md, docs/PROTOCOL.md), judged from what its nodes
recorded and what the wire tap saw — never from the nodes' code. Split by concern, one
module per family of checkers: `execution` (one execution per task, legal task
lifecycles), `delivery` (silent loss, targeted delivery, reply routing, QoS1), `relay`
(streams), `process` (gates, contexts), `auth` (admission), `directory` (liveness and the
deployment), `robustness`, `wire` (what the tap saw); and `situations` (the coverage
table's)."""

from __future__ import annotations

from bench.protocols.seed.rules.auth import AUTH_ADMISSION
from bench.protocols.seed.rules.delivery import (
    QOS1_DELIVERY,
    REPLY_ROUTING,
    SILENT_LOSS,
    TARGETED_DELIVERY,
)
from bench.protocols.seed.rules.directory import DEPLOYMENT, DIRECTORY_LIVENESS, Directories
from bench.protocols.seed.rules.execution import DUPLICATE_EXECUTION, TASK_LIFECYCLE
from bench.protocols.seed.rules.process import CONTEXT_ISOLATION, GATE_INTEGRITY
from bench.protocols.seed.rules.relay import RELAY_INTEGRITY, RELAY_LOCALITY
from bench.protocols.seed.rules.robustness import ROBUSTNESS
from bench.protocols.seed.rules.situations import SHARED_SITUATIONS, SITUATIONS
from bench.protocols.seed.rules.wire import WIRE_EVIDENCE

__all__ = ["CHECKERS", "FOLDS", "SHARED_SITUATIONS", "SITUATIONS"]

CHECKERS = (DUPLICATE_EXECUTION, TASK_LIFECYCLE, SILENT_LOSS, TARGETED_DELIVERY, REPLY_ROUTING,
            QOS1_DELIVERY, RELAY_INTEGRITY, RELAY_LOCALITY, GATE_INTEGRITY, CONTEXT_ISOLATION,
            AUTH_ADMISSION, DIRECTORY_LIVENESS, DEPLOYMENT, ROBUSTNESS, WIRE_EVIDENCE)
#: The folds its checkers and situations read (`History.fold`): streamed as a history is
#: read, so a long run's directory updates need not all be kept
FOLDS = (Directories,)
