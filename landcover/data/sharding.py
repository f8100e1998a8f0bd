"""Splitting tiles across workers.

The rule: tiles are sorted by name and dealt round-robin, so worker ``r`` of ``W`` holds tiles
``r, r + W, r + 2W, ...``: the shares are disjoint, together cover every tile, and differ in size
by at most one tile. When there are more workers than tiles, worker ``r`` holds tile
``r mod T``: every worker still has a tile to sample from, and each tile is held by
``ceil(W / T)`` or ``floor(W / T)`` workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def shard(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """Returns worker ``rank``'s share of ``items``.

    Args:
        items: The items (tiles), in a fixed order every worker agrees on.
        rank: This worker's rank, ``0 <= rank < world_size``.
        world_size: Number of workers.

    Returns:
        The items this worker holds (never empty when ``items`` is not).

    Raises:
        ValueError: If the rank is out of range.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
    if not items:
        return []
    if world_size <= len(items):
        return list(items[rank::world_size])
    return [items[rank % len(items)]]


def counts_once(rank: int, world_size: int, n_items: int) -> bool:
    """Whether worker ``rank``'s share is the one to count, so every item is counted once.

    With at least as many items as workers the shares are disjoint and every worker counts its
    own. With more workers than items, worker ``r`` holds item ``r mod T``: only workers
    ``0..T-1`` count theirs (together they hold each item exactly once).

    Args:
        rank: This worker's rank.
        world_size: Number of workers.
        n_items: Number of items dealt out by :func:`shard`.

    Returns:
        True when this worker's share counts in a sum over all workers.
    """
    return world_size <= n_items or rank < n_items
