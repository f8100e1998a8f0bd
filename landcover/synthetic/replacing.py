"""A synthetic set written over an earlier one: the earlier set stays until the new one is whole.

``landcover data synth OUT --overwrite`` replaces the ``{prefix}_*`` pairs (or the shifted
world) already in ``OUT``. The new set is written into a scratch folder inside ``OUT`` first
(hidden: no folder listing takes it for data); only once it is complete are its files moved
into place (one rename each) and the earlier set's files it did not replace removed, the folder
marked unfinished meanwhile (:data:`~landcover.fileio.INCOMPLETE_MARKER`: no reader takes a mix
of the two sets; a rerun completes it). A failure or Ctrl-C while the tiles are drawn leaves
the earlier set as it was.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from landcover.fileio import SCRATCH_PREFIX, move_set_in


@contextmanager
def replacing(out: Path, earlier: list[Path]) -> Iterator[Path]:
    """The folder to write a new set into, moved over ``earlier`` when the block ends well.

    Args:
        out: The output folder (it exists).
        earlier: The earlier set's files in ``out`` (none: the set is written in ``out``).

    Yields:
        Where to write the new set: ``out`` itself, or a scratch folder inside it.
    """
    if not earlier:
        yield out
        return
    scratch = out / f"{SCRATCH_PREFIX}synth-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        yield scratch
        move_set_in(scratch, out, earlier, "landcover data synth is replacing this folder's set")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
