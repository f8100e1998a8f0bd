"""Data: tile pairs, reading, alignment, no-data, class indexes, band statistics and sharding.

Also the back-ends of the ``landcover data`` commands (check, prepare, stats). The synthetic
worlds (``landcover data synth`` and the built-in sample) are :mod:`landcover.synthetic`; the
training feed, from tiles in memory to the batch on the device, is :mod:`landcover.feed`.
"""
