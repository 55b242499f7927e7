"""MQTT 5 PUBLISH properties as one frozen value: what a node asks to be sent with a message
and what a broker hands on with one (MQTT 5 §3.3.2.3). Any protocol's node, any substrate's
broker and client carry it unchanged; none of them reads inside a payload for it. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Props:
    """The properties the bench carries; User Properties in order, repeats kept (MQTT 5
    allows a key more than once, [MQTT-3.3.2-18] forwarding them unchanged)."""

    response_topic: str | None = None
    correlation_data: bytes | None = None
    user_properties: tuple[tuple[str, str], ...] = ()
    content_type: str | None = None
    message_expiry_s: int | None = None

    def user(self, key: str) -> str | None:
        """The last value of User Property `key`."""
        found = None
        for k, v in self.user_properties:
            if k == key:
                found = v
        return found

    def expiring_in(self, seconds: int) -> Props:
        """These properties as forwarded with `seconds` of the Message Expiry Interval left
        ([MQTT-3.3.2-6])."""
        return replace(self, message_expiry_s=seconds)
