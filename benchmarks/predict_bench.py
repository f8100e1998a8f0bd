"""Predict benchmark: throughput against the bare forward pass, peak memory, and TTA.

The default model (configs/default.yaml: ResNet-34 U-Net; ``--quick``: the CPU config's
ResNet-18 U-Net) with random weights (speed and memory do not depend on the weights) predicts
synthetic 4-band uint8 NAIP GeoTIFFs written here: 2,000 x 2,000 and 6,000 x 7,500 px (11.25x
the area), with predict's default window, overlap and batch, no preview.

Throughput (the goal: predict >= 0.8 of the bare forward). The large tile is predicted in
rounds: ``landcover predict`` in its own process, then the same per-tile code in this process
with every stage timed (:mod:`predict_profile`), then the command again (``--quick``: one
round). A round's ``tile_seconds`` is the tile's own time, from opening it to its COGs renamed
into place (predict's log line; in this process the same span, timed here); interpreter start,
imports and the checkpoint load are paid once per job and are reported as ``process_seconds``
only. Before the first round and after each one, the bare forward is sampled: the model call
predict makes (``model(prepare(batch))``, the model loaded the same way, the same window,
batch and memory format), a fixed number of calls per batch shape predict runs. A round's
``forward_seconds`` is, per batch shape, the number of calls predict makes on the tile times
the median of the samples taken just before and just after it, so predict and the forward are
compared side by side while other work on a shared machine comes and goes. ``ratio`` =
``forward_seconds / tile_seconds`` (predict's tile Mpx/s over the bare forward's on the same
windows); the goal is the median over the rounds. The in-process round adds the split of the
tile's time by stage (``predict_stages``), its process CPU seconds against the forward's CPU
seconds, and ``ratio`` without the COG conversion after the last strip (``steady``: what a
job of many tiles approaches, where that conversion overlaps the next tile's prediction).

On a machine with a CUDA GPU (``scripts/gpu-check.sh`` runs ``--quick``), the large tile is
also predicted on the GPU with the real default model whatever ``--quick`` says, once with the
probability map and once with ``--no-probs``, COGs written: one GPU's Mpx/s for each (report
rows), and the ratio to the bare forward with probabilities (a goal). Then a folder of 16 copies
of that tile is mapped by 1, 4 and 8 workers sharing the one GPU (previews on, as a region job
writes them), GDAL on every core in each worker (predict's default), and by 4 workers with
GDAL capped at each worker's share of the cores: the job's Mpx/s for each (``summary.json``'s
job seconds). On one H100 a single worker kept the GPU busy about a tenth of the time.
``--only gpu`` runs the GPU rounds alone.

Memory (the goal: <= 1.5x for 11.25x the area): peak resident memory of ``landcover predict``
on each tile, each in its own process (the kernel's rusage of that process alone).

TTA: a CPU-config model trained briefly on synthetic tiles (once; the checkpoint is cached in
the cache folder) evaluates unseen synthetic tiles (another seed) without TTA and with
``--tta d4`` (all 8 D4 transforms, probabilities averaged), alternately, twice each: mIoU,
pixel accuracy, seconds; the gain and the time ratio (medians) are reported.

Usage: python benchmarks/predict_bench.py [--quick] [--out benchmarks/results] [--cache DIR]
                                         [--only all|speed|tta|gpu]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import torch
from rio_cogeo.cogeo import cog_validate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results
from predict_profile import profile_tile

from landcover.checkpoint import Checkpoint
from landcover.config import load_config
from landcover.data.pairs import discover_pairs
from landcover.fileio import atomic_write_bytes
from landcover.inference.evaluate import evaluate_pairs
from landcover.inference.loader import InferenceModel, load_inference_model
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.inference.tta import parse_tta
from landcover.models import build_model
from landcover.parallel.devices import autocast
from landcover.synthetic.synthetic import synthesize_scene, write_pair, write_synthetic_dataset
from landcover.threads import GDAL_ENV, core_share

REPO = Path(__file__).resolve().parents[1]
MEMORY_GOAL = 1.5
RATIO_GOAL = 0.8
SMALL = (2000, 2000)
"""Height and width of the small tile."""
LARGE = (7500, 6000)
"""Height and width of the large tile (6,000 x 7,500: 11.25x the small tile's area)."""


def make_checkpoint(config_file: Path, folder: Path) -> Path:
    """A checkpoint of the config's model with random weights (seed 0)."""
    config = load_config(config_file, {"run.device": "cpu"})
    if config.data.stats_auto:  # an untrained model: any normalisation times the same
        n = len(config.data.bands)
        config = config.replace(data=config.data.replace(mean=[0.5] * n, std=[0.25] * n))
    torch.manual_seed(0)
    model = build_model(config.model, len(config.data.bands), config.data.classes.num_classes)
    path = folder / f"{config_file.stem}.pt"
    atomic_write_bytes(path, Checkpoint(model.state_dict(), config.to_dict()).serialize())
    return path


def make_tile(height: int, width: int, folder: Path) -> Path:
    """A synthetic NAIP GeoTIFF (4 bands, uint8) of that size, written once into ``folder``."""
    path = folder / f"bench{height}x{width}_naip.tif"
    if not path.exists():
        image, label = synthesize_scene(height, width, np.random.default_rng(height + width))
        write_pair(folder, f"bench{height}x{width}", image, label, (400000.0, 4400000.0))
    return path


@dataclass
class PredictRun:
    """``landcover predict`` of one tile in its own process.

    Attributes:
        process_seconds: The whole command.
        tile_seconds: The tile's own time as predict logs it (opening it to its maps in place).
        peak_rss_mb: Peak resident memory of the predict process.
    """

    process_seconds: float
    tile_seconds: float
    peak_rss_mb: float


def run_predict(
    tile: Path, checkpoint: Path, out: Path, device: str = "cpu", probs: bool = True
) -> PredictRun:
    """Runs ``landcover predict`` on one tile in its own process.

    Args:
        tile: The tile.
        checkpoint: The checkpoint.
        out: Output folder (maps of an earlier run are overwritten).
        device: ``cpu`` or ``cuda``.
        probs: Write the probability map too (``--no-probs`` when False).

    Returns:
        Its times and peak memory.

    Raises:
        SystemExit: If predict fails or does not log the tile's time.
    """
    cmd = [
        sys.executable, "-m", "landcover", "predict", str(tile), "--checkpoint", str(checkpoint),
        "--out", str(out), "--device", device, "--no-preview",
        "--overwrite",  # the maps of an earlier run would be skipped as complete
        *([] if probs else ["--no-probs"]),
    ]  # fmt: skip
    start = time.perf_counter()
    # Linux carries a process's peak RSS across exec, so a child forked from this (large)
    # process would report this process's size: a small intermediate process forks predict
    # and reports the peak of predict alone.
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *cmd], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"predict failed: {result.stderr[-2000:]}")
    logged = re.search(r"\(([\d.]+) Mpx in ([\d.]+) s,", result.stderr)
    if logged is None:
        raise SystemExit(f"predict did not log the tile's time: {result.stderr[-2000:]}")
    return PredictRun(seconds, float(logged.group(2)), int(result.stdout.split()[-1]) / 1024)


_PEAK_RSS = (
    "import os, subprocess, sys\n"
    "proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(proc.pid, 0)\n"
    "print(usage.ru_maxrss)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def forward_calls(im: InferenceModel, tile: Path) -> Counter[int]:
    """The forward calls predict makes on a tile: how many of each batch size.

    Args:
        im: The model, as predict loads it.
        tile: The tile.

    Returns:
        ``{windows in the batch: calls}``.
    """
    window, overlap, batch = resolve_geometry(im.config.data.patch_size)
    with rasterio.open(tile) as ds:
        plan = SlidingWindowPredictor(im.model, window, overlap, batch, im.prepare, im.device).plan(
            ds.height, ds.width
        )
    columns = len(plan.xs)
    sizes = [min(batch, columns - j) for j in range(0, columns, batch)]
    return Counter(size for _ in plan.ys for size in sizes)


@dataclass
class ForwardSample:
    """Timed bare forward calls, per batch size.

    Attributes:
        seconds: ``{batch size: wall seconds of each call}``.
        cpu: ``{batch size: process CPU seconds of each call}``.
    """

    seconds: dict[int, list[float]] = field(default_factory=dict)
    cpu: dict[int, list[float]] = field(default_factory=dict)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_forward(im: InferenceModel, sizes: Counter[int], repeats: int) -> ForwardSample:
    """Times the bare model call predict makes, ``repeats`` times for each batch size.

    Args:
        im: The model, as predict loads it (device, memory format, autocast).
        sizes: Batch sizes (as from :func:`forward_calls`).
        repeats: Timed calls per batch size (after one warm-up call).

    Returns:
        The sample.
    """
    window, _, _ = resolve_geometry(im.config.data.patch_size)
    cuda = im.device.type == "cuda"
    sample = ForwardSample()
    with torch.no_grad():
        for size in sizes:
            x = torch.randint(0, 256, (size, window, window, im.bands), dtype=torch.uint8)
            x = x.to(im.device)
            sample.seconds[size], sample.cpu[size] = [], []
            for i in range(repeats + 1):
                if cuda:
                    torch.cuda.synchronize()
                start, cpu = time.perf_counter(), _cpu_seconds()
                with autocast(im.device, im.autocast_dtype):
                    im.model(im.prepare(x))
                if cuda:
                    torch.cuda.synchronize()
                if i:  # the first call warms up
                    sample.seconds[size].append(time.perf_counter() - start)
                    sample.cpu[size].append(_cpu_seconds() - cpu)
    return sample


def forward_estimate(
    calls: Counter[int], before: ForwardSample, after: ForwardSample
) -> tuple[float, float]:
    """The bare forward's wall and CPU seconds for predict's calls, from the samples around it.

    Args:
        calls: ``{batch size: calls}`` predict makes on the tile.
        before: The sample taken just before.
        after: The sample taken just after.

    Returns:
        ``(wall seconds, CPU seconds)``: per batch size, the calls times the median call.
    """
    wall = sum(
        n * statistics.median(before.seconds[b] + after.seconds[b]) for b, n in calls.items()
    )
    cpu = sum(n * statistics.median(before.cpu[b] + after.cpu[b]) for b, n in calls.items())
    return wall, cpu


def check_outputs(tile: Path, out: Path) -> bool:
    """Whether the class map is a valid COG on the tile's grid, with a colour table."""
    class_map = out / f"{tile.stem}_class.tif"
    valid, errors, _ = cog_validate(str(class_map))
    with rasterio.open(class_map) as c, rasterio.open(tile) as s:
        same = (
            c.crs == s.crs
            and c.transform == s.transform
            and (c.width, c.height) == (s.width, s.height)
        )
        has_colours = bool(c.colormap(1))
    return valid and not errors and same and has_colours


def tile_size(tile: Path) -> tuple[str, float]:
    """``("WxH", megapixels)`` of a tile."""
    with rasterio.open(tile) as ds:
        return f"{ds.width}x{ds.height}", ds.width * ds.height / 1e6


def throughput_rounds(
    im: InferenceModel,
    model: str,
    tile: Path,
    checkpoint: Path,
    cache: Path,
    quick: bool,
    probs: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Predicts the large tile in rounds, the bare forward sampled before and after each.

    Args:
        im: The model, loaded as predict loads it.
        model: The config's name.
        tile: The large tile.
        checkpoint: Its checkpoint.
        cache: Where the maps go.
        quick: One round (the command) and fewer forward calls per sample.
        probs: Write the probability map too (``--no-probs`` when False).

    The device is the model's (``im.device``).

    Returns:
        ``(rows, stages)``: one row per round, and the in-process round's stages.
    """
    window, overlap, batch = resolve_geometry(im.config.data.patch_size)
    calls = forward_calls(im, tile)
    windows = sum(b * n for b, n in calls.items())
    size, mpx = tile_size(tile)
    repeats = 3 if quick else 6
    kinds = ["command"] if quick else ["command", "in-process"]
    samples = [time_forward(im, calls, repeats)]
    rows: list[dict[str, Any]] = []
    stages: list[dict[str, Any]] = []
    for number, kind in enumerate(kinds, start=1):
        folder = cache / f"out-{model}-{kind}-{im.device.type}{'' if probs else '-class'}"
        load = os.getloadavg()[0]
        row: dict[str, Any] = {
            "round": number,
            "kind": kind,
            "model": model,
            "tile": size,
            "outputs": "class+prob" if probs else "class",
        }
        if kind == "command":
            run = run_predict(tile, checkpoint, folder, im.device.type, probs)
            tile_seconds, publish, tile_cpu = run.tile_seconds, None, None
            row["process_seconds"] = round(run.process_seconds, 1)
            row["peak_rss_mb"] = round(run.peak_rss_mb)
        else:
            profile = profile_tile(str(tile), im, str(folder), probs=probs)
            tile_seconds, tile_cpu = profile.wall, profile.cpu
            publish = profile.stages["publish"][0]
            row["process_seconds"], row["peak_rss_mb"] = None, None
            stages = profile.rows()
        samples.append(time_forward(im, calls, repeats))
        forward, forward_cpu = forward_estimate(calls, samples[-2], samples[-1])
        row.update(
            {
                "window": window,
                "overlap": overlap,
                "batch": batch,
                "mpx": round(mpx, 1),
                "windows_mpx": round(windows * window * window / 1e6, 1),
                "load_before": round(load, 1),
                "tile_seconds": round(tile_seconds, 1),
                "forward_seconds": round(forward, 1),
                "mpx_per_s": mpx / tile_seconds,
                "forward_mpx_per_s": mpx / forward,
                "ratio": forward / tile_seconds,
                "steady_ratio": None if publish is None else forward / (tile_seconds - publish),
                "cpu_ratio": None if tile_cpu is None else forward_cpu / tile_cpu,
                "cog_ok": check_outputs(tile, folder),
            }
        )
        rows.append(row)
    return rows, stages


TTA_SPEC = "d4"
"""The TTA measured against none."""


def tta_model(cache: Path, quick: bool) -> Path:
    """A CPU-config model trained briefly on synthetic tiles (trained once, then cached).

    Args:
        cache: The cache folder.
        quick: Train less (a separate cached model).

    Returns:
        Its checkpoint (a run that stopped early is resumed).

    Raises:
        SystemExit: If training fails.
    """
    epochs = 1 if quick else 2
    run = cache / f"tta-cpu-{epochs}ep"
    checkpoint = run / "checkpoints" / "last.pt"
    if checkpoint.is_file() and load_inference_model(checkpoint, "cpu").epoch == epochs:
        return checkpoint
    data = cache / "tta-train"
    if not data.is_dir():
        write_synthetic_dataset(data, tiles=16, size=512, seed=0)
    cmd = [
        sys.executable, "-m", "landcover", "train", "--config", str(REPO / "configs" / "cpu.yaml"),
        "--data", str(data), "--out", str(run), "--epochs", str(epochs), "--workers", "1",
        "--samples-per-epoch", "512",
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not checkpoint.is_file():
        raise SystemExit(f"training the TTA model failed: {result.stderr[-2000:]}")
    return checkpoint


def tta_rows(cache: Path, quick: bool) -> list[dict[str, Any]]:
    """mIoU and seconds of ``evaluate`` on unseen synthetic tiles without and with TTA.

    Without and with TTA alternate, twice each (``quick``: once); the seconds are the
    medians (the metrics are the same every time).
    """
    checkpoint = tta_model(cache, quick)
    unseen = cache / "tta-unseen"
    if not unseen.is_dir():
        write_synthetic_dataset(unseen, tiles=6, size=512, seed=2024)
    im = load_inference_model(checkpoint, "cpu")
    pairs = discover_pairs(str(unseen), im.config.data.image_suffix, im.config.data.label_suffix)
    specs = ("none", TTA_SPEC) * (1 if quick else 2)
    metrics: dict[str, dict[str, Any]] = {}
    seconds: dict[str, list[float]] = {spec: [] for spec in specs}
    for spec in specs:
        metrics[spec] = evaluate_pairs(
            pairs, im, str(cache / f"tta-eval-{spec}"), None, None, None, parse_tta(spec)
        )
        seconds[spec].append(metrics[spec]["seconds"])
    return [
        {
            "tta": spec,
            "transforms": len(parse_tta(spec)),
            "tiles": len(pairs),
            "mpx": round(metrics[spec]["pixels"] / 1e6, 2),
            "epochs": im.epoch,
            "miou": metrics[spec]["miou"],
            "accuracy": metrics[spec]["accuracy"],
            "seconds": round(statistics.median(seconds[spec]), 2),
            "repeats": len(seconds[spec]),
        }
        for spec in dict.fromkeys(specs)
    ]


SHARED_WORKERS: tuple[tuple[int, bool], ...] = ((1, False), (4, False), (8, False), (4, True))
"""The jobs of :func:`shared_device_rounds`: workers sharing one GPU, and whether each worker's
GDAL threads are capped at its share of the cores (``GDAL_NUM_THREADS``; predict's own choice
is every core, ``ALL_CPUS``, since this measurement: 29.6 against 27.2 Mpx/s capped, 4 workers
on one H100, 2026-11-27)."""

SHARED_TILES = 16
"""Copies of the large tile each shared job maps (2 for each of 8 workers)."""


def run(
    quick: bool,
    out: Path,
    cache: Path | None = None,
    only: str = "all",
    shared: tuple[tuple[int, bool], ...] | None = None,
    shared_tiles: int = SHARED_TILES,
) -> list[Goal]:
    """Runs the predict benchmark part.

    Args:
        quick: The CPU config's model, one round, a shorter-trained TTA model.
        out: Results folder.
        cache: Where the synthetic tiles, models and outputs go (default: the temp folder).
        only: ``all``, ``speed`` (throughput and memory: ``predict.*``, ``predict_stages.*``),
            ``tta`` (``predict_tta.*``) or ``gpu`` (the GPU rounds alone, ``predict.*``:
            ``scripts/gpu-check.sh`` spends a lent GPU's minutes on what only it measures).
        shared: The GPU part's shared-GPU jobs (default :data:`SHARED_WORKERS`).
        shared_tiles: Copies of the large tile each shared job maps.

    Returns:
        The goals: memory growth and predict / forward ratio (on the GPU too when there is
        one); TTA's mIoU gain and time ratio (reported).

    Raises:
        SystemExit: ``only="gpu"`` where torch sees no CUDA GPU.
    """
    cache = cache or Path(tempfile.gettempdir()) / "landcover-bench"
    cache.mkdir(parents=True, exist_ok=True)
    if only == "gpu":
        if not torch.cuda.is_available():
            raise SystemExit("error: --only gpu needs a CUDA GPU; torch sees none here")
        return gpu_goals(out, cache, shared=shared or SHARED_WORKERS, tiles=shared_tiles)
    goals = speed_goals(quick, out, cache) if only in ("all", "speed") else []
    if only in ("all", "tta"):
        goals += tta_goals(quick, out, cache)
    return goals


def speed_goals(quick: bool, out: Path, cache: Path) -> list[Goal]:
    """Throughput against the bare forward, and memory; writes ``predict.*``."""
    config_file = REPO / "configs" / ("cpu.yaml" if quick else "default.yaml")
    model = config_file.stem
    checkpoint = make_checkpoint(config_file, cache)
    small, large = make_tile(*SMALL, cache), make_tile(*LARGE, cache)
    im = load_inference_model(checkpoint, "cpu")

    small_run = run_predict(small, checkpoint, cache / f"out-{model}-small")
    rounds, stages = throughput_rounds(im, model, large, checkpoint, cache, quick)
    if torch.cuda.is_available():
        rounds += device_rounds(large, cache)
    cpu_rounds = [r for r in rounds if "cuda" not in r["kind"]]
    large_rss = max(r["peak_rss_mb"] for r in cpu_rounds if r["peak_rss_mb"] is not None)
    growth = large_rss / small_run.peak_rss_mb
    small_size, _ = tile_size(small)
    memory = [
        {"model": model, "tile": small_size, "peak_rss_mb": round(small_run.peak_rss_mb)},
        {"model": model, "tile": cpu_rounds[0]["tile"], "peak_rss_mb": round(large_rss)},
    ]
    goals = [
        Goal(
            "predict",
            f"peak memory growth for 11.25x the area ({model} model)",
            round(growth, 2),
            f"<= {MEMORY_GOAL}",
            growth <= MEMORY_GOAL,
            f"{memory[0]['peak_rss_mb']} -> {memory[1]['peak_rss_mb']} MB (peak RSS of the "
            "predict process)",
        ),
        ratio_goal(cpu_rounds, "cpu"),
    ]
    gpu_rounds = [r for r in rounds if "cuda" in r["kind"] and r["outputs"] == "class+prob"]
    if gpu_rounds:
        goals.append(ratio_goal(gpu_rounds, "cuda"))
    goals += device_reports([r for r in rounds if "cuda" in r["kind"]])
    extra = {
        "goal_memory_growth": MEMORY_GOAL,
        "goal_ratio": RATIO_GOAL,
        "memory": memory,
        "small_tile_seconds": small_run.tile_seconds,
        "stages": stages,
    }
    write_results("predict", rounds, extra, out, goals)
    if stages:
        write_results("predict_stages", stages, {"tile": cpu_rounds[0]["tile"]}, out)
    return goals


def gpu_goals(
    out: Path,
    cache: Path,
    device: str = "cuda",
    shared: tuple[tuple[int, bool], ...] = (),
    tiles: int = SHARED_TILES,
) -> list[Goal]:
    """The GPU rounds alone (:func:`device_rounds`); writes ``predict.*``.

    Args:
        out: Results folder.
        cache: Where the tile, the checkpoint and the maps go.
        device: ``cuda`` (``cpu`` only to try the code path on a machine without a GPU).
        shared: The shared-GPU jobs of :func:`shared_device_rounds` (none: skipped).
        tiles: Copies of the tile each shared job maps.

    Returns:
        The ratio to the bare forward (with probabilities) and one Mpx/s report per round.
    """
    tile = make_tile(*LARGE, cache)
    rounds = device_rounds(tile, cache, device)
    goals = [ratio_goal([r for r in rounds if r["outputs"] == "class+prob"], device)]
    goals += device_reports(rounds)
    shared_rows = shared_device_rounds(tile, cache, device, shared, tiles) if shared else []
    goals += [
        Goal(
            "predict",
            f"predict Mpx/s on one GPU shared by {r['workers']} worker(s), {r['tiles']} tiles, "
            f"class+prob, COGs and previews written, GDAL threads {r['gdal_threads']}",
            round(r["mpx_per_s"], 2),
            "report",
            None,
            f"{r['tile']} tiles; job {r['job_seconds']:.1f} s",
        )
        for r in shared_rows
    ]
    extra = {"goal_ratio": RATIO_GOAL, "shared": shared_rows}
    write_results("predict", rounds, extra, out, goals)
    return goals


def shared_device_rounds(
    tile: Path,
    cache: Path,
    device: str = "cuda",
    jobs: tuple[tuple[int, bool], ...] = SHARED_WORKERS,
    tiles: int = SHARED_TILES,
) -> list[dict[str, Any]]:
    """``landcover predict`` over a folder of copies of the tile with 1, 4 and 8 workers on
    one device (on CUDA they share the GPU, round-robin over one): the job's Mpx/s.

    One worker's host work keeps a GPU busy about a tenth of the time; this measures how far
    more workers on the same GPU close that gap, and whether capping each worker's GDAL threads
    at its share of the cores beats GDAL on every core in every worker (predict's default).

    Args:
        tile: The large tile.
        cache: Where the checkpoint, the folder of tiles and the maps go.
        device: ``cuda`` (``cpu`` only to try the code path on a machine without a GPU).
        jobs: ``(workers, GDAL threads capped at the worker's share)``, one job each.
        tiles: Copies of the tile in the folder each job maps.

    Returns:
        One row per job: workers, GDAL threads, tiles, job seconds (``summary.json``), Mpx/s.

    Raises:
        SystemExit: If a job fails.
    """
    checkpoint = make_checkpoint(REPO / "configs" / "default.yaml", cache)
    folder = cache / f"shared-tiles-{tiles}"
    folder.mkdir(exist_ok=True)
    for i in range(tiles):
        copy = folder / f"copy{i:02d}_naip.tif"
        if not copy.exists():
            os.link(tile, copy)
    rows = []
    for n, capped in jobs:
        threads = str(core_share(n)) if capped else "ALL_CPUS"
        out = cache / f"out-shared-{device}-{n}-{threads}"
        cmd = [
            sys.executable, "-m", "landcover", "predict", str(folder), "--checkpoint",
            str(checkpoint), "--out", str(out), "--device", device, "--workers", str(n),
            "--overwrite",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != GDAL_ENV}
        if capped:
            env[GDAL_ENV] = threads
        result = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if result.returncode != 0:
            raise SystemExit(f"predict with {n} workers failed: {result.stderr[-2000:]}")
        summary = json.loads((out / "summary.json").read_text())
        mpx = sum(t["mpx"] for t in summary["tiles"])
        seconds = summary["job"]["seconds"]
        rows.append(
            {
                "workers": n,
                "gdal_threads": threads,
                "tiles": tiles,
                "tile": tile_size(tile)[0],
                "device": device,
                "job_seconds": round(seconds, 2),
                "mpx_per_s": mpx / seconds,
            }
        )
        print(f"  {n} worker(s) on one {device}, GDAL {threads}: {mpx / seconds:.2f} Mpx/s")
    return rows


def device_reports(rounds: list[dict[str, Any]]) -> list[Goal]:
    """One report goal per round of :func:`device_rounds`: its Mpx/s, COGs written."""
    return [
        Goal(
            "predict",
            f"predict Mpx/s on one GPU, {r['model']} model, {r['outputs']}, COGs written",
            round(r["mpx_per_s"], 2),
            "report",
            None,
            f"{r['tile']} tile; bare forward {r['forward_mpx_per_s']:.2f} Mpx/s",
        )
        for r in rounds
    ]


def tta_goals(quick: bool, out: Path, cache: Path) -> list[Goal]:
    """TTA's mIoU gain and time ratio; writes ``predict_tta.*``."""
    tta = tta_rows(cache, quick)
    plain, augmented = tta
    gain = augmented["miou"] - plain["miou"]
    cost = augmented["seconds"] / plain["seconds"]
    goals = [
        Goal(
            "predict",
            f"TTA {TTA_SPEC} ({augmented['transforms']} transforms): mIoU gain on unseen "
            "synthetic tiles",
            round(gain, 4),
            "report",
            None,
            f"mIoU {plain['miou']:.4f} -> {augmented['miou']:.4f}, accuracy "
            f"{plain['accuracy']:.4f} -> {augmented['accuracy']:.4f}; CPU-config model trained "
            f"{plain['epochs']} epochs; {plain['tiles']} tiles, {plain['mpx']} Mpx",
        ),
        Goal(
            "predict",
            f"TTA {TTA_SPEC}: evaluate time / without TTA",
            round(cost, 2),
            "report",
            None,
            f"medians of {plain['repeats']} alternating runs each",
        ),
    ]
    write_results("predict_tta", tta, {}, out, goals)
    return goals


def device_rounds(tile: Path, cache: Path, device: str = "cuda") -> list[dict[str, Any]]:
    """predict on the device with the real default model (``configs/default.yaml``, random
    weights), with and without the probability map, one round each.

    Args:
        tile: The large tile.
        cache: Where the checkpoint and maps go.
        device: ``cuda`` (``cpu`` only to try the code path on a machine without a GPU).

    Returns:
        The rows, their ``kind`` ending in the device.
    """
    checkpoint = make_checkpoint(REPO / "configs" / "default.yaml", cache)
    im = load_inference_model(checkpoint, device)
    rows = []
    for probs in (True, False):
        made, _ = throughput_rounds(im, "default", tile, checkpoint, cache, True, probs)
        rows += [{**r, "kind": f"{r['kind']} {device}"} for r in made]
    del im
    return rows


def ratio_goal(rounds: list[dict[str, Any]], device: str) -> Goal:
    """The predict / bare forward goal: the median of the rounds' ratios."""
    ratio = statistics.median(r["ratio"] for r in rounds)
    first = rounds[0]
    each = ", ".join(f"{r['ratio']:.2f}" for r in rounds)
    steady = [r["steady_ratio"] for r in rounds if r["steady_ratio"] is not None]
    cpu = [r["cpu_ratio"] for r in rounds if r["cpu_ratio"] is not None]
    more = ""
    if steady:
        more = f"; without the final COG conversion {steady[0]:.2f}, CPU seconds {cpu[0]:.2f}"
    return Goal(
        "predict",
        f"predict / bare forward on the same windows, {first['tile']} ({first['model']} model, "
        f"{device})",
        round(ratio, 2),
        f">= {RATIO_GOAL}",
        ratio >= RATIO_GOAL,
        f"median of {len(rounds)} rounds ({each}){more}; "
        f"{statistics.median(r['mpx_per_s'] for r in rounds):.2f} vs "
        f"{statistics.median(r['forward_mpx_per_s'] for r in rounds):.2f} tile Mpx/s; window "
        f"{first['window']} batch {first['batch']}; COG ok {all(r['cog_ok'] for r in rounds)}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CPU-config model, one round")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "landcover-bench"
    )
    parser.add_argument("--only", choices=("all", "speed", "tta", "gpu"), default="all")
    parser.add_argument(
        "--shared-jobs",
        type=parse_shared_jobs,
        default=None,
        help="the GPU part's shared-GPU jobs, e.g. '1,4,8,4c': workers per job, 'c' to cap "
        "each worker's GDAL threads at its share of the cores (default: 1,4,8,4c)",
    )
    parser.add_argument(
        "--shared-tiles",
        type=int,
        default=SHARED_TILES,
        help=f"copies of the large tile each shared-GPU job maps (default {SHARED_TILES})",
    )
    args = parser.parse_args()
    run(args.quick, args.out, args.cache, args.only, args.shared_jobs, args.shared_tiles)


def parse_shared_jobs(text: str) -> tuple[tuple[int, bool], ...]:
    """``--shared-jobs``: ``'4,8,4c'`` to ``((4, False), (8, False), (4, True))``.

    Args:
        text: Comma-separated worker counts, each with an optional ``c`` (GDAL capped).

    Returns:
        The jobs, in the order given.

    Raises:
        argparse.ArgumentTypeError: If an item is not a positive count.
    """
    jobs = []
    for item in text.split(","):
        item = item.strip().lower()
        capped = item.endswith("c")
        count = item.removesuffix("c")
        if not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(f"'{item}' is not a worker count (e.g. 4 or 4c)")
        jobs.append((int(count), capped))
    return tuple(jobs)


if __name__ == "__main__":
    main()
