"""Maps an earlier job left in the output folder for tiles this job does not list.

A job's summary, VRT mosaics, STAC items (and so ``landcover view``) describe the job's own
tiles. Mapping other tiles into a folder that holds maps of earlier ones is allowed (they are
not touched), but those maps then drop out of the folder's job files: one warning says so,
at the job's start, naming one of them.
"""

from __future__ import annotations

import logging

from landcover import storage
from landcover.errors import LandcoverError
from landcover.mapping.tiles import OUTPUT_SUFFIXES, output_stem
from landcover.wording import counted

log = logging.getLogger("landcover")

CLASS_MAP = OUTPUT_SUFFIXES[0]
"""A class map's name: the tile's output stem and this (``_class.tif``)."""


def other_maps(out: str, tiles: list[str]) -> list[str]:
    """The stems of the class maps in ``out`` whose tiles are not among ``tiles``.

    Args:
        out: The output folder (path or URL).
        tiles: The job's tiles.

    Returns:
        Their stems, sorted (none when the folder is missing or cannot be listed).
    """
    try:
        names = [storage.name(url) for url in storage.listdir(out)]
    except (LandcoverError, OSError):  # a new folder (or one not listable): nothing to say
        return []
    stems = {output_stem(t) for t in tiles}
    found = (n[: -len(CLASS_MAP)] for n in names if n.endswith(CLASS_MAP))
    return sorted(stem for stem in found if stem not in stems)


def warn_other_maps(out: str, tiles: list[str]) -> list[str]:
    """Warns, once, that the folder holds maps this job's files will not describe.

    Args:
        out: The output folder (path or URL).
        tiles: The job's tiles.

    Returns:
        The other maps' stems.
    """
    others = other_maps(out, tiles)
    if others:
        log.warning(
            "%s holds the maps of %s this job does not list (such as %s): they stay, but the "
            "summary, the mosaics and the STAC items describe this job's tiles only; list "
            "those tiles too, or map into another --out",
            out,
            counted(len(others), "other tile"),
            others[0],
        )
    return others
