"""``landcover cluster``: plan a multi-node run and write Azure ML job files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from landcover.commands.options import ClusterFileOption, ConfigFileOption, GpuWorkersOption
from landcover.registry import DEFAULT_ENGINE, ENGINES, engine_help

cluster_app = typer.Typer(
    help="Plan a multi-node run from cluster.json and write Azure ML job files.",
    no_args_is_help=True,
)


@cluster_app.command("plan")
def cluster_plan(
    workers: GpuWorkersOption,
    cluster: ClusterFileOption = Path("cluster.json"),
    config: ConfigFileOption = None,
    data: Annotated[
        str | None,
        typer.Option(help="Training data (folder or URL); default: data.root or the sample."),
    ] = None,
    accumulate: Annotated[
        int | None,
        typer.Option(min=1, help="Micro-batches per optimizer step (default: optim.accumulate)."),
    ] = None,
) -> None:
    """Nodes, processes per node, global batch, learning rate, data per worker, epoch time.

    The epoch time is a model estimate (ring all-reduce over the VM size's interconnect).
    """
    from landcover.cluster.plan import make_plan, with_prediction
    from landcover.cluster.planlines import plan_lines
    from landcover.cluster.spec import load_cluster
    from landcover.config import load_config

    spec = load_cluster(cluster)
    settings = load_config(config, {"optim.accumulate": accumulate})
    plan = with_prediction(make_plan(spec, workers, settings, data), settings)
    for line in plan_lines(plan, str(cluster)):
        typer.echo(line, err=line.startswith("warning: "))


@cluster_app.command("azureml")
def cluster_azureml(
    workers: GpuWorkersOption,
    epochs: Annotated[
        int | None, typer.Option(min=1, help="Total epochs to train to (--job train).")
    ] = None,
    job: Annotated[
        str, typer.Option(help="train (landcover train) or predict (landcover predict).")
    ] = "train",
    engine: Annotated[str, typer.Option(help=engine_help() + ".")] = DEFAULT_ENGINE,
    cluster: ClusterFileOption = Path("cluster.json"),
    config: ConfigFileOption = None,
    data: Annotated[
        str | None,
        typer.Option(help="Training data: azureml://, https://, az:// or a local folder."),
    ] = None,
    tiles: Annotated[
        str | None,
        typer.Option(help="--job predict: a folder of tiles, or a .txt list / .csv manifest."),
    ] = None,
    checkpoint: Annotated[
        str | None, typer.Option(help="--job predict: the checkpoint (URI or local file).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for the YAML files.")] = Path("azureml"),
    input_mode: Annotated[str, typer.Option(help="ro_mount or download.")] = "ro_mount",
    run_path: Annotated[
        str | None,
        typer.Option(
            help="Output folder URI (azureml://...): the run (train) or the maps (predict); "
            "rerunning there resumes."
        ),
    ] = None,
) -> None:
    """Write compute.yml, environment.yml and job.yml for `az ml` (Azure ML CLI v2)."""
    from landcover.cluster.azureml import (
        JobTarget,
        PredictJob,
        TrainJob,
        write_predict_job,
        write_train_job,
    )
    from landcover.cluster.plan import make_plan
    from landcover.cluster.spec import load_cluster
    from landcover.config import load_config

    if job not in ("train", "predict"):
        raise typer.BadParameter("must be train or predict", param_hint="--job")
    if engine not in ENGINES:
        raise typer.BadParameter(f"must be {' or '.join(ENGINES)}", param_hint="--engine")
    if input_mode not in ("ro_mount", "download"):
        raise typer.BadParameter("must be ro_mount or download", param_hint="--input-mode")
    if job == "train" and epochs is None:
        raise typer.BadParameter("is needed for a training job", param_hint="--epochs")
    predict = None
    if job == "predict":
        if tiles is None or checkpoint is None:
            raise typer.BadParameter("--job predict needs --tiles and --checkpoint")
        predict = PredictJob(tiles, checkpoint, engine=engine)
    from landcover.plugins import load_plugins

    loaded = load_plugins()
    if loaded:  # the job's image is landcover's code alone
        typer.echo(
            f"warning: the plugins {', '.join(loaded)} are loaded here, but an Azure ML job's "
            "image does not carry them: what they register (an architecture, a loss term, a "
            "map writer, a callback) is not there on the cluster",
            err=True,
        )
    spec = load_cluster(cluster)
    resolved = load_config(config)
    plan = make_plan(spec, workers, resolved, with_data=False)
    target = JobTarget(
        spec,
        plan,
        out,
        cluster_file=cluster,
        input_mode=input_mode,  # type: ignore[arg-type]
        run_path=run_path,
    )
    if predict is not None:
        files = write_predict_job(target, predict)
    else:
        assert epochs is not None
        train = TrainJob(epochs, engine, config, data if data is not None else resolved.data.root)
        files = write_train_job(target, train)
    what = f"{engine} engine" if predict is None else "predict job"
    typer.echo(
        f"wrote {files.compute}, {files.environment} (build context {files.build_context}) "
        f"and {files.job}: {plan.nodes} x {spec.vm_size}, "
        f"{plan.processes_per_node} processes per node, {what}"
    )
    for note in files.notes:
        typer.echo(f"note: {note}")
    for warning in files.warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo("then run (with az configure --defaults group=RG workspace=WS):")
    for command in files.commands:
        typer.echo(f"  {command}")
