"""A region's tiles from a STAC catalogue: the items an area touches, one per place.

:mod:`.catalogue` searches a STAC API (pystac-client) or reads a local catalogue or
ItemCollection file, by area, collection and dates; :mod:`.places` keeps one item where
flights overlap (the latest, or the latest in the dates given); :mod:`.find` turns the items
into the tiles of a ``landcover predict`` job. Nothing here knows the job: it hands it paths or
URLs, as a user would list them.
"""

from landcover.search.find import FoundTile, SearchRequest, find_tiles

__all__ = ["FoundTile", "SearchRequest", "find_tiles"]
