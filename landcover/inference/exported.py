"""An exported model's description: the metadata file ``landcover export`` writes beside it.

An exported model (``model.onnx``, or ``model.pt2`` for ``torch.export``) takes normalised
``(batch, bands, height, width)`` float32 input, sides a multiple of :data:`SIDE_MULTIPLE`
(the caller pads), and gives ``(batch, classes, height, width)`` logits; the softmax over the
classes gives the probabilities. Everything else a map needs (band order, the normalisation,
the classes with their label codes and colours, the window and overlap ``predict`` uses) is in
``model.json`` beside it (:class:`ModelMetadata`), which ``landcover predict --model`` reads as
it reads a checkpoint, and which any other tool can read as plain JSON.

``model.json`` records the model file's size and sha256 (:attr:`ModelMetadata.model_sha256`),
and :func:`read_metadata` refuses a model file that is not the one it describes: a
``model.onnx`` left by an earlier export beside the ``model.json`` of a later one (another
checkpoint, another format) ran the earlier weights with the later classes and bands, wrong
maps or a failure on every tile. Hashing costs about 0.7 ms a MB (a 50 MB model: 35 ms,
a seventh of ONNX Runtime's load of it), little beside loading the model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from landcover.config import Config, config_from_dict
from landcover.errors import CheckpointError, first_line

FORMAT = "landcover-exported-model"
FORMAT_VERSION = 1
SIDE_MULTIPLE = 32
"""An exported model's input sides are a multiple of this: the total downsampling of the
deepest encoder (predict's windows and padding are multiples of it too)."""
INPUT_NAME = "image"
OUTPUT_NAME = "logits"
FORMATS = {"onnx": "model.onnx", "exported-program": "model.pt2"}
"""``landcover export --format``: the model file each writes."""
METADATA_NAME = "model.json"
STAC_NAME = "model.stac.json"


@dataclass
class ClassInfo:
    """One output class.

    Attributes:
        index: Its channel in the logits and its value in the class map.
        name: Short name.
        codes: The label codes it was trained from.
        color: Its colour in the class map, ``#rrggbb``.
    """

    index: int
    name: str
    codes: list[int]
    color: str


@dataclass
class Normalization:
    """How uint8 pixels become model input: ``(pixel / 255 - mean) / std`` per band.

    Attributes:
        mode: ``global`` (``mean``/``std`` below, the training data's) or ``per_tile`` (each
            tile's own mean and standard deviation per band over its valid pixels, on the
            0..1 scale, the standard deviation at least 1/255; ``mean``/``std`` below are
            then the fallback for a tile without a valid pixel).
        mean: Per-band mean on the 0..1 scale.
        std: Per-band standard deviation on the 0..1 scale.
        recipe: The same in words.
    """

    mode: str
    mean: list[float]
    std: list[float]
    recipe: str


@dataclass
class ModelMetadata:
    """What ``model.json`` holds (see the module).

    Attributes:
        model_file: The model's file name, beside the metadata.
        runtime: ``onnx`` or ``exported-program``.
        opset: The ONNX opset (``None`` for an exported program).
        input_name: The model's input.
        output_name: The model's output.
        side_multiple: Input sides must be a multiple of this.
        bands: Band names, in the model's input order.
        normalization: How pixels become input.
        classes: The output classes, in channel order.
        window: The window ``predict`` uses by default, px.
        overlap: The overlap of its windows, px (blended linearly over it).
        batch_size: Windows per forward pass ``predict`` uses by default.
        patch_size: The training patch size, px.
        pixel_size_m: The training pixel size in metres (``None``: unknown).
        epoch: Epochs the model was trained for.
        architecture: smp architecture and encoder, e.g. ``unet/resnet34``.
        weights_sha256: sha256 of the checkpoint's weights, as ``predict`` fingerprints it.
        source_checkpoint: The checkpoint's file name.
        exporter: Who wrote the file (torch's version, the exporter).
        config: The training run's resolved configuration (redacted).
        model_sha256: sha256 of the model file's bytes (``None`` in metadata written before
            it was recorded).
        model_bytes: The model file's size in bytes (``None`` likewise).
        format: :data:`FORMAT`.
        format_version: :data:`FORMAT_VERSION`.
    """

    model_file: str
    runtime: str
    opset: int | None
    input_name: str
    output_name: str
    side_multiple: int
    bands: list[str]
    normalization: Normalization
    classes: list[ClassInfo]
    window: int
    overlap: int
    batch_size: int
    patch_size: int
    pixel_size_m: float | None
    epoch: int
    architecture: str
    weights_sha256: str
    source_checkpoint: str
    exporter: str
    config: dict[str, Any] = field(default_factory=dict)
    model_sha256: str | None = None
    model_bytes: int | None = None
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        """The metadata as indented JSON text."""
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> ModelMetadata:
        """Reads the metadata from parsed JSON.

        Args:
            data: The parsed file.
            source: Its path, for messages.

        Returns:
            The metadata.

        Raises:
            CheckpointError: If it is not a landcover model's metadata, or a newer one.
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CheckpointError(f"{source}: not a landcover model's metadata (no '{FORMAT}')")
        if int(data.get("format_version", 0)) > FORMAT_VERSION:
            raise CheckpointError(f"{source}: metadata newer than this landcover; upgrade it")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        try:
            values["normalization"] = Normalization(**values["normalization"])
            values["classes"] = [ClassInfo(**c) for c in values["classes"]]
            return cls(**values)
        except (KeyError, TypeError) as exc:
            raise CheckpointError(f"{source}: incomplete metadata ({first_line(exc)})") from None

    def resolved_config(self, source: str) -> Config:
        """The training configuration, as a checkpoint's would be read.

        Args:
            source: The metadata's path, for messages.

        Returns:
            The configuration.
        """
        return config_from_dict(self.config, source=f"{source}: config", any_arch=True)


def metadata_path(model: str | Path) -> Path:
    """Where a model file's metadata is: ``model.json`` in its folder."""
    return Path(model).with_name(METADATA_NAME)


def is_exported_model(path: str | Path) -> bool:
    """Whether a model path names an exported ONNX model (rather than a checkpoint)."""
    return str(path).lower().endswith(".onnx")


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB pieces.

    Args:
        path: The file.

    Returns:
        The digest in hex.

    Raises:
        OSError: If the file cannot be read.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(1 << 20):
            digest.update(piece)
    return digest.hexdigest()


def read_metadata(model: str | Path) -> ModelMetadata:
    """Reads the metadata beside an exported model, and checks the model is the one it describes.

    Args:
        model: The model file (``model.onnx``).

    Returns:
        The metadata.

    Raises:
        CheckpointError: If the model or its metadata is missing or unreadable, or the model
            file is not the one the metadata describes.
    """
    path = metadata_path(model)
    if not Path(model).is_file():
        raise CheckpointError(f"{model}: model not found")
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(
            f"{model}: its metadata {path.name} is not beside it (landcover export writes both)"
        ) from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable metadata ({first_line(exc)})") from None
    meta = ModelMetadata.from_dict(data, str(path))
    check_model_file(Path(model), meta, path)
    return meta


def check_model_file(model: Path, meta: ModelMetadata, source: Path) -> None:
    """Refuses an ONNX model file that is not the one its metadata describes.

    The runtime must be ONNX, then the size and sha256 recorded must match (the file may
    have been renamed); metadata that records no sha256 (written before it was) names the
    file, and the name must match.

    Args:
        model: The model file given.
        meta: The metadata beside it.
        source: The metadata's path, for messages.

    Raises:
        CheckpointError: The file is another export's (or was changed since).
    """
    why = ""
    if meta.runtime != "onnx":
        why = f"runtime {meta.runtime}"
    elif meta.model_sha256 is None:
        why = "" if model.name == meta.model_file else f"not {model.name}"
    elif meta.model_bytes is not None and model.stat().st_size != meta.model_bytes:
        why = f"{meta.model_bytes} bytes, this file {model.stat().st_size}"
    elif file_sha256(model) != meta.model_sha256:
        why = "another sha256"
    if why:
        raise CheckpointError(
            f"{model} is not the model {source} describes ({meta.model_file} of "
            f"{meta.source_checkpoint}, {why}): a file of another export; export the "
            f"checkpoint again with landcover export CHECKPOINT --out {model.parent}"
        )
