"""Counts as messages say them: ``1 tile``, ``2 tiles``, ``1,024 tiles``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular for one.

    Args:
        n: The count.
        noun: The noun for one (``tile``).
        plural: The noun for others (default: the noun and ``s``).

    Returns:
        ``1 tile``, ``0 tiles``, ``1,024 tiles``.
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
