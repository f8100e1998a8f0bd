"""Data: tile pairs, reading, alignment, no-data, class indexes, band statistics and sharding.

Also the back-ends of the ``landcover data`` commands (check, prepare, stats) and, for now, the
synthetic worlds. The training feed, from tiles in memory to the batch on the device, is
:mod:`landcover.feed`.
"""
