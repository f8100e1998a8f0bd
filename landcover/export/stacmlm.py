"""``model.stac.json``: the exported model as a STAC item with the Machine Learning Model extension.

The ``mlm`` extension (pystac's ``pystac.extensions.mlm``) is how a STAC catalogue describes
a geospatial model so that another tool can run it: its input (bands in order, the
``(batch, bands, height, width)`` float32 shape with ``-1`` where any size goes, and the
normalisation: for ``global`` statistics a ``processing`` value scaling with the per-band mean
and standard deviation on the 0..255 pixels, for ``per_tile`` a pre-processing function in
words), its output (logits of the same height and
width, one channel per class, the classes with their values and colours) and its framework.
The model file is the ``model`` asset (role ``mlm:model``, ``mlm:artifact_type``), the
metadata ``model.json`` the ``metadata`` asset. The item has no footprint (a model applies
anywhere): geometry null. Properties ``landcover:*`` carry what predict adds: the window, the
overlap and the training pixel size.
"""

from __future__ import annotations

from datetime import datetime, timezone

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


def value_scaling(meta: ModelMetadata) -> ValueScaling | None:
    """The global statistics as one ``processing`` value scaling (``None``: per tile).

    pystac's ``ValueScaling`` is one object per input, so the per-band z-score is written as
    a ``processing`` expression with the numbers (pixels 0..255).
    """
    norm = meta.normalization
    if norm.mode != "global":
        return None
    mean = ", ".join(f"{255.0 * m:.6g}" for m in norm.mean)
    std = ", ".join(f"{255.0 * s:.6g}" for s in norm.std)
    expression = f"(pixel - mean[band]) / std[band]; mean = [{mean}]; std = [{std}]"
    return ValueScaling.create(ValueScalingType.PROCESSING, format="text", expression=expression)


def model_item(
    meta: ModelMetadata, item_id: str, framework_version: str, parameters: int
) -> pystac.Item:
    """The STAC item describing an exported model.

    Args:
        meta: The model's metadata.
        item_id: The item's id.
        framework_version: The version of ``FRAMEWORKS[meta.runtime]`` that wrote it (the
            ONNX opset for ONNX).
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
            "landcover:window": meta.window,
            "landcover:overlap": meta.overlap,
            "landcover:side_multiple": meta.side_multiple,
            "landcover:pixel_size_m": meta.pixel_size_m,
            "landcover:normalize": meta.normalization.mode,
            "landcover:weights_sha256": meta.weights_sha256,
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
        value_scaling=value_scaling(meta),
        resize_type=None,
        pre_processing_function=preprocess,
    )
    output = ModelOutput.create(
        name=meta.output_name,
        tasks=[TaskType.SEMANTIC_SEGMENTATION],
        result=ResultStructure.create(
            [-1, classes, -1, -1], ["batch", "channel", "height", "width"], "float32"
        ),
        description="logits; softmax over the channel axis gives class probabilities",
        classes=[
            Classification.create(c.index, name=c.name, color_hint=c.color.lstrip("#").upper())
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
        pretrained=False,
        batch_size_suggestion=meta.batch_size,
    )
    asset = pystac.Asset(
        f"./{meta.model_file}",
        title="The model",
        media_type=MEDIA_TYPES[meta.runtime],
        roles=["mlm:model"],
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
