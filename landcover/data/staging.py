"""A data folder that is whole or visibly unfinished: what ``data prepare`` writes into.

A prepare that fails half-way (a corrupt window, a full disk, Ctrl-C) must not leave a folder
of tile pairs that a later ``train`` reads as if it were the data. :func:`staged_folder` gives
the writer a folder to fill:

- a new (or empty) output folder is filled as a hidden temporary folder beside it, renamed
  onto it once everything is written: the output is whole or absent;
- a folder that already holds files cannot be swapped whole: it gets a marker file
  (:data:`INCOMPLETE_MARKER`) first, removed once everything is written. Every reader of a data
  folder (:func:`landcover.data.pairs.discover_pairs`) refuses a folder with the marker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from landcover.diskerrors import output_errors

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


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """The folder to write a data folder's files into; ``out`` holds them whole on success.

    Args:
        out: The output folder (it may exist).

    Yields:
        The folder to write into: a temporary folder beside ``out``, or ``out`` itself
        (marked unfinished) when it already holds files.

    Raises:
        OutputError: If the folder or the marker cannot be written.
    """
    if out.is_dir() and any(out.iterdir()):
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
            if out.is_dir():
                out.rmdir()  # empty (checked above): rename replaces no file of anyone's
            os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
