"""The ``landcover`` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from landcover import redaction
from landcover.errors import LandcoverError
from landcover.registry import DEFAULT_ENGINE, ENGINES, engine_help

app = typer.Typer(
    help="Train U-Net land-cover models on NAIP imagery and turn them into maps.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
data_app = typer.Typer(help="Sample data and data tools.", no_args_is_help=True)
app.add_typer(data_app, name="data")

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


def _class_mapping(classes: str) -> Any:
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


def _check_resolution(value: str) -> None:
    """A bad ``--resolution`` is a usage error, reported before any work."""
    from landcover.data.resolution import parse_resolution

    try:
        parse_resolution(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--resolution") from None


@app.command()
def train(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file.")] = None,
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
    from landcover.training.launcher import train_main

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
    train_main(load_config(config, overrides, set_, flags={"data.root": "--data"}))


@app.command()
def predict(
    tiles: Annotated[
        list[str],
        typer.Argument(
            help="Images: files, globs (quoted), folders, list files (@list.txt or .txt) or "
            "manifest CSVs (an image column); paths or blob URLs."
        ),
    ],
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", "-k", help="A landcover checkpoint (.pt).")
    ],
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
        int, typer.Option(min=1, help="Worker processes in the job (one per GPU on CUDA).")
    ] = 1,
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
) -> None:
    """Map tiles: class maps (COG), probabilities, previews, summary, VRT mosaic, STAC items.

    Tiles are dealt to the workers largest first; a rerun skips tiles whose maps are complete.
    """
    from landcover.config import run_settings
    from landcover.inference.options import PredictOptions
    from landcover.inference.tta import parse_tta
    from landcover.mapping.job import run_predict_job
    from landcover.mapping.spec import JobOptions

    if prob_dtype not in ("uint8", "float32"):
        raise typer.BadParameter("must be uint8 or float32", param_hint="--prob-dtype")
    if prob_compress not in ("zstd", "deflate"):
        raise typer.BadParameter("must be zstd or deflate", param_hint="--prob-compress")
    parse_tta(tta)  # a bad value is reported before any work
    _check_resolution(resolution)
    launch = run_settings(
        "predict",
        workers=workers,
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
    )
    job = JobOptions(overwrite=overwrite, fail_fast=fail_fast)
    run_predict_job(tiles, checkpoint, options, job, device, launch)


@app.command()
def evaluate(
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", "-k", help="A landcover checkpoint (.pt).")
    ],
    data: Annotated[str, typer.Option(help="Folder of image/label pairs, or a manifest CSV.")],
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
    from landcover.diskerrors import check_output_folder
    from landcover.inference.evaluate import run_evaluate
    from landcover.inference.tta import parse_tta

    _check_resolution(resolution)
    check_output_folder(out)
    run_evaluate(
        checkpoint, data, out, overlap, batch_size, device, window, parse_tta(tta), resolution
    )


@data_app.command("synth")
def data_synth(
    out: Annotated[Path, typer.Argument(help="Output folder.")],
    tiles: Annotated[
        int | None,
        typer.Option(
            min=1, help="Tile pairs (easy, default 8); training tiles (shifted, default 16)."
        ),
    ] = None,
    size: Annotated[
        int | None,
        typer.Option(min=32, help="Tile side in pixels (easy: 512; shifted: 256, >= 128)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed; same seed, same files.")] = 0,
    prefix: Annotated[str, typer.Option(help="File-name prefix.")] = "synth",
    profile: Annotated[
        str, typer.Option(help="easy (one radiometry, the built-in sample) or shifted.")
    ] = "easy",
) -> None:
    """Write synthetic NAIP-like {name}_naip.tif / {name}_lc.tif pairs.

    --profile easy (the default): OUT/{prefix}_NNN pairs with one radiometry
    and generous classes, like the built-in sample.

    --profile shifted: the difficulties of real NAIP. OUT/train, OUT/val and
    OUT/test (TILES training tiles, a quarter as many for validation, half as
    many for test), each split from its own flights (gain and offset, gamma,
    haze, sun and shadows, season, noise, JPEG); forest, farmland and town
    tiles; buildings <= 0.5 % of the training pixels, roads partly under
    canopy. OUT/train_reflown: the training scenes (same labels) as a flight
    no split saw. OUT/flights.csv: each tile's flight and its parameters.
    OUT/manifest.csv (image,label,split) for data.manifest.
    """
    from landcover.diskerrors import check_output_folder

    if profile not in ("easy", "shifted"):
        raise typer.BadParameter(
            f"unknown profile {profile!r} (easy or shifted)", param_hint="--profile"
        )
    check_output_folder(out)
    if profile == "easy":
        from landcover.data.synthetic import write_synthetic_dataset

        tiles, size = tiles or 8, size or 512
        pairs = write_synthetic_dataset(out, tiles, size, seed, prefix=prefix)
        typer.echo(f"wrote {len(pairs)} tile pairs of {size}x{size} px to {out}")
    else:
        from landcover.data.shifted import MIN_SHIFTED_SIZE, write_shifted_world

        tiles, size = tiles or 16, size or 256
        if size < MIN_SHIFTED_SIZE:
            raise typer.BadParameter(
                f"the shifted world needs tiles of at least {MIN_SHIFTED_SIZE} px, got {size}",
                param_hint="--size",
            )
        written = write_shifted_world(out, tiles, size, seed, prefix=prefix)
        counts = {
            s: sum(t.split == s for t in written) for s in dict.fromkeys(t.split for t in written)
        }
        listed = ", ".join(f"{n} {s}" for s, n in counts.items())
        typer.echo(f"wrote {listed} tile pairs of {size}x{size} px to {out}")


@data_app.command("sample")
def data_sample() -> None:
    """Print the folder of the built-in sample dataset (generating it on first use)."""
    from landcover.data.sample import ensure_sample

    typer.echo(str(ensure_sample()))


@data_app.command("upload")
def data_upload(
    local: Annotated[Path, typer.Argument(help="Local file or folder (copied recursively).")],
    url: Annotated[
        str, typer.Argument(help="Destination: az://container/prefix, abfs://..., or a path.")
    ],
    concurrency: ConcurrencyOption = 8,
) -> None:
    """Upload a file or folder to Azure Blob Storage (credentials from AZURE_STORAGE_*)."""
    from landcover.storage.transfer import upload

    typer.echo(upload(local, url, concurrency).line())


@data_app.command("download")
def data_download(
    url: Annotated[
        str, typer.Argument(help="Source: az://container/prefix, abfs://..., a blob or a path.")
    ],
    local: Annotated[str, typer.Argument(help="Local folder (or file, for one blob).")],
    concurrency: ConcurrencyOption = 8,
) -> None:
    """Download a blob or every blob under a prefix (credentials from AZURE_STORAGE_*)."""
    from landcover.storage.transfer import download

    typer.echo(download(url, local, concurrency).line())


@data_app.command("check")
def data_check(
    data: Annotated[
        str, typer.Argument(help="Folder of image/label pairs or a manifest CSV: path or URL.")
    ],
    classes: ClassesOption = "chesapeake7",
    bands: BandsOption = 4,
    image_suffix: ImageSuffixOption = "_naip.tif",
    label_suffix: LabelSuffixOption = "_lc.tif",
) -> None:
    """Check every pair of a data folder or manifest; show its class balance; list bad files."""
    from landcover.data.check import run_check

    run_check(data, _class_mapping(classes), bands, image_suffix, label_suffix)


@data_app.command("stats")
def data_stats(
    data: Annotated[
        str, typer.Argument(help="Folder of image/label pairs or a manifest CSV: path or URL.")
    ],
    classes: ClassesOption = "chesapeake7",
    out: Annotated[
        str | None,
        typer.Option(help="Output YAML (path or URL); default: {DATA name}_stats.yaml here."),
    ] = None,
    bands: BandsOption = 4,
    image_suffix: ImageSuffixOption = "_naip.tif",
    label_suffix: LabelSuffixOption = "_lc.tif",
) -> None:
    """Measure per-band mean/std and class frequencies; write them as an includable YAML."""
    from landcover.data.statsfile import run_stats

    run_stats(data, _class_mapping(classes), bands, image_suffix, label_suffix, out)


@data_app.command("prepare")
def data_prepare(
    images: Annotated[
        list[str], typer.Option(help="Large NAIP GeoTIFF or quoted glob; repeat for more.")
    ],
    labels: Annotated[
        list[str], typer.Option(help="Label raster (any CRS or grid) or quoted glob; repeatable.")
    ],
    out: Annotated[Path, typer.Option(help="Output folder for the pairs and manifest.csv.")],
    tile_size: Annotated[int, typer.Option(min=16, help="Tile side in pixels.")] = 2048,
    min_valid: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Drop tiles with fewer labelled pixels.")
    ] = 0.5,
    classes: ClassesOption = "chesapeake7",
) -> None:
    """Cut large rasters into {name}_naip.tif / {name}_lc.tif tiles with labels on their grid."""
    from landcover.data.prepare import prepare_tiles
    from landcover.diskerrors import check_output_folder

    mapping = _class_mapping(classes)
    check_output_folder(out)
    summary = prepare_tiles(images, labels, out, mapping, tile_size, min_valid, echo=typer.echo)
    typer.echo(summary.line(min_valid))


cluster_app = typer.Typer(
    help="Plan a multi-node run from cluster.json and write Azure ML job files.",
    no_args_is_help=True,
)
app.add_typer(cluster_app, name="cluster")


@cluster_app.command("plan")
def cluster_plan(
    workers: Annotated[int, typer.Option(min=1, help="Worker processes, one per GPU.")],
    cluster: Annotated[
        Path, typer.Option(help="cluster.json: VM size, node count, priority, region.")
    ] = Path("cluster.json"),
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file.")] = None,
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
    from landcover.cluster.plan import make_plan, plan_lines, with_prediction
    from landcover.cluster.spec import load_cluster
    from landcover.config import load_config

    spec = load_cluster(cluster)
    settings = load_config(config, {"optim.accumulate": accumulate})
    plan = with_prediction(make_plan(spec, workers, settings, data), settings)
    for line in plan_lines(plan, str(cluster)):
        typer.echo(line, err=line.startswith("warning: "))


@cluster_app.command("azureml")
def cluster_azureml(
    workers: Annotated[int, typer.Option(min=1, help="Worker processes, one per GPU.")],
    epochs: Annotated[
        int | None, typer.Option(min=1, help="Total epochs to train to (--job train).")
    ] = None,
    job: Annotated[
        str, typer.Option(help="train (landcover train) or predict (landcover predict).")
    ] = "train",
    engine: Annotated[str, typer.Option(help=engine_help() + ".")] = DEFAULT_ENGINE,
    cluster: Annotated[
        Path, typer.Option(help="cluster.json: VM size, node count, priority, region.")
    ] = Path("cluster.json"),
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file.")] = None,
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


def main() -> None:
    """Runs the CLI; user-fixable problems print one line and exit non-zero.

    So do read-only, unwritable and full destinations (:mod:`landcover.diskerrors`). Every
    line the process prints passes through :mod:`landcover.redaction`.
    """
    from landcover.allocator import tune_allocator
    from landcover.diskerrors import uncaught_output_error
    from landcover.threads import passive_openmp

    passive_openmp()  # before anything imports torch (see landcover.threads)
    redaction.install()
    tune_allocator()
    try:
        app()
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
        print("interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
