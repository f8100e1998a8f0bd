"""``landcover export``: the model file, ``model.json`` and ``model.stac.json``, all or none.

The files are written into a scratch folder beside ``--out`` and moved into it only once the
export has been checked (:mod:`.artifacts`): an architecture that cannot export leaves
nothing, and a reader of ``--out`` never sees a model without its metadata.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch

from landcover import storage
from landcover.errors import ConfigError
from landcover.export.artifacts import OPSET, write_model
from landcover.export.describe import describe_model
from landcover.export.stacmlm import model_item
from landcover.inference.exported import FORMATS, METADATA_NAME, STAC_NAME
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
    im = load_inference_model(checkpoint, "cpu")
    model = im.config.model
    where = f"model.arch {model.arch!r} (encoder {model.encoder!r})"
    opset = OPSET if fmt == "onnx" else None
    meta = describe_model(im, fmt, opset, redact_tree(im.config.to_dict()))
    parent = folder.parent if str(folder.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    scratch = parent / f".{folder.name}.export-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()  # as the folder will be (the umask's mode), then renamed
    try:
        write_model(
            im.model, fmt, im.bands, im.config.data.patch_size, scratch / meta.model_file, where
        )
        (scratch / METADATA_NAME).write_text(meta.to_json())
        parameters = sum(p.numel() for p in im.model.parameters())
        version = _version("onnx") if opset else torch.__version__
        item = model_item(meta, storage.name(checkpoint).rsplit(".", 1)[0], version, parameters)
        (scratch / STAC_NAME).write_text(json.dumps(item.to_dict(), indent=2) + "\n")
        _publish(scratch, folder, [METADATA_NAME, STAC_NAME, meta.model_file])
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


def _publish(scratch: Path, folder: Path, names: list[str]) -> None:
    """Moves the finished files into ``folder``: the whole scratch folder when there is none."""
    if not folder.exists():
        os.replace(scratch, folder)
        return
    for name in names:  # the model last: its metadata is there before it
        os.replace(scratch / name, folder / name)
