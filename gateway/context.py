"""What a request handler sees: the request's header fields and the gateway's services."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_wire.primitives import NO_TAGS, TaggedFields

if TYPE_CHECKING:
    from gateway.services import GatewayServices


@dataclass
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_address: str  # "host:port" of the peer
    services: GatewayServices
    # Set by the connection: see effects_applied.
    on_applied: Callable[[bool], None] | None = None
    header_tags: TaggedFields = NO_TAGS  # the request header's tagged fields (gateway/imports.py)

    def effects_applied(self, *, durability_pending: bool) -> None:
        """This request's effects are in place: the next request of the connection may start
        while this one still waits (Kafka applies a connection's requests one at a time; by
        default the next one starts when this handler returns). durability_pending=True (Produce
        before waiting for the ack quorum): only requests that may overlap durability waits
        (HandlerSpec.overlaps_durability) start before this one is answered; False (a Fetch
        about to long-poll): the wait changes nothing, anything may start."""
        if self.on_applied is not None:
            self.on_applied(durability_pending)
