"""Predict ceiling: predict's own per-tile pipeline with a model that costs nothing, against
the I/O floor.

On a GPU node the model is not what limits mapping: decoding NAIP, normalising and blending
windows, the arg-max, compressing the COGs and building their overviews all run on the host's
cores. This part measures those host costs alone. A stand-in model (a fixed set of logits per batch shape,
made once by a 1x1 convolution of the first batch and then returned at no cost; selectable
only here) goes through :class:`~landcover.inference.predict.TileMapper`,
the code ``landcover predict`` runs per tile, with predict's default window, overlap and
batch for the default config (``configs/default.yaml``), no preview.

The tile is a 6,000 x 7,500 synthetic NAIP scene (``--quick``: 1,500 x 1,200) written as a COG
in 512 px blocks twice: DEFLATE with the horizontal predictor, as NAIP's COGs are, and
JPEG-in-TIFF (quality 90), as some NAIP mirrors serve it. Each is mapped with the class and
probability COGs and with the class COG alone (``--no-probs``).

The I/O floor on the same tile: reading it (rasterio, the whole tile) and writing the same two
COGs from ready-made arrays (the pipeline's own maps, read back beforehand) with the same
compression and overviews, GDAL alone. ``ratio`` is the floor's seconds over the pipeline's:
the share of the I/O floor's speed the pipeline reaches.

Every measurement runs in its own process pinned to 1 or 2 cores (``sched_setaffinity``;
torch's threads set to match), pipeline and floor alternately, the median of ``--repeats``
kept; the pipeline's time is split by stage (:mod:`predict_profile`: the tile's decode into
memory, its band statistics, window rows, compute, the writer thread, the COG publishing).
Both read the tile with GDAL decoding on every core (``GDAL_NUM_THREADS``, as predict does)
and run with the process settings the ``landcover`` command applies (the allocator,
:mod:`landcover.allocator`, and OpenMP's passive wait policy, :mod:`landcover.threads`); one
more row per input and output set runs both with the libraries' defaults
(``LANDCOVER_MALLOC=default``, no ``OMP_WAIT_POLICY``), to show what those settings buy.

A single tile ends with its COG publishing, which nothing overlaps. ``landcover predict`` over
a folder publishes each tile in its mapper's publisher thread while the next tile is
predicted, so per input the pipeline also runs sustained: 6 copies of the tile back to back
through one mapper (after one untimed copy), class and probability COGs, 1 and 2 cores. The
figure is the steady state's seconds per tile: the spacing of finished tiles, leaving out the
first (nothing before it to overlap) and the last (nothing after it); the whole run's wall
seconds per tile are kept beside it. 2 cores / 1 core of the steady state is its scaling.

Usage: python benchmarks/ceiling_bench.py [--quick] [--repeats N] [--out DIR] [--cache DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import rasterio.shutil
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results
from predict_bench import make_checkpoint

from landcover.allocator import ENV_SWITCH, tune_allocator
from landcover.inference.loader import load_inference_model
from landcover.inference.writers import CLASS_COMPRESSION, PROB_COMPRESSION
from landcover.synthetic.synthetic import synthesize_scene
from landcover.threads import ENV as OMP_ENV
from landcover.threads import POLICY as OMP_POLICY
from landcover.threads import gdal_threads

REPO = Path(__file__).resolve().parents[1]
FULL = (7500, 6000)
"""Height and width of the tile (a NAIP DOQQ's size at 1 m)."""
QUICK = (1500, 1200)
INPUTS = {
    "deflate": {"COMPRESS": "DEFLATE", "PREDICTOR": "2"},
    "jpeg": {"COMPRESS": "JPEG", "QUALITY": "90"},
}
"""The tile's COG creation options, by input name."""
SUSTAINED_TILES = 6
"""Tiles mapped back to back in a sustained measurement (after one untimed tile)."""
SUSTAINED = f"sustained ({SUSTAINED_TILES} tiles)"
"""The ``settings`` column of the sustained rows."""
STAGES = ("decode", "stats", "read", "compute", "model", "write", "publish")
RATIO_GOAL = 0.7
SCALING_GOAL = 1.7
NODE_CORES = 96
MOONSHOT_MPX_S = 72.0
"""The Chesapeake Bay watershed (about 2.6e11 px) in one hour on one 8-GPU node."""


class StandIn(nn.Module):
    """Fixed class logits at no cost: computed once per batch shape, then returned as they are.

    The first batch of a shape goes through a 1x1 convolution with set weights, so the logits
    follow that batch's pixels and the maps have the structure (and the compressibility) of a
    real map, not of a constant; every later call returns those logits again. They are laid
    out as a real U-Net's output on the CPU is (channels-last), so the softmax pays what it
    pays after a real model.

    Args:
        bands: Input bands.
        classes: Output classes.
    """

    def __init__(self, bands: int, classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(bands, classes, 1)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(classes, bands, 1, 1, generator=generator))
            self.conv.bias.zero_()
        self.fixed: dict[tuple[int, ...], torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, K, h, w)`` of a normalised batch ``(B, C, h, w)``."""
        logits = self.fixed.get(tuple(x.shape))
        if logits is None:
            logits = self.conv(x).contiguous(memory_format=torch.channels_last)
            self.fixed[tuple(x.shape)] = logits
        return logits


def make_tile(height: int, width: int, name: str, folder: Path) -> Path:
    """The synthetic NAIP scene as a COG (512 px blocks) with one input's compression."""
    path = folder / f"ceiling{height}x{width}_{name}_naip.tif"
    if path.exists():
        return path
    image, _ = synthesize_scene(height, width, np.random.default_rng(height + width))
    profile = {
        "driver": "GTiff",
        "height": height,
        "width": width,
        "count": 4,
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": rasterio.Affine(1.0, 0.0, 400000.0, 0.0, -1.0, 4400000.0),
        "photometric": "MINISBLACK",
    }
    scratch = folder / f"{path.stem}.scratch.tif"
    with rasterio.open(scratch, "w", **profile, tiled=True, blockxsize=512, blockysize=512) as ds:
        ds.write(image)
    partial = folder / f"{path.stem}.partial.tif"  # a cached tile is only ever a whole one
    rasterio.shutil.copy(scratch, partial, driver="COG", BLOCKSIZE="512", **INPUTS[name])
    os.replace(partial, path)
    scratch.unlink()
    return path


def _pin(threads: int) -> None:
    """Pins this process to ``threads`` cores and sizes torch's thread pool to match."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < threads:
        raise SystemExit(f"{threads} threads asked, {len(cores)} cores available")
    os.sched_setaffinity(0, cores[:threads])
    torch.set_num_threads(threads)


def _stand_in_model(checkpoint: Path) -> Any:
    """The checkpoint as predict loads it, its model replaced by the stand-in."""
    im = load_inference_model(checkpoint, "cpu")
    stand_in = StandIn(len(im.config.data.bands), im.mapping.num_classes).eval()
    return dataclasses.replace(im, model=stand_in)


def pipeline_once(tile: Path, checkpoint: Path, out: Path, probs: bool) -> dict[str, Any]:
    """Maps the tile through predict's per-tile code with the stand-in model (this process).

    Returns:
        The wall seconds, the process's CPU seconds, and each stage's wall seconds.
    """
    from predict_profile import profile_tile

    profile = profile_tile(str(tile), _stand_in_model(checkpoint), str(out), probs=probs)
    row: dict[str, Any] = {"seconds": profile.wall, "cpu_seconds": profile.cpu}
    row.update({f"{k}_s": v[0] for k, v in profile.stages.items()})
    return row


def sustained_once(
    tile: Path,
    checkpoint: Path,
    out: Path,
    probs: bool,
    count: int = SUSTAINED_TILES,
    model: nn.Module | None = None,
    decode_ahead: bool | None = None,
) -> dict[str, Any]:
    """Maps ``count`` copies of the tile back to back through one mapper (this process).

    As ``landcover predict`` maps a folder: the next tile is decoded while this one is
    predicted (the worker's hint, :meth:`~landcover.inference.predict.TileMapper.prefetch`),
    and each tile's COGs are published in the mapper's publisher thread while the next tile is
    predicted. One more copy goes first, untimed (the stand-in's logits, the thread pools).

    Args:
        tile: The tile.
        checkpoint: The checkpoint (its config, bands and classes).
        out: A scratch folder.
        probs: Write the probability map too.
        count: Timed tiles.
        model: The model to map with (default: the free :class:`StandIn`).
        decode_ahead: The mapper's (default: as ``landcover predict`` decides, not on the CPU).

    Returns:
        The wall seconds per tile, the process's CPU seconds per tile, the steady state's
        seconds per tile (``count`` >= 4: the first and the last finished tiles left out),
        and the steady state's start and end (``perf_counter`` times).
    """
    if count < 4:
        raise ValueError(f"a steady state needs 4 tiles or more, not {count}")
    from landcover.inference.options import PredictOptions
    from landcover.inference.predict import TileMapper

    im = _stand_in_model(checkpoint)
    if model is not None:
        im = dataclasses.replace(im, model=model.eval())
    tiles = out / "tiles"
    tiles.mkdir()
    copies = []
    for i in range(count + 1):
        copy = tiles / f"copy{i}_{tile.name}"
        copy.symlink_to(tile)
        copies.append(str(copy))
    options = PredictOptions(out=str(out / "maps"), preview=False, probs=probs)
    done: list[float] = []  # when each timed tile's maps were published
    with TileMapper(im, options, decode_ahead) as mapper:
        mapper.submit(copies[0]).result()
        cpu = time.process_time()
        start = time.perf_counter()
        futures = []
        for i, copy in enumerate(copies[1:], start=1):
            if i + 1 < len(copies):
                mapper.prefetch(copies[i + 1])
            futures.append(mapper.submit(copy))
            futures[-1].add_done_callback(lambda _: done.append(time.perf_counter()))
        for future in futures:
            future.result()
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    done.sort()
    return {
        "seconds": wall / count,
        "cpu_seconds": cpu / count,
        # the pipeline full: the spacing of finished tiles, the first and the last left out
        # (the first had no tile before it to overlap, the last none after it)
        "steady_seconds": (done[-2] - done[1]) / (count - 3),
        "steady_from": done[1],
        "steady_to": done[-2],
    }


def floor_once(tile: Path, maps: Path, out: Path, probs: bool) -> dict[str, Any]:
    """Reads the tile and writes the same COGs from ready-made arrays (GDAL alone).

    ``maps`` holds the pipeline's own class (and probability) map of the tile, read into
    memory before the clock starts.
    """
    stem = tile.name.removesuffix(".tif")
    arrays = {"class": _read(maps / f"{stem}_class.tif")}
    if probs:
        arrays["prob"] = _read(maps / f"{stem}_prob.tif")
        with rasterio.open(maps / f"{stem}_prob.tif") as ds:
            arrays["mask"] = ds.read_masks(1)
    with rasterio.open(maps / f"{stem}_class.tif") as ds:
        grid = {"crs": ds.crs, "transform": ds.transform, "width": ds.width, "height": ds.height}
    start = time.perf_counter()
    with rasterio.Env(GDAL_NUM_THREADS=gdal_threads()), rasterio.open(tile) as src:
        src.read()  # decoded on every core, as predict decodes a tile
    _write_cog(arrays["class"], grid, out / "class.tif", "NEAREST", CLASS_COMPRESSION, 255)
    if probs:
        options = PROB_COMPRESSION["zstd"]
        _write_cog(arrays["prob"], grid, out / "prob.tif", "AVERAGE", options, None, arrays["mask"])
    return {"seconds": time.perf_counter() - start}


def _read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read()


def _write_cog(
    array: np.ndarray,
    grid: dict[str, Any],
    dst: Path,
    resampling: str,
    options: dict[str, str],
    nodata: int | None,
    mask: np.ndarray | None = None,
) -> None:
    """Writes an array as a COG the way predict does (256 px blocks, overviews, all cores;
    the probability map with its mask band)."""
    profile = {"driver": "MEM", "count": array.shape[0], "dtype": array.dtype.name, **grid}
    with rasterio.open("/vsimem/ceiling.tif", "w", **profile, nodata=nodata) as mem:
        mem.write(array)
        if mask is not None:
            mem.write_mask(mask)
        rasterio.shutil.copy(
            mem,
            dst,
            driver="COG",
            **options,
            BLOCKSIZE="256",
            OVERVIEW_RESAMPLING=resampling,
            BIGTIFF="IF_SAFER",
            NUM_THREADS=gdal_threads(),
        )


def _child(args: argparse.Namespace) -> None:
    """One measurement, in a process of its own: prints its row as JSON."""
    _pin(args.threads)
    tune_allocator()  # as the landcover command does (not under LANDCOVER_MALLOC=default)
    out = Path(tempfile.mkdtemp(prefix="lc-ceiling-", dir=args.scratch))
    if args.child == "pipeline":
        row = pipeline_once(Path(args.tile), Path(args.checkpoint), out, args.probs)
    elif args.child == "sustained":
        row = sustained_once(Path(args.tile), Path(args.checkpoint), out, args.probs)
    else:
        row = floor_once(Path(args.tile), Path(args.maps), out, args.probs)
    if not args.keep_maps:  # a full run would otherwise keep GBs of maps until its end
        shutil.rmtree(out)
    print(json.dumps(row))


def _measure(
    kind: str,
    threads: int,
    probs: bool,
    keep_maps: bool = False,
    settings: str = "tuned",
    **paths: Path,
) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, "--threads", str(threads)]
    command += ["--probs"] if probs else []
    command += ["--keep-maps"] if keep_maps else []
    for key, value in paths.items():
        command += [f"--{key}", str(value)]
    # the landcover command's process settings (landcover.allocator, landcover.threads), or
    # the libraries' defaults for both
    env = {**os.environ, ENV_SWITCH: "default" if settings == "default" else ""}
    env.pop(OMP_ENV, None)
    if settings != "default":
        env[OMP_ENV] = OMP_POLICY
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run(quick: bool, out: Path, cache: Path | None = None, repeats: int = 3) -> list[Goal]:
    """Measures the pipeline and the floor per input, output set and thread count.

    Args:
        quick: A 1,500 x 1,200 tile, one repeat, no goals.
        out: Results folder.
        cache: Folder for the tiles and the checkpoint (default: a temporary folder).
        repeats: Measurements of each, the median kept.

    Returns:
        The goals: the ratio to the floor, the 2-thread scaling, and the per-node figure.
    """
    height, width = QUICK if quick else FULL
    repeats = 1 if quick else repeats
    threads_available = min(2, len(os.sched_getaffinity(0)))
    with tempfile.TemporaryDirectory(prefix="lc-ceiling-") as tmp:
        folder = cache or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        checkpoint = make_checkpoint(REPO / "configs" / "default.yaml", folder)
        rows: list[dict[str, Any]] = []
        for name in INPUTS:
            tile = make_tile(height, width, name, folder)
            for probs in (True, False):
                for threads in range(1, threads_available + 1):
                    rows.append(_row(tile, checkpoint, name, probs, threads, repeats, Path(tmp)))
                    # the libraries' default process settings (glibc's malloc thresholds,
                    # OpenMP's spinning threads), to show what landcover's settings are for
                    rows.append(
                        _row(tile, checkpoint, name, probs, threads, repeats, Path(tmp), "default")
                    )
            for threads in range(1, threads_available + 1):  # tiles back to back, as a job
                rows.append(_sustained_row(tile, checkpoint, name, threads, repeats, Path(tmp)))
    extra = {
        "tile": f"{width} x {height}",
        "repeats": repeats,
        "stand_in": "fixed logits (one 1x1 conv per batch shape, then reused)",
    }
    held = [] if quick else goals(rows, threads_available)
    write_results("ceiling", rows, extra, out, held)
    return held


def _row(
    tile: Path,
    checkpoint: Path,
    name: str,
    probs: bool,
    threads: int,
    repeats: int,
    tmp: Path,
    settings: str = "tuned",
) -> dict[str, Any]:
    """One table row: the median pipeline and floor runs, alternating."""
    maps = tmp / f"maps-{name}-{probs}"
    if not maps.exists():  # the pipeline's own maps, for the floor to write (not timed)
        maps.mkdir()
        _measure("pipeline", 1, probs, True, tile=tile, checkpoint=checkpoint, scratch=maps)
    made = next(p for p in maps.iterdir() if p.is_dir())
    pipeline, floor = [], []
    for _ in range(repeats):
        pipeline.append(
            _measure(
                "pipeline",
                threads,
                probs,
                False,
                settings,
                tile=tile,
                checkpoint=checkpoint,
                scratch=tmp,
            )
        )
        floor.append(
            _measure("floor", threads, probs, False, settings, tile=tile, maps=made, scratch=tmp)
        )
    mpx = _megapixels(tile)
    best = _median_run(pipeline)  # with its stage split
    floor_s = statistics.median_low(r["seconds"] for r in floor)
    row: dict[str, Any] = {
        "input": name,
        "outputs": "class+prob" if probs else "class",
        "threads": threads,
        "settings": settings,
        "pipeline_s": round(best["seconds"], 2),
        "mpx_s": round(mpx / best["seconds"], 2),
        "mpx_s_per_core": round(mpx / best["seconds"] / threads, 2),
        "floor_s": round(floor_s, 2),
        "ratio": round(floor_s / best["seconds"], 3),
        "cpu_s": round(best["cpu_seconds"], 2),
    }
    for stage in STAGES:
        row[f"{stage}_s"] = round(best.get(f"{stage}_s", 0.0), 2)
    row["wall_per_tile_s"] = ""  # the sustained rows' (here: pipeline_s)
    return row


def _median_run(runs: list[dict[str, Any]], key: str = "seconds") -> dict[str, Any]:
    """The median run by ``key`` (the lower one of an even count)."""
    return sorted(runs, key=lambda r: r[key])[(len(runs) - 1) // 2]


def _megapixels(tile: Path) -> float:
    """The tile's pixels in millions."""
    with rasterio.open(tile) as ds:
        return ds.width * ds.height / 1e6


def _sustained_row(
    tile: Path, checkpoint: Path, name: str, threads: int, repeats: int, tmp: Path
) -> dict[str, Any]:
    """One table row: the median of sustained runs (class + probabilities).

    ``pipeline_s`` is the steady state's seconds per tile (the spacing of finished tiles),
    ``mpx_s`` its speed; ``wall_per_tile_s`` the whole run's wall seconds per tile, with the
    first tile's start and the last one's drain (a region of hundreds of tiles has one each).
    """
    runs = [
        _measure("sustained", threads, True, tile=tile, checkpoint=checkpoint, scratch=tmp)
        for _ in range(repeats)
    ]
    best, mpx = _median_run(runs, "steady_seconds"), _megapixels(tile)
    row: dict[str, Any] = {
        "input": name,
        "outputs": "class+prob",
        "threads": threads,
        "settings": SUSTAINED,
        "pipeline_s": round(best["steady_seconds"], 2),
        "mpx_s": round(mpx / best["steady_seconds"], 2),
        "mpx_s_per_core": round(mpx / best["steady_seconds"] / threads, 2),
        "floor_s": "",  # the floor and the stage split are the single tile's rows
        "ratio": "",
        "cpu_s": round(best["cpu_seconds"], 2),
    }
    row.update({f"{stage}_s": "" for stage in STAGES})
    row["wall_per_tile_s"] = round(best["seconds"], 2)
    return row


def goals(rows: list[dict[str, Any]], threads: int) -> list[Goal]:
    """The issue's goals from the table's rows.

    Args:
        rows: The rows of :func:`run`.
        threads: The most threads measured.

    Returns:
        The goals.
    """
    found: list[Goal] = []
    for r in rows:  # what the process settings are for (reported, no goal)
        if r["settings"] != "default":
            continue
        tuned = next(
            o
            for o in rows
            if o["settings"] == "tuned"
            and o["threads"] == r["threads"]
            and (o["input"], o["outputs"]) == (r["input"], r["outputs"])
        )
        found.append(
            Goal(
                "ceiling",
                f"pipeline Mpx/s, landcover's / default process settings, {r['input']}, "
                f"{r['outputs']}",
                round(tuned["mpx_s"] / r["mpx_s"], 2),
                "report",
                None,
                f"{r['threads']} thread{'s' if r['threads'] > 1 else ''}",
            )
        )
    found += _scaling_goals([r for r in rows if r["settings"] == SUSTAINED], threads)
    rows = [r for r in rows if r["settings"] == "tuned"]
    top = [r for r in rows if r["threads"] == threads]
    for r in top:
        found.append(
            Goal(
                "ceiling",
                f"predict (stand-in model) / I/O floor, {r['input']} input, {r['outputs']}",
                r["ratio"],
                f">= {RATIO_GOAL}",
                r["ratio"] >= RATIO_GOAL,
                f"{threads} threads",
            )
        )
    found += _scaling_goals(rows, threads)
    for r in top:  # GDAL alone writing the same COGs: the bound on a single tile's scaling
        one = _one_thread_row(rows, r)
        if one is None or threads < 2:
            continue
        found.append(
            Goal(
                "ceiling",
                f"I/O floor 2 threads / 1 thread, {r['input']} input, {r['outputs']}",
                round(one["floor_s"] / r["floor_s"], 2),
                "report",
                None,
                f"{one['floor_s']} -> {r['floor_s']} s",
            )
        )
    for r in rows:
        if r["threads"] != 1 or r["input"] != "deflate":
            continue
        node = round(r["mpx_s_per_core"] * NODE_CORES, 1)
        found.append(
            Goal(
                "ceiling",
                f"Mpx/s per node at {NODE_CORES} cores (1-core figure x {NODE_CORES}), "
                f"{r['outputs']}",
                node,
                f">= {MOONSHOT_MPX_S:g}",
                node >= MOONSHOT_MPX_S,
                f"{r['mpx_s_per_core']} Mpx/s per core",
            )
        )
    return found


def _one_thread_row(rows: list[dict[str, Any]], row: dict[str, Any]) -> dict[str, Any] | None:
    """The 1-thread row of ``row``'s input and output set, among ``rows`` of one kind."""
    same = (row["input"], row["outputs"])
    return next((o for o in rows if o["threads"] == 1 and (o["input"], o["outputs"]) == same), None)


def _scaling_goals(rows: list[dict[str, Any]], threads: int) -> list[Goal]:
    """2 threads / 1 thread per input and output set, from rows of one kind (single tile or
    sustained)."""
    found = []
    for r in rows:
        one = _one_thread_row(rows, r)
        if one is None or r["threads"] != threads or threads < 2:
            continue
        scaling = round(r["mpx_s"] / one["mpx_s"], 2)
        sustained = (
            f", {SUSTAINED_TILES} tiles back to back, steady state"
            if r["settings"] == SUSTAINED
            else ""
        )
        found.append(
            Goal(
                "ceiling",
                f"predict 2 threads / 1 thread, {r['input']} input, {r['outputs']}{sustained}",
                scaling,
                f">= {SCALING_GOAL}",
                scaling >= SCALING_GOAL,
                f"{one['mpx_s']} -> {r['mpx_s']} Mpx/s" if sustained else "",
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help=f"results folder (default {RESULTS})")
    parser.add_argument("--cache", type=Path, help="keep the tiles and checkpoint here")
    # one measurement in a child process (internal)
    parser.add_argument(
        "--child", choices=("pipeline", "floor", "sustained"), help=argparse.SUPPRESS
    )
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--probs", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keep-maps", action="store_true", help=argparse.SUPPRESS)
    for key in ("tile", "checkpoint", "maps", "scratch"):
        parser.add_argument(f"--{key}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    run(args.quick, out, args.cache, args.repeats)


if __name__ == "__main__":
    main()
