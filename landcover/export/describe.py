"""What an exported model needs around it: its :class:`~landcover.inference.exported.ModelMetadata`."""

from __future__ import annotations

from typing import Any

import torch

from landcover import storage
from landcover.config import ARCHITECTURES
from landcover.inference.exported import (
    FORMATS,
    INPUT_NAME,
    OUTPUT_NAME,
    SIDE_MULTIPLE,
    ClassInfo,
    ModelMetadata,
    Normalization,
)
from landcover.inference.loader import InferenceModel
from landcover.inference.sliding import resolve_geometry
from landcover.mapping.outputs import weights_sha256
from landcover.redaction import redact

GLOBAL_RECIPE = (
    "x = (pixel / 255 - mean[band]) / std[band], with this model's mean and std (the training "
    "data's band statistics)"
)
PER_TILE_RECIPE = (
    "x = (pixel / 255 - mean[band]) / std[band], with the tile's own mean and standard "
    "deviation of each band over its valid pixels (not no-data), on the 0..1 scale, the "
    "standard deviation at least 1/255; a tile without a valid pixel takes this model's "
    "mean and std"
)


PLACES = (
    ("data", "root"),
    ("data", "manifest"),
    ("data", "val_root"),
    ("data", "cache_dir"),
    ("model", "weights"),
    ("run", "out"),
)
"""Settings that name where the training run's files were: the card keeps their names alone."""

HOSTS = (("run", "rdzv_endpoint"), ("run", "local_addr"))
"""Settings that name the training cluster's machines: the card drops them."""


def portable_config(config: dict[str, Any]) -> dict[str, Any]:
    """A training configuration as a model card carries it: no host path, no cluster address.

    The model travels (a registry, a GIS plugin, another team): where the training data, the
    run folder or the initial weights lay on the training machines is not its to tell, and
    nothing that loads it reads them.

    Args:
        config: The configuration as plain data (redacted).

    Returns:
        A copy, :data:`PLACES` cut to their last name (``/home/alice/naip`` -> ``naip``),
        :data:`HOSTS` empty.
    """
    copied = {
        key: dict(value) if isinstance(value, dict) else value for key, value in config.items()
    }
    for section, key in PLACES:
        value = copied.get(section, {}).get(key)
        if isinstance(value, str):
            copied[section][key] = storage.name(value) or value
    for section, key in HOSTS:
        if section in copied and key in copied[section]:
            copied[section][key] = None
    return copied


def describe_model(
    im: InferenceModel, fmt: str, opset: int | None, state_config: dict[str, Any]
) -> ModelMetadata:
    """The metadata of a checkpoint's model exported as ``fmt``.

    Args:
        im: The checkpoint's model, loaded (its weights, config and epoch).
        fmt: ``onnx`` or ``exported-program``.
        opset: The ONNX opset (``None`` for an exported program).
        state_config: The configuration as plain data (redacted).

    Returns:
        The metadata.
    """
    data, model = im.config.data, im.config.model
    window, overlap, batch = resolve_geometry(data.patch_size)
    mean, std = list(data.mean or []), list(data.std or [])
    per_tile = data.normalize == "per_tile"
    classes = [
        ClassInfo(i, spec.name, list(spec.codes), spec.color)
        for i, spec in enumerate(im.mapping.classes)
    ]
    return ModelMetadata(
        model_file=FORMATS[fmt],
        runtime=fmt,
        opset=opset,
        input_name=INPUT_NAME,
        output_name=OUTPUT_NAME,
        side_multiple=SIDE_MULTIPLE,
        bands=list(data.bands),
        normalization=Normalization(
            "per_tile" if per_tile else "global",
            [float(m) for m in mean],
            [float(s) for s in std],
            PER_TILE_RECIPE if per_tile else GLOBAL_RECIPE,
        ),
        classes=classes,
        window=window,
        overlap=overlap,
        batch_size=batch,
        patch_size=data.patch_size,
        pixel_size_m=im.pixel_size_m,
        epoch=im.epoch,
        architecture=(
            f"{ARCHITECTURES[model.arch]}/{model.encoder}"
            if model.arch in ARCHITECTURES
            else model.arch  # a registered architecture (landcover.archregistry)
        ),
        weights_sha256=weights_sha256(im.model),
        source_checkpoint=redact(storage.name(im.checkpoint)),  # the item's id too
        exporter=f"torch {torch.__version__} ({'torch.onnx, dynamo' if opset else 'torch.export'})",
        config=portable_config(state_config),
    )
