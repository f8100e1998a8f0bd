"""A data folder that is whole or visibly unfinished: what ``data prepare`` writes into.

A prepare that fails half-way (a corrupt window, a full disk, Ctrl-C) must not leave a folder
of tile pairs that a later ``train`` reads as if it were the data. :func:`staged_folder` gives
the writer a folder to fill:

- a new (or empty) output folder is filled as a hidden temporary folder beside it, renamed
  onto it once everything is written: the output is whole or absent;
- a folder that already holds files is filled through a hidden scratch folder inside it, whose
  files are moved in once everything is written (the folder marked unfinished with
  :data:`INCOMPLETE_MARKER` during the moves: every reader of a data folder,
  :func:`landcover.data.pairs.discover_pairs`, refuses a folder with the marker). A prepare
  that fails leaves the folder as it was;
- the set of an earlier prepare there (its ``manifest.csv`` and the files it lists) is refused
  (the two sets would mix: training reads every pair in a folder), unless ``--overwrite``: the
  new set then replaces it. Tile-pair files no manifest lists (another set, or the inputs) are
  always refused, never removed; after an interrupted move (the marker) a rerun replaces
  whatever pairs are there.
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from landcover.diskerrors import output_errors
from landcover.errors import DataError
from landcover.fileio import INCOMPLETE_MARKER, SCRATCH_PREFIX, move_set_in


def incomplete_message(folder: str) -> str:
    """The one-line refusal of a data folder whose prepare did not finish.

    Args:
        folder: The folder (path or URL).

    Returns:
        The message.
    """
    return (
        f"{folder}: 'landcover data prepare' (or 'data synth --overwrite') did not finish "
        f"writing this folder (it holds {INCOMPLETE_MARKER}): run it again to complete it"
    )


def _folder_mode() -> int:
    """The mode a new folder gets under the current umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


PAIR_SUFFIXES = ("_naip.tif", "_lc.tif")
"""The names of the tile pairs ``data prepare`` writes (``{name}_naip.tif``, ``{name}_lc.tif``)."""

MANIFEST = "manifest.csv"


@dataclass(frozen=True)
class FolderState:
    """What an output folder holds before a prepare writes into it.

    Attributes:
        listed: ``manifest.csv`` and the existing files it lists (an earlier prepare's set).
        strays: Tile-pair files (``*_naip.tif``, ``*_lc.tif``) that no manifest lists.
        unfinished: Whether an earlier prepare did not finish (its marker is there).
    """

    listed: list[Path]
    strays: list[Path]
    unfinished: bool


def folder_state(out: Path) -> FolderState:
    """Reads what ``out`` holds (see :class:`FolderState`; a missing folder holds nothing).

    Args:
        out: The output folder.

    Returns:
        Its state.
    """
    if not out.is_dir():
        return FolderState([], [], False)
    listed = []
    manifest = out / MANIFEST
    if manifest.is_file():
        with manifest.open(newline="") as handle:
            for row in csv.DictReader(handle):
                for column in ("image", "label"):
                    path = out / (row.get(column) or "")
                    if path.parent == out and path.is_file():  # its own files, by name
                        listed.append(path)
        listed.append(manifest)
    pairs = (p for p in out.iterdir() if p.is_file() and p.name.endswith(PAIR_SUFFIXES))
    strays = sorted(set(pairs) - set(listed))
    return FolderState(sorted(set(listed)), strays, (out / INCOMPLETE_MARKER).exists())


@contextlib.contextmanager
def staged_folder(out: Path, overwrite: bool = False) -> Iterator[Path]:
    """The folder to write a data folder's files into; ``out`` holds them whole on success.

    Args:
        out: The output folder (it may exist).
        overwrite: Replace the set an earlier prepare's ``manifest.csv`` lists in ``out``.

    Yields:
        The folder to write into: a new folder's temporary folder beside it (renamed onto
        it), else a scratch folder inside ``out`` (its files moved in at the end).

    Raises:
        DataError: If ``out`` holds tile-pair files no manifest lists (another set, or the
            inputs: they are never removed), or an earlier prepare's set and ``overwrite`` is
            off (the sets would mix: train reads every pair in a folder).
        OutputError: If the folder or the marker cannot be written.
    """
    state = folder_state(out)
    replaced = state.listed + state.strays if state.unfinished else state.listed
    if state.strays and not state.unfinished:
        raise DataError(
            f"{out} holds {len(state.strays)} *_naip.tif / *_lc.tif file(s) that no "
            f"{MANIFEST} of a prepare lists (such as {state.strays[0].name}): the tiles would "
            "mix with them; prepare into another folder"
        )
    if state.listed and not (overwrite or state.unfinished):
        pairs = sum(p.name.endswith(PAIR_SUFFIXES[0]) for p in state.listed)
        raise DataError(
            f"{out} already holds an earlier prepare's {pairs} tile pair(s) (its {MANIFEST}): "
            "a second set would mix with them (train reads every pair in a folder); write to "
            "another folder or pass --overwrite to replace them"
        )
    if out.is_dir() and any(out.iterdir()):  # written inside, moved in whole
        with output_errors(out):
            scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}prepare-", dir=out))
            os.chmod(scratch, _folder_mode())
        try:
            yield scratch
            with output_errors(out):
                _replace_set(scratch, out, replaced)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
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


def _replace_set(scratch: Path, out: Path, replaced: list[Path]) -> None:
    """Moves the new set's files into ``out``, then removes the replaced ones not overwritten.

    ``out`` is marked unfinished while its files change: a reader never takes a mix, and a
    rerun (the marker found) replaces whatever set is there.
    """
    move_set_in(scratch, out, replaced, "landcover data prepare is replacing this folder's pairs")
