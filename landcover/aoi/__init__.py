"""An area of interest: a polygon file read, checked and brought to WGS 84.

:mod:`.area` reads it (GeoJSON, any CRS it declares); the region job searches a STAC catalogue
with it, maps the tiles it touches and counts hectares inside it; ``landcover view`` draws it.
"""

from landcover.aoi.area import AreaOfInterest, read_area

__all__ = ["AreaOfInterest", "read_area"]
