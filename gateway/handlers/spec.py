"""What a Kafka API handler is; gateway/handlers/registry.py lists the handlers.

A handler is `async def h(ctx: RequestContext, request) -> response | None`. By default
`request` is the generated message object (kafka_wire.messages) decoded at ctx.api_version and
the response is a generated message object, encoded by the server. With raw_request=True the
handler gets the request body as a writable memoryview (for the zero-copy produce path); a
handler may return RawResponse to hand over an already-encoded body (the fetch path). Returning
None sends nothing (Produce with acks=0). Raising KafkaApiError (gateway.errors) makes the
server answer with that error code in the response's top-level error field when the API has
one, and otherwise close the connection (as Kafka does for requests it cannot answer).

A connection's requests take effect in the order sent: each handler starts once the previous
one has returned or called ctx.effects_applied (gateway/context.py); answers are written in
request order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.context import RequestContext

Buffer = bytes | bytearray | memoryview


@dataclass
class RawResponse:
    """A response body (after the response header) already encoded, as buffers to write."""

    buffers: Sequence[Buffer]


Handler = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    fn: Handler
    raw_request: bool = False
    min_version: int | None = None  # None: the schema's lowest valid version
    max_version: int | None = None  # None: the schema's highest stable version
    # May start while earlier requests of its connection still wait for durability (Produce
    # after Produce: pipelined producers keep their throughput); any other request starts only
    # once the earlier ones are answered, so it sees their effects (ctx.effects_applied).
    overlaps_durability: bool = False
