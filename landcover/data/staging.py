"""A data folder that is whole or visibly unfinished: what ``data prepare`` writes into.

A prepare that fails half-way (a corrupt window, a full disk, Ctrl-C) must not leave a folder
of tile pairs that a later ``train`` reads as if it were the data. :func:`staged_folder` gives
the writer a folder to fill:

- a new (or empty) output folder is filled as a hidden temporary folder beside it, renamed
  onto it once everything is written: the output is whole or absent;
- a folder that already holds files cannot be swapped whole: it gets a marker file
  (:data:`INCOMPLETE_MARKER`) first, removed once everything is written. Every reader of a data
  folder (:func:`landcover.data.pairs.discover_pairs`) refuses a folder with the marker;
- a folder holding the tile pairs of a finished earlier prepare is refused (the two sets
  would mix: training reads every pair in a folder), unless ``--overwrite``: the new set is
  then written beside, whole, and replaces the earlier one (its pairs and manifest), the
  folder marked meanwhile. A rerun of an unfinished prepare (the marker) goes on in place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from landcover.diskerrors import output_errors
from landcover.errors import DataError

INCOMPLETE_MARKER = ".landcover-prepare-incomplete"
"""The file that marks a data folder ``data prepare`` has not finished writing."""


def incomplete_message(folder: str) -> str:
    """The one-line refusal of a data folder whose prepare did not finish.

    Args:
        folder: The folder (path or URL).

    Returns:
        The message.
    """
    return (
        f"{folder}: 'landcover data prepare' did not finish writing this folder (it holds "
        f"{INCOMPLETE_MARKER}): run the prepare again to complete it"
    )


def _folder_mode() -> int:
    """The mode a new folder gets under the current umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


PAIR_SUFFIXES = ("_naip.tif", "_lc.tif")
"""The names of the tile pairs ``data prepare`` writes (``{name}_naip.tif``, ``{name}_lc.tif``)."""


def earlier_pairs(out: Path) -> list[Path]:
    """The tile-pair files and manifest a finished earlier prepare (or anything) left in ``out``.

    Args:
        out: The output folder (it may be missing).

    Returns:
        Its ``*_naip.tif``, ``*_lc.tif`` and ``manifest.csv`` files, sorted.
    """
    if not out.is_dir():
        return []
    return sorted(
        p
        for p in out.iterdir()
        if p.is_file() and (p.name.endswith(PAIR_SUFFIXES) or p.name == "manifest.csv")
    )


@contextlib.contextmanager
def staged_folder(out: Path, overwrite: bool = False) -> Iterator[Path]:
    """The folder to write a data folder's files into; ``out`` holds them whole on success.

    Args:
        out: The output folder (it may exist).
        overwrite: Replace the tile pairs a finished earlier prepare left in ``out``.

    Yields:
        The folder to write into: a temporary folder beside ``out``, or ``out`` itself
        (marked unfinished) when it holds other files or an unfinished prepare's.

    Raises:
        DataError: If ``out`` holds tile pairs of a finished prepare and ``overwrite`` is off
            (a second set would mix with them: every pair in a folder is trained on).
        OutputError: If the folder or the marker cannot be written.
    """
    earlier = [] if (out / INCOMPLETE_MARKER).exists() else earlier_pairs(out)
    if earlier and not overwrite:
        pairs = sum(p.name.endswith(PAIR_SUFFIXES[0]) for p in earlier)
        raise DataError(
            f"{out} already holds {pairs} tile pair(s) and a manifest of an earlier prepare "
            f"(such as {earlier[0].name}): a second set would mix with them (train reads every "
            "pair in a folder); write to another folder or pass --overwrite to replace them"
        )
    if out.is_dir() and any(out.iterdir()) and not earlier:
        marker = out / INCOMPLETE_MARKER
        with output_errors(out):
            marker.write_text("landcover data prepare is writing this folder\n")
        yield out  # an exception leaves the marker: the folder is refused until a rerun
        marker.unlink(missing_ok=True)
        return
    with output_errors(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(
            tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".preparing", dir=out.parent)
        )
        os.chmod(staging, _folder_mode())  # mkdtemp's is 0700
    try:
        yield staging
        with output_errors(out.parent):
            if earlier:  # the new set is whole: it replaces the earlier one, marked meanwhile
                _replace_set(staging, out, earlier)
                staging.rmdir()
                return
            if out.is_dir():
                out.rmdir()  # empty (checked above): rename replaces no file of anyone's
            os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _replace_set(staging: Path, out: Path, earlier: list[Path]) -> None:
    """Moves the new set's files into ``out``, then removes the earlier ones not replaced.

    ``out`` is marked unfinished while its files change, so a reader never takes a mix.
    """
    marker = out / INCOMPLETE_MARKER
    marker.write_text("landcover data prepare is replacing this folder's tile pairs\n")
    moved = set()
    for path in sorted(staging.iterdir()):
        os.replace(path, out / path.name)
        moved.add(out / path.name)
    for path in earlier:
        if path not in moved:
            path.unlink(missing_ok=True)
    marker.unlink()
