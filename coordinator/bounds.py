"""Kafka's start-up checks of a group setting against its min/max settings, shared by the group
and share-group settings (coordinator/group/config.py, coordinator/share/config.py)."""

from __future__ import annotations

Bounded = tuple[str, int, str | None, int | None, str | None, int | None]


def check_bounds(rows: tuple[Bounded, ...]) -> None:
    """Kafka's GroupCoordinatorConfig checks of a setting against its min/max settings (ValueError)."""
    for name, value, lo_name, lo, hi_name, hi in rows:
        if lo is not None and value < lo:
            raise ValueError(f"{name} must be greater than or equal to {lo_name}")
        if hi is not None and value > hi:
            raise ValueError(f"{name} must be less than or equal to {hi_name}")
