"""MQTT 5 PUBLISH properties as one frozen value: what a node asks to be sent with a message
and what a broker hands on with one (MQTT 5 §3.3.2.3). Any protocol's node, any substrate's
broker and client carry it unchanged; none of them reads inside a payload for it. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bench.core.frozen import quick_init_module

#: What the property_tampering fault appends to a value it alters (bytes for Correlation
#: Data, text otherwise): a checker tells an alteration in flight from a node's own doing.
TAMPER_MARK = "|tampered"
#: The properties the property_tampering fault acts on
TAMPERABLE = ("response_topic", "correlation_data", "user_property")


@dataclass(frozen=True, slots=True)
class Props:
    """The properties the bench carries; User Properties in order, repeats kept (MQTT 5
    allows a key more than once, [MQTT-3.3.2-18] forwarding them unchanged)."""

    response_topic: str | None = None
    correlation_data: bytes | None = None
    user_properties: tuple[tuple[str, str], ...] = ()
    content_type: str | None = None
    message_expiry_s: int | None = None
    #: the Payload Format Indicator (1: the payload is UTF-8 text, [MQTT-3.3.2-4]; 0 or
    #: None: unspecified bytes)
    payload_format: int | None = None

    def user(self, key: str) -> str | None:
        """The last value of User Property `key`."""
        found = None
        for k, v in self.user_properties:
            if k == key:
                found = v
        return found

    def tampered(self, prop: str, strip: bool, key: str, add: bool = False) -> Props | None:
        """These properties with `prop` stripped, or altered (TAMPER_MARK appended; a User
        Property: the value of every `key`); None when it has nothing of the kind. `add`: a
        User Property `key` it lacks is added, its value TAMPER_MARK (one it has, altered)."""
        if add and prop == "user_property" and not any(k == key for k, _v in self.user_properties):
            return replace(self, user_properties=(*self.user_properties, (key, TAMPER_MARK)))
        if prop == "response_topic" and self.response_topic is not None:
            return replace(self, response_topic=None if strip
                           else self.response_topic + TAMPER_MARK)
        if prop == "correlation_data" and self.correlation_data is not None:
            return replace(self, correlation_data=None if strip
                           else self.correlation_data + TAMPER_MARK.encode())
        if prop == "user_property" and any(k == key for k, _v in self.user_properties):
            return replace(self, user_properties=tuple(
                (k, v) if k != key else (k, v + TAMPER_MARK)
                for k, v in self.user_properties if not (strip and k == key)))
        return None

    def expiring_in(self, seconds: int) -> Props:
        """These properties as forwarded with `seconds` of the Message Expiry Interval left
        ([MQTT-3.3.2-6])."""
        return replace(self, message_expiry_s=seconds)


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
