"""Options and checks that several commands share (typer annotations)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

ConfigFileOption = Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file.")]
ClusterFileOption = Annotated[
    Path, typer.Option(help="cluster.json: VM size, node count, priority, region.")
]
GpuWorkersOption = Annotated[int, typer.Option(min=1, help="Worker processes, one per GPU.")]
ClassesOption = Annotated[str, typer.Option(help="Class preset: chesapeake7, cvpr4, tutorial5.")]
BandsOption = Annotated[int, typer.Option(min=1, help="Expected image bands.")]
ImageSuffixOption = Annotated[str, typer.Option(help="Image file-name suffix.")]
LabelSuffixOption = Annotated[str, typer.Option(help="Label file-name suffix.")]
ConcurrencyOption = Annotated[
    int,
    typer.Option(
        "--concurrency",
        "-j",
        min=1,
        help="Transfers at once (files, or blocks of a few large files).",
    ),
]


def class_mapping(classes: str) -> Any:
    """The class mapping of a ``--classes`` preset (a usage error when unknown)."""
    from landcover.classes import resolve_mapping

    try:
        return resolve_mapping(classes)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--classes") from None


# options of the parallel layer, shared by train and predict
Nnodes = Annotated[int | None, typer.Option(help="Nodes in the job (one agent each).")]
NodeRank = Annotated[
    int | None, typer.Option(help="This node's rank; node 0 hosts the rendezvous.")
]
WorkersPerNode = Annotated[int | None, typer.Option(help="Workers on each node.")]
RdzvEndpoint = Annotated[
    str | None, typer.Option(help="HOST:PORT of the c10d rendezvous (multi-node).")
]
RdzvId = Annotated[str | None, typer.Option(help="Rendezvous id (default: from --out).")]

# options of the commands that run a model over tiles (predict and evaluate)
OutFolderOption = Annotated[str, typer.Option(help="Output folder: a path or a blob URL.")]
OverlapOption = Annotated[int | None, typer.Option(help="Window overlap in px (default: patch/4).")]
WindowOption = Annotated[
    int | None,
    typer.Option(help="Window size in px (default: 4 training patches, at most 1024)."),
]
BatchSizeOption = Annotated[
    int | None,
    typer.Option(min=1, help="Windows per forward pass (default: 16 x 256^2 px' worth)."),
]
DeviceOption = Annotated[str, typer.Option(help="auto, cpu or cuda.")]

TtaOption = Annotated[
    str,
    typer.Option(
        help="Test-time augmentation: average the probabilities of D4 transforms: none, "
        "d4 (or 8: all), rotations (or 4), flips, 2 (identity + horizontal flip), or "
        "names, e.g. identity,rot90,hflip."
    ),
]

ResolutionOption = Annotated[
    str,
    typer.Option(
        help="Pixel size the model sees: train (the checkpoint's training pixel size; "
        "native for checkpoints that do not record it), native (each tile as it is), or "
        "metres (e.g. 1). Tiles are resampled to it, predicted, and the maps put back on "
        "each tile's own grid."
    ),
]


def check_resolution(value: str) -> None:
    """A bad ``--resolution`` is a usage error, reported before any work."""
    from landcover.data.resolution import parse_resolution

    try:
        parse_resolution(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--resolution") from None


CheckpointOption = Annotated[
    str | None, typer.Option("--checkpoint", "-k", help="A landcover checkpoint (.pt).")
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        help="Instead of --checkpoint: a model exported by landcover export --format onnx "
        "(model.onnx, its model.json beside it), run by ONNX Runtime."
    ),
]


def model_file(checkpoint: str | None, model: str | None, compiled: bool = False) -> str:
    """The model a command runs: ``--checkpoint`` or ``--model``, exactly one (usage errors).

    Args:
        checkpoint: ``--checkpoint``.
        model: ``--model`` (an ``.onnx`` file).
        compiled: ``--compile`` was given (torch.compile: a checkpoint's model only).

    Returns:
        The path or URL.
    """
    if (checkpoint is None) == (model is None):
        raise typer.BadParameter("give --checkpoint or --model (one of them)", param_hint="--model")
    if model is not None and model.lower().endswith(".pt2"):
        raise typer.BadParameter(
            f"{model}: an exported program is for your own torch code (torch.export.load may "
            "unpickle it unsafely); give the model exported with --format onnx",
            param_hint="--model",
        )
    if model is not None and not model.lower().endswith(".onnx"):
        raise typer.BadParameter(
            f"{model}: not an .onnx file (landcover export)", param_hint="--model"
        )
    if checkpoint is not None and checkpoint.lower().endswith(".onnx"):
        raise typer.BadParameter("an ONNX model is given with --model", param_hint="--checkpoint")
    if model is not None and compiled:
        raise typer.BadParameter(
            "runs a checkpoint's torch model, not ONNX", param_hint="--compile"
        )
    return model if model is not None else str(checkpoint)
