"""The one exception a decoder raises for bad input."""

from __future__ import annotations


class DecodeError(ValueError):
    """Bytes that are not a valid encoding. `where` names the field or structure, `offset` is
    the byte position in the input where the problem was found."""

    def __init__(self, what: str, where: str = "", offset: int = -1) -> None:
        self.what = what
        self.where = where
        self.offset = offset
        loc = f" in {where}" if where else ""
        at = f" at byte {offset}" if offset >= 0 else ""
        super().__init__(f"{what}{loc}{at}")
