"""One item a place: where flights overlap, the latest (within the dates asked for).

NAIP is flown over each state every two or three years, and a catalogue holds every flight: a
search over a county returns each quarter quad once a flight. Two items are of one place when
their footprints share at least :data:`SAME_PLACE` of the smaller one (in degrees: the share
barely changes over a few kilometres); of each such group the item with the latest date stays
(the search's dates already bound it), ties broken by id. Neighbouring quarter quads overlap
at their edges by a few hundred metres (under a tenth of a tile): both stay, and the job
counts their shared ground once (:mod:`landcover.mapping`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pystac
import shapely
from shapely.geometry import shape

from landcover.search.catalogue import item_time

SAME_PLACE = 0.5
"""Share of the smaller footprint two items must share to be one place."""

_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Places:
    """The items kept, one a place, and those left out as older flights of a kept one.

    Attributes:
        kept: One item a place, in the search's order.
        older: ``(left out, kept in its place)`` pairs.
    """

    kept: list[pystac.Item]
    older: list[tuple[pystac.Item, pystac.Item]]


def _key(item: pystac.Item) -> tuple[datetime, str]:
    return item_time(item) or _EARLIEST, item.id


def one_per_place(items: list[pystac.Item]) -> Places:
    """Keeps the latest item of each place.

    Args:
        items: Items with geometries (a search's results).

    Returns:
        The items kept and those left out.
    """
    shapes = [shape(item.geometry) for item in items]
    tree = shapely.STRtree(shapes)
    newest_first = sorted(range(len(items)), key=lambda i: _key(items[i]), reverse=True)
    kept: list[int] = []
    place_of: dict[int, int] = {}  # a kept item: itself
    older: list[tuple[pystac.Item, pystac.Item]] = []
    for i in newest_first:  # a place's newest comes first and is kept
        place = None
        for j in sorted(int(j) for j in tree.query(shapes[i], predicate="intersects")):
            if j in place_of:
                shared = shapely.intersection(shapes[i], shapes[j]).area
                if shared >= SAME_PLACE * min(shapes[i].area, shapes[j].area) > 0:
                    place = j
                    break
        if place is None:
            kept.append(i)
            place_of[i] = i
        else:
            older.append((items[i], items[place]))
    order = sorted(kept)
    return Places([items[i] for i in order], older)
