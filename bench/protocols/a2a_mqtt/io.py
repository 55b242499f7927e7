"""What the profile's sans-IO agents take in and hand out: the seed core's own vocabulary
(bench/core/inputs.py, bench/core/commands.py), so that every substrate's host drives them
as it drives the seed's node — MQTT 5 properties ride on MessageReceived, Publish and the
Connect's will; the agent's work is Execute, answered by AgentEmitted and TaskFinished from
the one scripted Behaviour; a requester's operations are TaskRequested and end in
SettleRequest. Only what the profile adds is here: how its payloads say what to do.

Driver contract (bench/core/commands.py): every PersistRecord of one batch is durable
before any Publish of it leaves, and the PUBLISH that caused the batch is acknowledged only
after that.
"""

from __future__ import annotations

from bench.core.commands import (
    CancelTimer,
    Command,
    Connect,
    Execute,
    PersistRecord,
    Publish,
    Record,
    SettleRequest,
    StartTimer,
    Subscribe,
)
from bench.core.effects import Effects
from bench.core.inputs import (
    AgentEmitted,
    ConnectionUp,
    MessageReceived,
    PublishSettled,
    Restored,
    Started,
    Stopping,
    Subscribed,
    TaskFinished,
    TaskRequested,
    TimerFired,
    TimerId,
    TimerKind,
)
from bench.core.vocabulary import INPUT_REQUIRED  # an agent's result asking the next turn

__all__ = ["AgentEmitted", "CancelTimer", "Command", "Connect", "ConnectionUp", "Effects",
           "Execute", "INPUT_REQUIRED", "MessageReceived", "PersistRecord", "Publish",
           "PublishSettled", "Record", "RequesterInput", "ResponderInput", "Restored",
           "SettleRequest", "StartTimer", "Started", "Stopping", "Subscribe", "Subscribed",
           "TaskFinished", "TaskRequested", "TimerFired", "TimerId", "TimerKind"]

ResponderInput = (Started | Stopping | ConnectionUp | Subscribed | MessageReceived
                  | AgentEmitted | TaskFinished)
RequesterInput = (Started | Stopping | ConnectionUp | Subscribed | MessageReceived | TimerFired
                  | PublishSettled | TaskRequested)

