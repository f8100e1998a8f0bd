"""``landcover view``: a region job's map in the browser, served from this machine.

:mod:`.job` reads the job's folder, :mod:`.aoi` its area of interest, :mod:`.mosaics` its
class maps' VRTs; :mod:`.render` cuts map tiles from its COGs on demand, :mod:`.pixel` reads
a clicked pixel's class and probabilities, and :mod:`.server` serves the page (``static/``)
and all of these.
"""
