"""`a2a-bench deploy TOPOLOGY --compose FILE`: the docker substrate's deployment as a Compose
file, to bring up, look at, and point `a2a-bench run --broker mqtt://127.0.0.1:1883` at.

Same image, same node process as `--mode docker`: the broker (`broker`, published on
127.0.0.1) and one service per node, each reading its launch spec from a file written
beside the Compose file (`--spec`), its data dir under `data/` there. The file is JSON,
which YAML reads as it is.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.spec.distribution import SpecError
from bench.spec.scenario import load_scenario
from bench.substrates import Choice, node_configs
from bench.substrates.docker import SUBSTRATE
from bench.substrates.docker.deployment import BROKER_PORT, broker_command
from bench.substrates.docker.image import LABEL, PROJECT, tag
from bench.substrates.live.control import LaunchSpec
from bench.variants import REFERENCE


def compose(topology: str, broker: str | None, path: Path,
            port: int = BROKER_PORT) -> dict[str, Any]:
    """Write the Compose file at `path` (and the launch specs beside it); returns it (its
    `broker` key: the broker it runs), or SpecError if the docker substrate would not run
    the topology on `broker` (None: the one a run of it starts), or a node of it is a
    program or image of its own (every service here is the reference node)."""
    where = path.resolve().parent
    with tempfile.TemporaryDirectory() as scratch:
        # the topology alone, with the default workload: a deployment runs none of its own
        # (the quickstart's, once used here, asks for processes and scene groups only the
        # seed's nodes have, and is refused on another protocol's topology)
        bare = Path(scratch) / "deploy.toml"
        bare.write_text('name = "deploy"\n')
        scenario = load_scenario(bare, topology=topology)
    # what is said of it is said of the topology's file, not of a file that is gone
    scenario = replace(scenario, source=scenario.topology.source)
    own = [*scenario.command_nodes, *scenario.image_nodes]
    if own:
        raise SpecError(f"{scenario.topology.source}: {', '.join(own)} run a program or image "
                        "of their own (command = or image = in the topology): a deployment "
                        "writes the bench's reference node for every node")
    broker = broker or scenario.topology.broker.live_default_for(scenario.mqtt)
    if (refused := SUBSTRATE.refusal(scenario, Choice(broker=broker))) is not None:
        raise SpecError(refused)
    specs, data = where / "specs", where / "data"
    specs.mkdir(parents=True, exist_ok=True)
    mount = {"type": "bind", "source": str(PROJECT), "target": str(PROJECT), "read_only": True}
    env = {"PYTHONPATH": str(PROJECT), "PYTHONUNBUFFERED": "1"}
    labels = {LABEL: "deploy", f"{LABEL}.topology": scenario.topology.name}
    services: dict[str, Any] = {"broker": {
        "image": tag(), "command": broker_command(broker, where), "environment": env, "labels": labels,
        "ports": [f"127.0.0.1:{port}:{BROKER_PORT}"],
        "volumes": [mount, {"type": "bind", "source": str(where), "target": str(where)}]}}
    t0 = time.time()
    for node_id, config in node_configs(scenario).items():
        node_data = data / node_id
        node_data.mkdir(parents=True, exist_ok=True)
        spec = LaunchSpec(config, REFERENCE.name, node_data, ("broker", BROKER_PORT), t0,
                          scenario.seed, scenario.workload.to_json(), mqtt=scenario.mqtt,
                          session_expiry_s=scenario.session_expiry_s)
        (specs / f"{node_id}.json").write_text(json.dumps(spec.to_json()))
        services[node_id] = {
            "image": tag(), "depends_on": ["broker"], "environment": env, "labels": labels,
            "command": ["python", "-m", "bench.substrates.live.node_process", "--spec",
                        str(specs / f"{node_id}.json")],
            "volumes": [mount,
                        {"type": "bind", "source": str(specs), "target": str(specs),
                         "read_only": True},
                        {"type": "bind", "source": str(node_data), "target": str(node_data)}]}
    doc = {"version": "3.8", "services": services}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return {**doc, "broker": broker}
