"""Atomic file writes: write to a temporary name in the same folder, then rename."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from landcover.redaction import redact


def default_file_mode() -> int:
    """The mode a new file gets under the current umask (``mkstemp`` files are 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def make_temp_beside(path: Path) -> Path:
    """Creates an empty hidden temporary file beside ``path``, with the umask's mode.

    Args:
        path: The final file; its folder is created if needed.

    Returns:
        The temporary file (``.{name}.XXXX.tmp``), to be renamed over ``path``.

    Raises:
        OutputError: If the folder is read-only, not writable or full.
    """
    from landcover.diskerrors import output_errors

    with output_errors(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, default_file_mode())
        os.close(fd)
    return Path(tmp)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` so that readers never see a partial file.

    The bytes go to a hidden temporary file in the destination folder, are flushed to disk, and
    the file is then renamed over ``path`` (an atomic replace on POSIX file systems).

    Args:
        path: Destination file; its folder is created if needed.
        data: The content.

    Raises:
        OutputError: If the folder is read-only, not writable or full (nothing is left
            under ``path``'s name or the temporary one).
    """
    path = Path(path)
    atomic_write_set(path.parent, {path.name: data})


def atomic_write_set(folder: str | Path, files: Mapping[str, bytes]) -> None:
    """Writes several files into a folder as one set: all new, or (on failure) all as before.

    Every file goes to a hidden temporary name first, flushed to disk; only when all are
    written are they renamed into place (renames need no room). Outputs that describe one
    result together (metrics and the confusion matrix beside them) never mix two runs.

    Args:
        folder: The destination folder (created if needed).
        files: File names in ``folder`` and their contents.

    Raises:
        OutputError: If the folder is read-only, not writable or full (no file of the set
            is replaced, no temporary is left).
    """
    from landcover.diskerrors import output_errors

    folder = Path(folder)
    staged: list[tuple[Path, Path]] = []
    try:
        for name, data in files.items():
            path = folder / name
            tmp = make_temp_beside(path)
            staged.append((tmp, path))
            with output_errors(folder, len(data)), open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Writes a text record atomically, with every credential redacted.

    Every text file landcover writes (configurations, records, job files) goes through here or
    :func:`landcover.storage.io.write_text`, so no secret reaches a file.

    Args:
        path: Destination file; its folder is created if needed.
        text: The content.
    """
    atomic_write_bytes(path, redact(text).encode())


SCRATCH_PREFIX = ".landcover-tmp-"
"""Name prefix of the scratch folders a map's writing uses beside its destination."""


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Deletes temporary files (and scratch folders) left by interrupted writes in ``folder``.

    Args:
        folder: The folder to clean (missing folders are fine).

    Returns:
        The files and folders removed.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    stale = [p for p in folder.glob(".*.tmp") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    for scratch in folder.glob(f"{SCRATCH_PREFIX}*"):
        if scratch.is_dir():
            shutil.rmtree(scratch, ignore_errors=True)
            stale.append(scratch)
    return stale


INCOMPLETE_MARKER = ".landcover-prepare-incomplete"
"""The file that marks a data folder whose set ``data prepare`` or ``data synth`` is writing or
replacing (every reader of a data folder refuses it: :func:`landcover.data.pairs.discover_pairs`)."""


def move_set_in(scratch: Path, out: Path, replaced: list[Path], why: str | None = None) -> None:
    """Moves a finished set's files from a scratch folder into ``out``, replacing a set.

    Then the replaced set's files that no new file took the place of are removed.

    Args:
        scratch: The new set, its folders as they go into ``out`` (on ``out``'s file system:
            each file is one rename).
        out: The destination folder.
        replaced: The earlier set's files in ``out``.
        why: With it, ``out`` holds :data:`INCOMPLETE_MARKER` (this text) while its files
            change, so no reader takes a mix of the two sets (after a Ctrl-C too).
    """
    marker = out / INCOMPLETE_MARKER
    if why is not None:
        marker.write_text(why + "\n")
    moved = set()
    for path in sorted(scratch.rglob("*")):
        if path.is_file():
            target = out / path.relative_to(scratch)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            moved.add(target)
    for path in replaced:
        if path not in moved:
            path.unlink(missing_ok=True)
    if why is not None:
        marker.unlink()
