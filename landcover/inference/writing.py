"""What every map writer shares: one-line write errors, and a scratch folder beside the output.

The COG writer (:mod:`landcover.inference.writers`) and any other map writer
(:mod:`landcover.inference.sinks`) write through :func:`write_errors`, so that a full or
read-only output folder, or a failing GDAL write, ends as one line naming the map.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rasterio._err import CPLE_BaseError
from rasterio.errors import RasterioError

from landcover.diskerrors import OutputError, output_errors
from landcover.errors import DataError, first_line
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


def error_reason(exc: BaseException) -> str:
    """The first line of the innermost useful message of a chained GDAL / OS error.

    Args:
        exc: The exception (rasterio chains GDAL's own message as the cause).

    Returns:
        One line.
    """
    messages = []
    current: BaseException | None = exc
    while current is not None:
        messages.append(first_line(current))
        current = current.__cause__ or current.__context__
    useful = [m for m in messages if "See previous exception" not in m]
    reason = _UNKNOWN_PLACE.sub(",", (useful or messages)[-1])  # libtiff's -1 as unsigned
    short = _SHORT_READ.search(reason)
    if (short and int(short.group(1)) < int(short.group(2))) or _CANNOT_READ.search(reason):
        reason += ": the file is cut short (truncated) or corrupt"
    return reason


_UNKNOWN_PLACE = re.compile(r" at row 4294967295, col 4294967295,")
_SHORT_READ = re.compile(r"got (\d+) bytes, expected (\d+)")  # libtiff's
_CANNOT_READ = re.compile(r"Cannot read \d+ bytes at offset \d+")  # GDAL's


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
