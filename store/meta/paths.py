"""Node-path rules shared by the metadata-store implementations."""

from __future__ import annotations


def validate_path(path: str, *, sequential: bool = False) -> str:
    """Return `path` if it is a valid absolute node path, else raise ValueError.

    A sequential create may end in '/' (ZooKeeper allows it: the name is then the counter alone).
    """
    if not isinstance(path, str):
        raise ValueError(f"node path must be a str, got {type(path).__name__}")
    if not path.startswith("/"):
        raise ValueError(f"node path must be absolute (start with '/'): {path!r}")
    if path == "/":
        return path
    if "\x00" in path:
        raise ValueError(f"node path must not contain NUL: {path!r}")
    body = path[1:]
    if sequential and body.endswith("/"):
        body = body[:-1]
    elif body.endswith("/"):
        raise ValueError(f"node path must not end with '/': {path!r}")
    for segment in body.split("/"):
        if segment == "":
            raise ValueError(f"node path has an empty segment: {path!r}")
        if segment in (".", ".."):
            raise ValueError(f"node path must not contain '.' or '..' segments: {path!r}")
    return path


def validate_node_path(path: str, op: str, *, sequential: bool = False) -> str:
    """validate_path for an operation that may not touch the root ("create", "delete")."""
    validate_path(path, sequential=sequential)
    if path == "/":
        raise ValueError(f"cannot {op} the root node")
    return path


def parent_of(path: str) -> str:
    """'/a/b' -> '/a'; '/a' -> '/'; '/' -> ''."""
    if path == "/":
        return ""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def name_of(path: str) -> str:
    return path.rsplit("/", 1)[1]


def ancestors(path: str) -> list[str]:
    """Proper ancestors below the root, outermost first: '/a/b/c' -> ['/a', '/a/b']."""
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
