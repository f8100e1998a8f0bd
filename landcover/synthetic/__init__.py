"""Synthetic worlds: NAIP-like tiles with Chesapeake land-cover labels, drawn from a seed.

From the ground up:

1. :mod:`.curves` draws the noise fields, curves (roads, rivers) and masks the worlds are made of.
2. :mod:`.landscape` lays out a scene's land cover as appearance codes: forest, fields, lakes,
   a river, roads, settlements of buildings and parking lots; :mod:`.nodatamasks` the places
   without data.
3. :mod:`.synthetic` renders the codes as imagery with a spectrum and texture per class and
   writes the GeoTIFF pairs (:mod:`.tiffile`): the ``easy`` world (``landcover data synth
   OUT``).
4. :mod:`.flights` holds the radiometry of a NAIP flight (season, shadows, blur, calibration,
   haze, noise, JPEG) and :mod:`.shifted` builds the ``shifted`` world from it
   (``landcover data synth OUT --profile shifted``): train, validation and test tiles from
   different flights, a varying class mix and rare buildings.
5. :mod:`.sample` is the built-in sample dataset: the ``easy`` world generated once into the
   cache, which ``train`` without ``--data`` reads.
6. :mod:`.replacing` moves a new set over an earlier one only once it is whole (``--overwrite``).

The worlds write the same files as real data (``{name}_naip.tif``, ``{name}_lc.tif``) and stand
on nothing of the package but small shared modules (``fileio``, ``diskerrors``, ``gdalnoise``):
:mod:`landcover.data` reads their tiles as it reads any others, and does not import this package.
"""
