"""``landcover predict`` and ``landcover evaluate``: the commands that run a model over tiles.

Their options and first checks (a bad value is one usage line before any work); the work is
:func:`landcover.mapping.job.run_predict_job` and :func:`landcover.inference.evaluate.run_evaluate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from landcover.commands.options import (
    BatchSizeOption,
    CheckpointOption,
    DeviceOption,
    ModelOption,
    Nnodes,
    NodeRank,
    OutFolderOption,
    OverlapOption,
    RdzvEndpoint,
    RdzvId,
    ResolutionOption,
    TtaOption,
    WindowOption,
    WorkersPerNode,
    check_resolution,
    model_file,
)

if TYPE_CHECKING:
    from landcover.aoi import AreaOfInterest
    from landcover.mapping.acquired import Acquired


def predict_command(
    tiles: Annotated[
        list[str] | None,
        typer.Argument(
            help="Images: files, globs (quoted), folders (their *_naip.tif files when there "
            "are some, else every .tif), list files (@list.txt or .txt) or manifest CSVs (an "
            "image column); paths or blob URLs. None with --stac.",
            metavar="TILES",
            show_default=False,
        ),
    ] = None,
    checkpoint: CheckpointOption = None,
    model: ModelOption = None,
    out: OutFolderOption = "predictions",
    overlap: OverlapOption = None,
    window: WindowOption = None,
    batch_size: BatchSizeOption = None,
    workers: Annotated[
        str,
        typer.Option(
            help="Worker processes in the job, or auto: 1 on the CPU, 4 per GPU on CUDA (at "
            "least 3 host cores each). Workers beyond the GPUs share them round-robin: one "
            "worker's host work keeps a GPU busy about a tenth of the time; on one H100, 1, 2 "
            "and 4 workers mapped 9.9, 18.3 and 25.8 Mpx/s.",
        ),
    ] = "auto",
    device: DeviceOption = "auto",
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
    stac: Annotated[
        str | None,
        typer.Option(
            help="A STAC API's URL (https; http on loopback) or a local catalogue, collection "
            "or ItemCollection file: the tiles are its items that --aoi touches, one a place.",
        ),
    ] = None,
    collection: Annotated[
        str | None, typer.Option(help="With --stac: the collection to search (e.g. naip).")
    ] = None,
    datetime: Annotated[
        str | None,
        typer.Option(
            help="With --stac: a date or range (2018, 2018-06, 2018-01-01/2019-12-31, ../2019); "
            "where flights overlap the latest in it is mapped (default: the latest of all).",
        ),
    ] = None,
    asset: Annotated[
        str, typer.Option(help="With --stac: the key of each item's image asset.")
    ] = "image",
    sign: Annotated[
        str,
        typer.Option(
            help="How blobs named by their account (https://ACCOUNT.blob.core.windows.net/...) "
            "are read: planetary-computer (SAS tokens from the Planetary Computer's token "
            "endpoint), none (the environment's credentials), or auto (planetary-computer "
            "when --stac is planetarycomputer.microsoft.com).",
        ),
    ] = "auto",
    map_writer: Annotated[
        str,
        typer.Option(
            help="Map writers, comma-separated: cog (class and probability COGs, previews; "
            "always needed) and any other registered (docs/guide/extending.md)."
        ),
    ] = "cog",
    aoi: Annotated[
        str | None,
        typer.Option(
            help="Area of interest: a GeoJSON file (a path or blob URL) of polygons (WGS 84, "
            "or the CRS it "
            "declares). Only the tiles that meet it are mapped; the job counts each class's "
            "hectares inside it, each place once (summary.json: aoi), and writes aoi.geojson. "
            "With --stac, the tiles are the catalogue's items it touches.",
        ),
    ] = None,
) -> None:
    """Map tiles: class maps (COG), probabilities, previews, summary, VRT mosaic, STAC items.

    Tiles are dealt to the workers largest first; a rerun skips tiles whose maps are complete.
    """
    from landcover.aoi import read_area
    from landcover.config import run_settings
    from landcover.errors import DataError
    from landcover.inference.mapwriters import parse_writers
    from landcover.inference.options import PredictOptions
    from landcover.inference.tta import parse_tta
    from landcover.mapping.job import run_predict_job
    from landcover.mapping.spec import JobOptions
    from landcover.parallel.devices import predict_workers
    from landcover.storage.signing import CHOICES, choose_signing

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
    if sign not in CHOICES:
        raise typer.BadParameter(f"must be {', '.join(CHOICES)}", param_hint="--sign")
    area = read_area(aoi) if aoi is not None else None  # a bad file: one line, no folder
    tiles, acquired = stac_tiles(tiles or [], area, stac, collection, datetime, asset)
    signing = choose_signing(sign, stac, tiles)
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
    job = JobOptions(
        overwrite=overwrite, fail_fast=fail_fast, aoi=area, signing=signing, acquired=acquired
    )
    run_predict_job(tiles, checkpoint, options, job, device, launch)


def stac_tiles(
    tiles: list[str],
    area: AreaOfInterest | None,
    stac: str | None,
    collection: str | None,
    dates: str | None,
    asset: str,
) -> tuple[list[str], dict[str, Acquired]]:
    """The job's tiles: those given, or the STAC items the area touches (one a place).

    Args:
        tiles: The tiles given as arguments.
        area: ``--aoi``'s area.
        stac: ``--stac``'s API URL or local file.
        collection: ``--collection``.
        dates: ``--datetime``.
        asset: ``--asset``.

    Returns:
        The tiles (paths or URLs), and when the imagery of those a search found was acquired
        (their items' dates; empty for tiles given).

    Raises:
        typer.BadParameter: Tiles and --stac both, or neither; --stac without --aoi; a STAC
            option without --stac.
        DataError: What the area or the search refuses (one line).
    """
    if stac is None:
        if collection is not None or dates is not None or asset != "image":
            raise typer.BadParameter("needs --stac", param_hint="--collection/--datetime/--asset")
        if not tiles:
            raise typer.BadParameter("give tiles, or --aoi with --stac", param_hint="TILES")
        return tiles, {}
    if tiles:
        raise typer.BadParameter("give tiles or --stac, not both", param_hint="--stac")
    if area is None:
        raise typer.BadParameter("--stac needs --aoi (the area to search)", param_hint="--aoi")
    from landcover.logs import setup_logging
    from landcover.mapping.acquired import from_item
    from landcover.parallel.env import DistEnv
    from landcover.search import SearchRequest, find_tiles

    setup_logging(DistEnv(), None)  # the search's lines, as the job's that follow
    found = find_tiles(SearchRequest(stac, area, collection, dates, asset))
    acquired = {t.href: from_item(t.acquired) for t in found if t.acquired is not None}
    return [tile.href for tile in found], acquired


def evaluate_command(
    data: Annotated[str, typer.Option(help="Folder of image/label pairs, or a manifest CSV.")],
    checkpoint: CheckpointOption = None,
    model: ModelOption = None,
    out: OutFolderOption = "evaluation",
    overlap: OverlapOption = None,
    window: WindowOption = None,
    batch_size: BatchSizeOption = None,
    device: DeviceOption = "auto",
    tta: TtaOption = "none",
    resolution: ResolutionOption = "train",
    overwrite: Annotated[
        bool, typer.Option(help="Replace the metrics of another model or other tiles in --out.")
    ] = False,
    split: Annotated[
        str | None,
        typer.Option(
            help="A manifest's rows to score: test, val, train or all (default: test when the "
            "manifest names splits, else every row)."
        ),
    ] = None,
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
        overwrite,
        split,
    )
