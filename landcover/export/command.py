"""``landcover export``: the model file, ``model.json`` and ``model.stac.json``, all or none.

The files are written into a scratch folder beside ``--out`` and moved into it only once the
export has been checked (:mod:`.artifacts`): an architecture that cannot export, or a Ctrl-C
before then, leaves nothing, and a previous export in ``--out`` stays as it was.

An export into a folder that holds a previous one replaces it, as a user who names the same
``--out`` again expects: the new ``model.json`` describes the new model file only, so a model
file of the other format left beside it would be described by nothing (``predict --model``
paired a stale ``model.onnx`` with the new metadata: wrong maps, or every tile failing) and is
removed. Refusing instead would make every re-export in another format a two-step chore. The
files move in an order that never leaves metadata naming a missing file: the model file first
(the old ``model.json`` still describes the old model, and ``predict`` refuses a model file
whose sha256 is not the one its metadata records), then ``model.json``, ``model.stac.json``,
and last the other format's model file is removed. A Ctrl-C (SIGINT) in those few renames is
held until they are done, then raised: the command exits 130 with a whole export in place.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from landcover import storage
from landcover.diskerrors import check_output_folder
from landcover.errors import ConfigError
from landcover.export.artifacts import OPSET, embed_card, write_model
from landcover.export.describe import describe_model
from landcover.export.stacmlm import model_item
from landcover.fileio import atomic_write_text
from landcover.inference.exported import FORMATS, METADATA_NAME, STAC_NAME, file_sha256
from landcover.inference.loader import load_inference_model
from landcover.redaction import redact, redact_tree
from landcover.storage.urls import check_no_credentials

log = logging.getLogger("landcover")


@dataclass(frozen=True)
class Exported:
    """What ``landcover export`` wrote.

    Attributes:
        model: The model file.
        metadata: ``model.json``.
        stac_item: ``model.stac.json``.
        opset: The ONNX opset (``None`` for an exported program).
    """

    model: Path
    metadata: Path
    stac_item: Path
    opset: int | None


def export_model(checkpoint: str, fmt: str, out: str) -> Exported:
    """Exports a checkpoint's model (the weights it stores as ``model``: the moving average).

    Args:
        checkpoint: The checkpoint (a path or a blob URL).
        fmt: ``onnx`` or ``exported-program``.
        out: The folder to write into (local; made if missing).

    Returns:
        The files written.

    Raises:
        ConfigError: An unknown format, a remote ``out``, or a model that cannot export.
        OutputError: If ``out``'s folder cannot be made or written.
        CheckpointError: If the checkpoint cannot be loaded.
        StorageError: If a remote checkpoint cannot be read, or its URL carries a SAS token.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    check_no_credentials(checkpoint)  # a SAS token goes in the environment, not in a URL
    if storage.is_remote(out):
        raise ConfigError(f"--out {redact(out)}: export writes to a local folder")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {folder}: exists and is not a folder")
    im = load_inference_model(checkpoint, "cpu")  # a bad checkpoint: nothing made
    parent = folder.parent if str(folder.parent) else Path(".")
    check_output_folder(parent)  # made, and writable (the scratch folder goes there): one line
    model = im.config.model
    where = f"model.arch {model.arch!r} (encoder {model.encoder!r})"
    opset = OPSET if fmt == "onnx" else None
    meta = describe_model(im, fmt, opset, redact_tree(im.config.to_dict()))
    scratch = parent / f".{folder.name}.export-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()  # as the folder will be (the umask's mode), then renamed
    try:
        file = scratch / meta.model_file
        write_model(im.model, fmt, im.bands, im.config.data.patch_size, file, where)
        if opset:  # the card inside the file too, for a client given the .onnx alone
            names = [c.name for c in meta.classes]
            card = redact(meta.to_json())  # as every record we write
            embed_card(file, card, names, f"landcover {meta.architecture} land-cover model")
        meta = replace(meta, model_sha256=file_sha256(file), model_bytes=file.stat().st_size)
        atomic_write_text(scratch / METADATA_NAME, meta.to_json())  # redacted, as every record
        parameters = sum(p.numel() for p in im.model.parameters())
        version = _version("onnx") if opset else torch.__version__
        # every export of a best.pt is not one item: the weights' hash tells them apart
        item_id = f"{meta.source_checkpoint.rsplit('.', 1)[0]}-{meta.weights_sha256[:12]}"
        item = model_item(meta, item_id, version, parameters)
        atomic_write_text(scratch / STAC_NAME, json.dumps(item.to_dict(), indent=2) + "\n")
        with _sigint_held():
            _publish(scratch, folder, meta.model_file)
    finally:
        if scratch.exists():  # a failed export's, or the emptied one
            shutil.rmtree(scratch, ignore_errors=True)
    log.info(
        "exported %s (epoch %d) as %s%s to %s",
        checkpoint,
        im.epoch,
        fmt,
        f" (opset {opset})" if opset else "",
        folder / meta.model_file,
    )
    return Exported(folder / meta.model_file, folder / METADATA_NAME, folder / STAC_NAME, opset)


def _version(package: str) -> str:
    """An installed package's version."""
    from importlib.metadata import version

    return version(package)


def _publish(scratch: Path, folder: Path, model_file: str) -> None:
    """Moves the finished files into ``folder``: the whole scratch folder when there is none.

    Into an existing folder: the model file, its metadata, the STAC item, then the other
    format's model file removed (the order the module explains).
    """
    if not folder.exists():
        os.replace(scratch, folder)
        return
    for name in (model_file, METADATA_NAME, STAC_NAME):
        os.replace(scratch / name, folder / name)
    for stale in FORMATS.values():
        if stale != model_file and ((folder / stale).is_file() or (folder / stale).is_symlink()):
            (folder / stale).unlink()
            log.info(
                "removed %s: a previous export's, which %s no longer describes",
                stale,
                METADATA_NAME,
            )


@contextmanager
def _sigint_held() -> Iterator[None]:
    """Holds SIGINT inside (in the main thread): raised as its handler would on leaving.

    Yields:
        Nothing; move the files inside.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous in (
        signal.SIG_IGN,
        None,  # set outside Python: it cannot be put back
    ):
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and previous in (signal.SIG_DFL, signal.default_int_handler):
            raise KeyboardInterrupt  # so the scratch folder's cleanup runs (SIG_DFL would not)
        if held:
            signal.raise_signal(signal.SIGINT)  # another handler's own way
