"""``model.stac.json``: the exported model as a STAC item with the Machine Learning Model extension.

The ``mlm`` extension (pystac's ``pystac.extensions.mlm``) is how a STAC catalogue describes
a geospatial model so that another tool can run it: its input (bands in order, the
``(batch, bands, height, width)`` float32 shape with ``-1`` where any size goes, and the
normalisation: for ``global`` statistics one ``z-score`` value scaling per band on the 0..255
pixels, for ``per_tile`` a pre-processing function in words; the bands are named in the
item's STAC 1.1 ``bands`` too, as the extension's schema requires), its output (logits of the same height and
width, one channel per class, the classes with their values and colours) and its framework.
The model file is the ``model`` asset (role ``mlm:model``, ``mlm:artifact_type``), the
metadata ``model.json`` the ``metadata`` asset. The item has no footprint (a model applies
anywhere): geometry null. Properties ``landcover:*`` carry what predict adds: the window, the
overlap and the training pixel size.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pystac
from pystac.extensions.classification import Classification
from pystac.extensions.mlm import (
    AssetGeneralMLMExtension,
    InputStructure,
    MLMExtension,
    ModelInput,
    ModelOutput,
    ProcessingExpression,
    ResultStructure,
    TaskType,
    ValueScaling,
    ValueScalingType,
)

from landcover.inference.exported import METADATA_NAME, ModelMetadata

ARTIFACT_TYPES = {"onnx": "onnx", "exported-program": "torch.export.save"}
MEDIA_TYPES = {
    "onnx": "application/octet-stream; application=onnx",
    "exported-program": "application/octet-stream; application=pytorch",
}
FRAMEWORKS = {"onnx": "ONNX", "exported-program": "PyTorch"}


def value_scaling(meta: ModelMetadata) -> list[dict[str, Any]] | None:
    """The global statistics as one ``z-score`` per band on the 0..255 pixels (``None``: per tile).

    The extension's schema takes a list (one per band, in the input's order); pystac's
    ``ModelInput.value_scaling`` holds one object, so the list is written into the input's
    properties, each entry made and checked by pystac's ``ValueScaling``.
    """
    norm = meta.normalization
    if norm.mode != "global":
        return None
    scalings = []
    for mean, std in zip(norm.mean, norm.std, strict=True):
        scaling = ValueScaling.create(ValueScalingType.Z_SCORE, mean=255 * mean, stddev=255 * std)
        ValueScaling.validate_property_dict(ValueScalingType.Z_SCORE, scaling.to_dict())
        scalings.append(scaling.to_dict())
    return scalings


def model_item(
    meta: ModelMetadata, item_id: str, framework_version: str, parameters: int
) -> pystac.Item:
    """The STAC item describing an exported model.

    Args:
        meta: The model's metadata.
        item_id: The item's id.
        framework_version: The version (semantic, as the schema wants) of the framework that
            wrote it: the onnx package's for ONNX (the opset is ``landcover:onnx_opset``),
            torch's for an exported program.
        parameters: The model's parameter count.

    Returns:
        The item, its hrefs relative to the folder it is written in.
    """
    item = pystac.Item(
        item_id,
        geometry=None,
        bbox=None,
        datetime=datetime.now(timezone.utc).replace(microsecond=0),
        properties={
            "description": f"landcover {meta.architecture} land-cover segmentation model",
            "bands": [{"name": band} for band in meta.bands],  # STAC 1.1's, as mlm:input's
            "landcover:window": meta.window,
            "landcover:overlap": meta.overlap,
            "landcover:side_multiple": meta.side_multiple,
            "landcover:pixel_size_m": meta.pixel_size_m,
            "landcover:normalize": meta.normalization.mode,
            "landcover:weights_sha256": meta.weights_sha256,
            "landcover:onnx_opset": meta.opset,
        },
    )
    bands, classes = len(meta.bands), len(meta.classes)
    preprocess = None
    if meta.normalization.mode != "global":
        preprocess = ProcessingExpression.create("text", meta.normalization.recipe)
    model_input = ModelInput.create(
        name=meta.input_name,
        bands=list(meta.bands),
        input=InputStructure.create(
            [-1, bands, -1, -1], ["batch", "bands", "height", "width"], "float32"
        ),
        description=f"uint8 pixels normalised per band; sides a multiple of {meta.side_multiple}",
        value_scaling=None,
        resize_type=None,
        pre_processing_function=preprocess,
    )
    model_input.properties["value_scaling"] = value_scaling(meta)
    output = ModelOutput.create(
        name=meta.output_name,
        tasks=[TaskType.SEMANTIC_SEGMENTATION],
        result=ResultStructure.create(
            [-1, classes, -1, -1], ["batch", "channel", "height", "width"], "float32"
        ),
        description="logits; softmax over the channel axis gives class probabilities",
        classes=[  # a description too: the classification schema the MLM one refers to
            # (v1.1.0) requires it
            Classification.create(
                c.index,
                name=c.name,
                description=c.name.replace("_", " "),
                color_hint=c.color.lstrip("#").upper(),
            )
            for c in meta.classes
        ],
        post_processing_function=ProcessingExpression.create(
            "text", "softmax over channel; argmax"
        ),
    )
    MLMExtension.ext(item, add_if_missing=True).apply(
        name=f"landcover-{meta.architecture.replace('/', '-').lower()}",
        architecture=meta.architecture.split("/")[0],
        tasks=[TaskType.SEMANTIC_SEGMENTATION],
        input=[model_input],
        output=[output],
        framework=FRAMEWORKS[meta.runtime],
        framework_version=framework_version,
        total_parameters=parameters,
        batch_size_suggestion=meta.batch_size,
    )
    asset = pystac.Asset(
        f"./{meta.model_file}",
        title="The model",
        media_type=MEDIA_TYPES[meta.runtime],
        roles=["mlm:model"],
        # STAC 1.1 allows the item's bands only when an asset has them (MLM's examples)
        extra_fields={"bands": [{"name": band} for band in meta.bands]},
    )
    item.add_asset("model", asset)
    AssetGeneralMLMExtension.ext(asset, add_if_missing=True).apply(
        artifact_type=ARTIFACT_TYPES[meta.runtime]
    )
    item.add_asset(
        "metadata",
        pystac.Asset(
            f"./{METADATA_NAME}",
            title="landcover's description of the model",
            media_type=pystac.MediaType.JSON,
            roles=["metadata"],
        ),
    )
    return item
