from __future__ import annotations

import pytest

from bench.core.config import NodeConfig
from bench.core.inputs import MessageReceived, Started
from bench.core.topics import TopicError
from bench.protocols.seed.node import Node, NotStarted


@pytest.mark.parametrize("kw, message", [
    (dict(node_id="a/b"), "nodeId"),
    (dict(node_id=""), "nodeId"),
    (dict(namespace=""), "namespace"),
    (dict(namespace="a.b"), "namespace"),
    (dict(agents=("fin.tax",)), "fin.tax"),
    (dict(scene_groups=("g#",)), "sceneGroupId"),
    (dict(prefix="/x"), "prefix"),
    (dict(qos=2), "qos"),
    (dict(task_timeout_ms=0), "timeouts"),
])
def test_bad_config_raises_naming_the_problem(kw: dict[str, object], message: str) -> None:
    base: dict[str, object] = dict(node_id="exec-1", namespace="llm")
    with pytest.raises((ValueError, TopicError), match=message):
        NodeConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_client_id_defaults_to_node_id() -> None:
    assert NodeConfig("n1", "llm").effective_client_id == "n1"
    assert NodeConfig("n1", "llm", client_id="c9").effective_client_id == "c9"


def test_inputs_before_started_are_a_driver_bug() -> None:
    node = Node(NodeConfig("n1", "llm"))
    with pytest.raises(NotStarted, match="feed Started first"):
        node.handle(MessageReceived(0, "ooder/node/n1/inbox", b"{}"))
    node.handle(Started(0, "b1"))
    with pytest.raises(RuntimeError, match="cannot take Started"):
        node.handle(Started(1, "b2"))
