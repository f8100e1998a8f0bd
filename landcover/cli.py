"""The ``landcover`` command line."""

from __future__ import annotations

import signal
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from landcover import redaction
from landcover.commands.cluster import cluster_app
from landcover.commands.data import data_app
from landcover.commands.export import export_command
from landcover.commands.options import (
    CheckpointOption,
    ConfigFileOption,
    ModelOption,
    Nnodes,
    NodeRank,
    RdzvEndpoint,
    RdzvId,
    ResolutionOption,
    TtaOption,
    WorkersPerNode,
    check_resolution,
    model_file,
)
from landcover.commands.view import view
from landcover.errors import LandcoverError
from landcover.registry import engine_help
from landcover.usage import run_app

INTERRUPTED = "interrupted by SIGINT (rerun the same command to resume)"


class RedactingGroup(TyperGroup):
    """The command group, whose usage errors are redacted before they are laid out.

    A usage error quotes what was typed (``Got unexpected extra argument (URL)``), and the
    error panel wraps it to the terminal's width: a signature cut in two by a line break is no
    longer a ``sig=`` value to the redacting streams. So the message is redacted here, whole,
    for every command and subcommand (their errors rise through this group).
    """

    def make_context(self, *args: Any, **kwargs: Any) -> typer.Context:
        """The group's own, with a usage error's message redacted (see the class)."""
        try:
            return super().make_context(*args, **kwargs)
        except typer.TyperException as exc:
            exc.message = redaction.redact(exc.message)
            raise

    def invoke(self, ctx: typer.Context) -> Any:
        """The group's own, with a usage error's message redacted (see the class).

        Ctrl-C in a command of one process says so in one line (typer would exit 130 without
        a word, after the progress line of a job that looked finished).
        """
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            exc.message = redaction.redact(exc.message)
            raise
        except KeyboardInterrupt:
            print(f"error: {INTERRUPTED}", file=sys.stderr)
            raise typer.Exit(128 + signal.SIGINT) from None


app = typer.Typer(
    cls=RedactingGroup,
    help="Train U-Net land-cover models on NAIP imagery and turn them into maps.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(data_app, name="data")
app.add_typer(cluster_app, name="cluster")
app.command(name="export")(export_command)


@app.command()
def train(
    config: ConfigFileOption = None,
    data: Annotated[
        str | None,
        typer.Option(help="Folder of *_naip.tif/*_lc.tif pairs; default: the built-in sample."),
    ] = None,
    out: Annotated[
        str | None, typer.Option(help="Run folder; rerunning with the same folder resumes.")
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Total epochs to train to.")] = None,
    workers: Annotated[
        int | None, typer.Option(help="Worker processes on this machine (one per GPU).")
    ] = None,
    engine: Annotated[str | None, typer.Option(help=engine_help() + ".")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Samples per worker per step.")] = None,
    lr: Annotated[
        float | None,
        typer.Option(
            help="Learning rate at a global batch of optim.ref_batch; the peak follows the "
            "global batch by optim.lr_scaling (sqrt for Adam/AdamW, linear for SGD)."
        ),
    ] = None,
    samples_per_epoch: Annotated[int | None, typer.Option(help="Global samples per epoch.")] = None,
    encoder: Annotated[
        str | None, typer.Option(help="smp encoder, e.g. resnet18, resnet34.")
    ] = None,
    patch_size: Annotated[
        int | None, typer.Option(help="Training patch size (multiple of 32).")
    ] = None,
    classes: Annotated[
        str | None, typer.Option(help="Class preset: chesapeake7, cvpr4, tutorial5.")
    ] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda.")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    max_restarts: Annotated[
        int | None, typer.Option(help="Elastic restarts after a worker failure.")
    ] = None,
    nnodes: Nnodes = None,
    node_rank: NodeRank = None,
    workers_per_node: WorkersPerNode = None,
    rdzv_endpoint: RdzvEndpoint = None,
    rdzv_id: RdzvId = None,
    grad_compression: Annotated[
        str | None, typer.Option(help="Gradient all-reduce: none, fp16 or powersgd.")
    ] = None,
    accumulate: Annotated[
        int | None, typer.Option(help="Micro-batches per optimizer step (one all-reduce each).")
    ] = None,
    local_sgd_period: Annotated[
        int | None, typer.Option(help="Average models every H steps instead (local SGD).")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override any key: section.key=value.")
    ] = None,
) -> None:
    """Train a U-Net, data-parallel over --workers processes; resumes from the run folder."""
    from landcover.config import load_config

    overrides: dict[str, Any] = {
        "data.root": data,
        "data.patch_size": patch_size,
        "data.classes": classes,
        "model.encoder": encoder,
        "optim.epochs": epochs,
        "optim.batch_size": batch_size,
        "optim.lr": lr,
        "optim.samples_per_epoch": samples_per_epoch,
        "run.out": out,
        "run.workers": workers,
        "run.engine": engine,
        "run.device": device,
        "run.seed": seed,
        "run.max_restarts": max_restarts,
        "run.nnodes": nnodes,
        "run.workers_per_node": workers_per_node,
        "run.rdzv_endpoint": rdzv_endpoint,
        "run.rdzv_id": rdzv_id,
        "run.node_rank": node_rank,
        "run.grad_compression": grad_compression,
        "optim.accumulate": accumulate,
        "run.local_sgd_period": local_sgd_period,
    }
    loaded = load_config(config, overrides, set_, flags={"data.root": "--data"})
    from landcover.training.launcher import train_main  # torch and smp: after the config's checks

    train_main(loaded)


@app.command()
def predict(
    tiles: Annotated[
        list[str],
        typer.Argument(
            help="Images: files, globs (quoted), folders (their *_naip.tif files when there "
            "are some, else every .tif), list files (@list.txt or .txt) or manifest CSVs (an "
            "image column); paths or blob URLs."
        ),
    ],
    checkpoint: CheckpointOption = None,
    model: ModelOption = None,
    out: Annotated[str, typer.Option(help="Output folder: a path or a blob URL.")] = "predictions",
    overlap: Annotated[
        int | None, typer.Option(help="Window overlap in px (default: patch/4).")
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(help="Window size in px (default: 4 training patches, at most 1024)."),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Windows per forward pass (default: 16 x 256^2 px' worth)."),
    ] = None,
    workers: Annotated[
        str,
        typer.Option(
            help="Worker processes in the job, or auto: 1 on the CPU, 4 per GPU on CUDA (at "
            "least 3 host cores each). Workers beyond the GPUs share them round-robin: one "
            "worker's host work keeps a GPU busy about a tenth of the time; on one H100, 1, 2 "
            "and 4 workers mapped 9.9, 18.3 and 25.8 Mpx/s.",
        ),
    ] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    prob_dtype: Annotated[
        str, typer.Option(help="uint8 (probability x 255) or float32.")
    ] = "uint8",
    preview: Annotated[bool, typer.Option(help="Write {stem}_preview.png.")] = True,
    probs: Annotated[
        bool,
        typer.Option(
            help="Write {stem}_prob.tif (--no-probs: the class map alone, for jobs that "
            "need only classes; faster)."
        ),
    ] = True,
    compiled: Annotated[
        bool,
        typer.Option(
            "--compile", help="Run the model compiled (torch.compile): faster after a compile."
        ),
    ] = False,
    overwrite: Annotated[
        bool, typer.Option(help="Predict every tile again, even those whose maps are complete.")
    ] = False,
    fail_fast: Annotated[
        bool, typer.Option(help="Stop at the first tile that fails (default: go on).")
    ] = False,
    nnodes: Nnodes = None,
    node_rank: NodeRank = None,
    workers_per_node: WorkersPerNode = None,
    rdzv_endpoint: RdzvEndpoint = None,
    rdzv_id: RdzvId = None,
    local_addr: Annotated[
        str | None, typer.Option(help="This node's address as the other nodes reach it.")
    ] = None,
    max_restarts: Annotated[
        int | None,
        typer.Option(help="Restarts after a worker fails; restarted workers skip done tiles."),
    ] = None,
    tta: TtaOption = "none",
    prob_compress: Annotated[
        str,
        typer.Option(help="Probability map compression: zstd (fast) or deflate (older readers)."),
    ] = "zstd",
    resolution: ResolutionOption = "train",
    map_writer: Annotated[
        str,
        typer.Option(
            help="Map writers, comma-separated: cog (class and probability COGs, previews; "
            "always needed) and any other registered (docs/guide/extending.md)."
        ),
    ] = "cog",
) -> None:
    """Map tiles: class maps (COG), probabilities, previews, summary, VRT mosaic, STAC items.

    Tiles are dealt to the workers largest first; a rerun skips tiles whose maps are complete.
    """
    from landcover.config import run_settings
    from landcover.errors import DataError
    from landcover.inference.mapwriters import parse_writers
    from landcover.inference.options import PredictOptions
    from landcover.inference.tta import parse_tta
    from landcover.mapping.job import run_predict_job
    from landcover.mapping.spec import JobOptions
    from landcover.parallel.devices import predict_workers

    checkpoint = model_file(checkpoint, model, compiled)  # or --model's .onnx
    if prob_dtype not in ("uint8", "float32"):
        raise typer.BadParameter("must be uint8 or float32", param_hint="--prob-dtype")
    if prob_compress not in ("zstd", "deflate"):
        raise typer.BadParameter("must be zstd or deflate", param_hint="--prob-compress")
    parse_tta(tta)  # a bad value is reported before any work
    try:
        writers = parse_writers(map_writer)
    except DataError as exc:
        raise typer.BadParameter(str(exc), param_hint="--map-writer") from None
    check_resolution(resolution)
    count = predict_workers(workers, device)
    if workers == "auto" and (nnodes or 1) > 1:  # auto is this node's; every node alike
        count = (workers_per_node or count) * nnodes
    launch = run_settings(
        "predict",
        workers=count,
        nnodes=nnodes,
        node_rank=node_rank,
        workers_per_node=workers_per_node,
        rdzv_endpoint=rdzv_endpoint,
        rdzv_id=rdzv_id,
        local_addr=local_addr,
        max_restarts=max_restarts,
        device=device,
    )
    options = PredictOptions(
        out,
        overlap,
        batch_size,
        window,
        prob_dtype,
        preview,
        tta=tta,
        prob_compress=prob_compress,
        probs=probs,
        compile=compiled,
        resolution=resolution,
        writers=writers,
    )
    job = JobOptions(overwrite=overwrite, fail_fast=fail_fast)
    run_predict_job(tiles, checkpoint, options, job, device, launch)


@app.command()
def evaluate(
    data: Annotated[str, typer.Option(help="Folder of image/label pairs, or a manifest CSV.")],
    checkpoint: CheckpointOption = None,
    model: ModelOption = None,
    out: Annotated[str, typer.Option(help="Output folder: a path or a blob URL.")] = "evaluation",
    overlap: Annotated[
        int | None, typer.Option(help="Window overlap in px (default: patch/4).")
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(help="Window size in px (default: 4 training patches, at most 1024)."),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Windows per forward pass (default: 16 x 256^2 px' worth)."),
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    tta: TtaOption = "none",
    resolution: ResolutionOption = "train",
) -> None:
    """Metrics of a checkpoint on labelled tiles: metrics.json, confusion.csv, confusion.png.

    With --resolution, the maps are scored as predict writes them: on each image's grid,
    against the labels brought onto that grid (nearest neighbour).
    """
    from landcover.inference.evaluate import run_evaluate
    from landcover.inference.tta import parse_tta
    from landcover.storage.urls import check_no_credentials

    check_resolution(resolution)
    check_no_credentials(out)  # (the folder is made once the model and data pass their checks)
    run_evaluate(
        model_file(checkpoint, model),
        data,
        out,
        overlap,
        batch_size,
        device,
        window,
        parse_tta(tta),
        resolution,
    )


app.command()(view)  # landcover view DIR: the job's map in the browser (landcover.viewer)


def main() -> None:
    """Runs the CLI; user-fixable problems print one line and exit non-zero.

    So do usage errors (:mod:`landcover.usage`), and read-only, unwritable and full destinations (:mod:`landcover.diskerrors`). Every
    line the process prints passes through :mod:`landcover.redaction`.
    """
    from landcover.allocator import tune_allocator
    from landcover.diskerrors import uncaught_output_error
    from landcover.threads import passive_openmp

    passive_openmp()  # before anything imports torch (see landcover.threads)
    redaction.install()
    tune_allocator()
    try:
        run_app(app)  # a usage error of any command: one error: line, exit 2
    except LandcoverError as exc:
        print(f"error: {redaction.redact(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a read-only, unwritable or full destination no write site named
        translated = uncaught_output_error(exc)
        if translated is None:
            raise
        print(f"error: {redaction.redact(str(translated))}", file=sys.stderr)
        sys.exit(translated.exit_code)
    except KeyboardInterrupt:
        print(f"error: {INTERRUPTED}", file=sys.stderr)
        sys.exit(128 + signal.SIGINT)


if __name__ == "__main__":
    main()
