"""Writing a model file (ONNX, or a torch exported program) and checking it against torch.

Both formats go through ``torch.export``: the graph is traced once on an example batch, with
the batch and both sides dynamic (sides a multiple of
:data:`~landcover.inference.exported.SIDE_MULTIPLE`). ONNX uses torch's exporter built on it
(``torch.onnx.export(..., dynamo=True)``, which needs ``onnx`` and ``onnxscript``) at opset
:data:`OPSET`, one file (weights inside). A model that traces but gives other logits than
torch's at another size (an architecture with a size baked in, PSPNet's pooling grid) is
refused too: every exported file is run once on a probe of another batch and size and
compared with the torch model (:data:`TOLERANCE`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from landcover.errors import ConfigError, first_line
from landcover.inference.exported import INPUT_NAME, OUTPUT_NAME, SIDE_MULTIPLE
from landcover.inference.sliding import MAX_WINDOW

OPSET = 18
"""The ONNX opset written: torch's exporter's own (ONNX Runtime 1.14 and later run it)."""
TOLERANCE = 1e-3
"""Largest difference of the exported model's logits from torch's on the probe, relative to
the logits' largest magnitude (float32 kernels differ in the last bits: about 1e-6 here)."""


def dynamic_shapes() -> tuple[dict[int, object]]:
    """The exported input's dynamic axes: batch, and the sides in steps of the multiple.

    Given by position, not by the forward's argument name (smp's ``x``, a ``Sequential``'s
    ``input``: a registered architecture may name it anything).
    """
    from torch.export import Dim

    side = MAX_WINDOW // SIDE_MULTIPLE
    return (
        {
            0: Dim("batch", min=1),
            2: SIDE_MULTIPLE * Dim("height", min=1, max=side),
            3: SIDE_MULTIPLE * Dim("width", min=1, max=side),
        },
    )


def write_model(model: nn.Module, fmt: str, bands: int, patch: int, path: Path, where: str) -> None:
    """Exports a model and checks the file on a probe of another batch and size.

    Args:
        model: The torch model, in eval mode on the CPU.
        fmt: ``onnx`` or ``exported-program``.
        bands: Input bands.
        patch: The training patch size (the example's side, a multiple of 32).
        path: The file to write.
        where: The model's description for messages (``model.arch 'unet' ...``).

    Raises:
        ConfigError: The model cannot be exported, or its export computes something else.
    """
    if fmt == "onnx":
        check_onnx_installed()
    example = torch.zeros(2, bands, patch, patch)
    probe, expected = probe_logits(model, bands, patch, where)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if fmt == "onnx":
                program = torch.onnx.export(
                    model,
                    (example,),
                    dynamo=True,
                    dynamic_shapes=dynamic_shapes(),
                    input_names=[INPUT_NAME],
                    output_names=[OUTPUT_NAME],
                    opset_version=OPSET,
                    external_data=False,
                    verbose=False,
                )
                program.save(str(path))
            else:
                program = torch.export.export(model, (example,), dynamic_shapes=dynamic_shapes())
                torch.export.save(program, str(path))
    except Exception as exc:  # torch.export and the exporter raise many types
        raise ConfigError(f"{where} cannot be exported as {fmt}: {first_line(exc, 240)}") from None
    check_model(model, fmt, probe, expected, path, where)


def check_onnx_installed() -> None:
    """Refuses an ONNX export before any work when its packages are missing.

    Raises:
        ConfigError: onnx, onnxscript or onnxruntime is not installed.
    """
    import importlib.util

    missing = [m for m in ("onnx", "onnxscript", "onnxruntime") if not importlib.util.find_spec(m)]
    if missing:
        raise ConfigError(
            f"--format onnx needs {', '.join(missing)}: pip install 'landcover[onnx]'"
        )


def probe_logits(
    model: nn.Module, bands: int, patch: int, where: str
) -> tuple[torch.Tensor, np.ndarray]:
    """A probe batch of another batch size and sides than the example's, and torch's logits.

    Raises:
        ConfigError: The model runs at one input size only (DPT's ViT).
    """
    generator = torch.Generator().manual_seed(0)
    side = patch + SIDE_MULTIPLE
    probe = torch.randn(3, bands, side, side + SIDE_MULTIPLE, generator=generator)
    try:
        with torch.no_grad():
            expected = model(probe).numpy()
    except Exception as exc:  # the architecture's own check of the input size
        raise ConfigError(
            f"{where} runs at one input size only, not at another input size "
            f"({first_line(exc, 200)}): it cannot be exported with dynamic sides"
        ) from None
    return probe, expected


def check_model(
    model: nn.Module, fmt: str, probe: torch.Tensor, expected: np.ndarray, path: Path, where: str
) -> None:
    """Runs the exported file on the probe batch; refuses logits that differ from torch's.

    Raises:
        ConfigError: The exported model fails on the probe or differs from torch.
    """
    try:
        if fmt == "onnx":
            import onnxruntime

            session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            got = session.run(None, {INPUT_NAME: probe.numpy()})[0]
        else:
            with torch.no_grad():
                got = torch.export.load(str(path)).module()(probe).numpy()
    except Exception as exc:  # the runtime's own types
        raise ConfigError(
            f"{where} exports as {fmt} but fails at another input size than it was traced "
            f"at, a size being fixed inside the model ({first_line(exc, 200)})"
        ) from None
    scale = max(1.0, float(np.abs(expected).max()))
    worst = float(np.abs(got - expected).max()) if got.shape == expected.shape else float("inf")
    if not worst <= TOLERANCE * scale:
        raise ConfigError(
            f"{where} exports as {fmt} but computes other logits at another input size than "
            f"it was traced at (off by {worst:.3g}, logits up to {scale:.3g}): a size is fixed "
            "inside the model"
        )


CARD_KEY = "landcover:model.json"
"""The ONNX metadata key of the model card (``model.json`` without the file's own size and hash)."""


def embed_card(path: Path, card: str, classes: list[str], description: str) -> None:
    """Writes the model card into an ONNX file's ``metadata_props``, and its description.

    A client given the ``.onnx`` alone (ONNX Runtime's ``get_modelmeta()``, a GIS plugin)
    then has the classes, bands, normalisation and pixel size. The graph is not changed.

    Args:
        path: The ONNX file, rewritten in place (before its hash is taken).
        card: ``model.json``'s text, its ``model_sha256`` and ``model_bytes`` empty (they
            describe this very file).
        classes: The class names, by output channel (``class_names``, as GIS plugins read
            them: ``{"0": "water", ...}``).
        description: One line for the model's ``doc_string``.
    """
    import json

    import onnx

    model = onnx.load(str(path))
    del model.metadata_props[:]
    names = json.dumps({str(i): name for i, name in enumerate(classes)})
    for key, value in ((CARD_KEY, card), ("class_names", names)):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    model.doc_string = description
    onnx.save(model, str(path))
