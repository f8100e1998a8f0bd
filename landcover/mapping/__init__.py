"""The region job: many tiles over many workers and nodes, resumable, with its outputs.

``landcover predict`` deals a region's tiles to its workers (:mod:`.deal`), predicts each with
:mod:`landcover.inference` and records its outcome (:mod:`.records`), skips tiles whose outputs
are complete (:mod:`.outputs`), and writes the job's summary, VRT mosaics and STAC items
(:mod:`.summary`, :mod:`.mosaic`, :mod:`.stac` and, as a static STAC Collection,
:mod:`.staccollection`; :mod:`.othermaps` says when the folder holds maps those leave out).
:mod:`.job` launches it; :mod:`.comm` is all it needs from the parallel layer.
"""
