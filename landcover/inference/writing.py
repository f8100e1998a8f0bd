"""What every map writer shares: one-line write errors, and a scratch folder beside the output.

The COG writer (:mod:`landcover.inference.writers`) and any other map writer
(:mod:`landcover.inference.sinks`) write through :func:`write_errors`, so that a full or
read-only output folder, or a failing GDAL write, ends as one line naming the map.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rasterio._err import CPLE_BaseError
from rasterio.errors import RasterioError

from landcover.diskerrors import OutputError, output_errors
from landcover.errors import DataError, error_reason
from landcover.fileio import SCRATCH_PREFIX
from landcover.gdalnoise import quiet_gdal


@contextmanager
def write_errors(label: str, folder: Path | None = None) -> Iterator[None]:
    """Turns GDAL and OS write errors into one line naming what was written.

    GDAL's raw messages of the writes stay off the console (:func:`quiet_gdal`).

    Args:
        label: The map (or folder) named in the message.
        folder: The output folder (default: ``label``'s parent).

    Yields:
        Nothing; wrap the writes.

    Raises:
        OutputError: If the folder is read-only, not writable or full.
        DataError: If a write inside fails otherwise.
    """
    try:
        with quiet_gdal(), output_errors(folder or Path(label).parent):
            yield
    except OutputError:
        raise
    except (RasterioError, CPLE_BaseError, OSError) as exc:
        raise DataError(f"{label}: writing the maps failed ({error_reason(exc)})") from None


@contextmanager
def scratch_folder(near: Path) -> Iterator[Path]:
    """A hidden scratch folder beside ``near`` (same file system), removed afterwards.

    Args:
        near: The destination folder.

    Yields:
        The scratch folder.
    """
    with output_errors(near):
        near.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=near))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
