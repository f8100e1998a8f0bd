"""Writing a synthetic tile as a GeoTIFF, atomically (a temporary file beside it, then a rename)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import rasterio


def block_size(n: int) -> int:
    """GeoTIFF block size along one axis: 256, else the largest multiple of 16 that fits."""
    return 256 if n >= 256 else (n // 16) * 16


def write_tif(path: Path, array: np.ndarray, profile: dict, descriptions: list[str]) -> None:
    """Writes a GeoTIFF atomically (temporary file in the same folder, then rename).

    Raises:
        OutputError: If the folder is read-only, not writable or full (GDAL's own messages
            stay off the console).
    """
    from landcover.diskerrors import output_errors
    from landcover.gdalnoise import quiet_gdal

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with (
            quiet_gdal(),
            output_errors(path.parent),
            rasterio.Env(GDAL_PAM_ENABLED="NO"),
            rasterio.open(tmp, "w", **profile) as dst,
        ):
            dst.write(array)
            for band, text in enumerate(descriptions, start=1):
                dst.set_band_description(band, text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def pairs_written_before(folders: list[Path], prefix: str) -> list[Path]:
    """Synthetic tile files that a writer with ``prefix`` finds already where it writes.

    Only the names it writes count: ``{prefix}_NNN`` and ``{prefix}_{split}_NNN`` pairs
    (another prefix that starts with this one, ``synth_b_000``, is another set).

    Args:
        folders: The folders it writes tiles into.
        prefix: The file-name prefix of the tiles to write.

    Returns:
        The ``_naip.tif`` and ``_lc.tif`` files of such names there, sorted.
    """
    name = re.compile(rf"{re.escape(prefix)}_(?:(?:train|val|test)_)?[0-9]{{3}}_(?:naip|lc)\.tif")
    return sorted(
        path
        for folder in folders
        if folder.is_dir()
        for path in folder.iterdir()
        if name.fullmatch(path.name)
    )
