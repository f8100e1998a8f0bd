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
from landcover.commands.mapping import evaluate_command, predict_command
from landcover.commands.options import (
    ConfigFileOption,
    Nnodes,
    NodeRank,
    RdzvEndpoint,
    RdzvId,
    WorkersPerNode,
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


app.command(name="predict")(predict_command)
app.command(name="evaluate")(evaluate_command)
app.command(name="export")(export_command)
app.command()(view)  # landcover view DIR: the job's map in the browser (landcover.viewer)


def main() -> None:
    """Runs the CLI; user-fixable problems print one line and exit non-zero.

    So do usage errors (:mod:`landcover.usage`), and read-only, unwritable and full destinations (:mod:`landcover.diskerrors`). Every
    line the process prints passes through :mod:`landcover.redaction`.
    """
    from landcover.allocator import tune_allocator
    from landcover.diskerrors import uncaught_output_error
    from landcover.plugins import load_plugins
    from landcover.threads import passive_openmp

    passive_openmp()  # before anything imports torch (see landcover.threads)
    redaction.install()
    tune_allocator()
    try:
        load_plugins()  # what they register is there for every command (and its workers)
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
