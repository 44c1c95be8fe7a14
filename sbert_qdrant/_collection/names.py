"""Collection (and alias) names: every name Qdrant accepts (its server, qdrant-client's local mode), so that the
collections other tools created (mcp-server-qdrant's ``my memories``, ``Notizen-Ü``) open here, on every engine."""

from __future__ import annotations

from ..errors import InvalidArgumentError

#: The characters Qdrant refuses in a name (they cannot be a folder's name on every system).
_FORBIDDEN = ("<", ">", ":", '"', "/", "\\", "|", "?", "*", "\0", "\x1f")
MAX_NAME_LENGTH = 255


def name_problem(value: object) -> str | None:
    """What Qdrant would refuse in ``value`` as a collection name (None: nothing)."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a string"
    if value in ("", ".", ".."):
        return "is empty" if not value else f"is {value!r}, a folder's own name"
    if len(value) > MAX_NAME_LENGTH:
        return f"is {len(value)} characters long, more than {MAX_NAME_LENGTH}"
    bad = [c for c in _FORBIDDEN if c in value]
    return f"contains {bad[0]!r}" if bad else None


def check_name(value: object, argument: str, *, other_than: str | None = None) -> None:
    """Refuse a name Qdrant refuses (or ``other_than``, the collection's own), naming ``argument`` and the fix."""
    problem = name_problem(value)
    if problem is None and value == other_than:
        problem = "is the collection's own name"
    if problem is not None:
        raise InvalidArgumentError(
            f"{argument}={value!r} {problem}: a collection name is 1-{MAX_NAME_LENGTH} characters, any but "
            f"{' '.join(c for c in _FORBIDDEN if c.isprintable())}, NUL and '\\x1f', and not '.' or '..'."
        )
