"""Where a segmented log keeps its metadata: one safe path segment per log and cursor name."""

from __future__ import annotations

from store.layout import MANAGED_LOGS

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def encode_name(name: str) -> str:
    """Percent-encode everything but [A-Za-z0-9_-], so '/', '.', '..' and '%' are safe."""
    if not name:
        raise ValueError("empty log/cursor name")
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode())


def decode_name(segment: str) -> str:
    out = bytearray()
    i = 0
    while i < len(segment):
        if segment[i] == "%":
            out.append(int(segment[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(segment[i]))
            i += 1
    return out.decode()


def log_path(name: str) -> str:
    return f"{MANAGED_LOGS}/{encode_name(name)}"


def cursors_path(name: str) -> str:
    return f"{log_path(name)}/cursors"


def cursor_path(log_name: str, cursor_name: str) -> str:
    return f"{cursors_path(log_name)}/{encode_name(cursor_name)}"
