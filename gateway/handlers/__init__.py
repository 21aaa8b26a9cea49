"""Kafka API handlers: every module in this folder registers its handlers in
gateway.handlers.registry.HANDLERS with @handler. load_all() imports them all (pkgutil), so a
new handler module needs no list to be edited. The server calls it; it is not run on package
import because handler modules import code that itself imports gateway.handlers.registry."""

from __future__ import annotations

import importlib
import logging
import pkgutil

log = logging.getLogger(__name__)

_SKIP = {"registry"}
_loaded = False


def load_all() -> None:
    """Import every handler module once (idempotent)."""
    global _loaded
    if _loaded:
        return
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in _SKIP and not mod.name.startswith("_"):
            try:
                importlib.import_module(f"{__name__}.{mod.name}")
            except Exception:
                # One broken handler module must not take every other API down with it.
                log.exception("handler module %s failed to import; its APIs are not served", mod.name)
    _loaded = True
