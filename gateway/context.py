"""What a request handler sees: the request's header fields and the gateway's services."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
