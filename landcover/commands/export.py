"""``landcover export``: a checkpoint's model as ONNX or a torch exported program, described."""

from __future__ import annotations

from typing import Annotated

import typer

from landcover.inference.exported import FORMATS


def export_command(
    checkpoint: Annotated[str, typer.Argument(help="A landcover checkpoint (.pt).")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="onnx (model.onnx, opset 18, for ONNX Runtime and predict --model) or "
            "exported-program (model.pt2, torch.export).",
        ),
    ] = "onnx",
    out: Annotated[str, typer.Option(help="Folder to write into (made if missing).")] = "model",
) -> None:
    """Export the model (its averaged weights) with model.json and a STAC MLM item beside it.

    Batch and sides are dynamic (sides a multiple of 32, padded by the caller). An
    architecture that cannot export is named with the reason, and nothing is written.
    """
    if fmt not in FORMATS:
        raise typer.BadParameter(f"must be one of {', '.join(FORMATS)}", param_hint="--format")
    from landcover.export.command import export_model
    from landcover.logs import setup_logging
    from landcover.parallel.env import DistEnv

    setup_logging(DistEnv(), None)
    done = export_model(checkpoint, fmt, out)
    print(done.model)
