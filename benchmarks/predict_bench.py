"""Predict benchmark: throughput against the bare forward pass, peak memory, and TTA.

For a 2,000 x 2,000 and a 6,000 x 7,500 synthetic NAIP tile (11x the area), `landcover
predict` runs in its own process (``--no-preview``), for the default model (configs/default.yaml:
ResNet-34 U-Net) and the CPU config's model, both with random weights (speed and memory do not
depend on the weights). Measured per tile:

- peak resident memory of the predict process (the kernel's rusage of that process);
- ``tile_seconds``: the tile's own time in predict, from opening it to its COGs renamed into
  place (predict's log line), and ``process_seconds``: the whole command (interpreter start,
  imports, checkpoint load: paid once per job, not per tile);
- ``forward_seconds``: the bare forward pass on the same windows: the model call predict makes
  (``model(prepare(batch))``, same model loaded the same way, same window, batch and memory
  format) timed for every batch shape predict runs on that tile, the median of repeats taken
  before and after the predict run (so drift in a shared machine's load shows in both),
  times the number of calls. Predict computes ``windows_mpx`` (overlapping windows, 1.3x the
  tile's pixels here), so this is the time predict cannot go below with the same windows;
- ``predict_over_forward = forward_seconds / tile_seconds`` (the goal: >= 0.8; equivalently
  predict's tile Mpx/s over the bare forward's tile Mpx/s on the same windows), and
  ``process_over_forward = forward_seconds / process_seconds``;
- a check of the class map (valid COG, same CRS / transform / size, colour table).

With a GPU, the default model predicts the large tile on it too (Mpx/s and the same ratios).

The ``tta`` rows: a CPU-config model trained briefly on synthetic tiles (once; the checkpoint is
cached in the cache folder) is evaluated on unseen synthetic tiles without and with ``--tta
d4``: mIoU, pixel accuracy, seconds; the gain and the time ratio are reported.

Usage: python benchmarks/predict_bench.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import rasterio
import torch
from rio_cogeo.cogeo import cog_validate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results

from landcover.checkpoint import Checkpoint
from landcover.config import load_config
from landcover.data.pairs import discover_pairs
from landcover.data.synthetic import synthesize_scene, write_pair, write_synthetic_dataset
from landcover.fileio import atomic_write_bytes
from landcover.inference.evaluate import evaluate_pairs
from landcover.inference.loader import InferenceModel, load_inference_model
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.inference.tta import parse_tta
from landcover.models import build_model
from landcover.parallel.devices import autocast

REPO = Path(__file__).resolve().parents[1]
MEMORY_GOAL = 1.5
RATIO_GOAL = 0.8


def make_checkpoint(config_file: Path, folder: Path) -> Path:
    config = load_config(config_file, {"run.device": "cpu"})
    if config.data.stats_auto:  # an untrained model: any normalisation times the same
        config.data.mean = [0.5] * len(config.data.bands)
        config.data.std = [0.25] * len(config.data.bands)
    torch.manual_seed(0)
    model = build_model(config.model, len(config.data.bands), config.data.classes.num_classes)
    path = folder / f"{config_file.stem}.pt"
    atomic_write_bytes(path, Checkpoint(model.state_dict(), config.to_dict()).serialize())
    return path


def make_tile(height: int, width: int, folder: Path) -> Path:
    path = folder / f"bench{height}x{width}_naip.tif"
    if not path.exists():
        image, label = synthesize_scene(height, width, np.random.default_rng(height + width))
        write_pair(folder, f"bench{height}x{width}", image, label, (400000.0, 4400000.0))
    return path


def run_predict(
    tile: Path, checkpoint: Path, out: Path, device: str = "cpu"
) -> tuple[float, float, float]:
    """Runs predict in its own process.

    Returns:
        ``(process seconds, tile seconds, peak RSS in MB)``: the whole command, the tile's own
        time as predict logs it (opening the tile to its maps in place), and the peak memory
        of the predict process.
    """
    cmd = [
        sys.executable,
        "-m",
        "landcover",
        "predict",
        str(tile),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(out),
        "--device",
        device,
        "--no-preview",
        "--overwrite",  # the maps of an earlier run would be skipped as complete
    ]
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
    return seconds, float(logged.group(2)), int(result.stdout.split()[-1]) / 1024


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


def time_forward(im: InferenceModel, sizes: Counter[int], repeats: int) -> dict[int, list[float]]:
    """Times the bare model call predict makes, ``repeats`` times for each batch size.

    Args:
        im: The model, as predict loads it (device, memory format, autocast).
        sizes: Batch sizes (as from :func:`forward_calls`).
        repeats: Timed calls per batch size (after one warm-up call).

    Returns:
        ``{batch size: seconds of each call}``.
    """
    window, _, _ = resolve_geometry(im.config.data.patch_size)
    cuda = im.device.type == "cuda"
    times: dict[int, list[float]] = {}
    with torch.no_grad():
        for size in sizes:
            x = torch.randint(0, 256, (size, window, window, im.bands), dtype=torch.uint8)
            x = x.to(im.device)
            times[size] = []
            for i in range(repeats + 1):
                if cuda:
                    torch.cuda.synchronize()
                start = time.perf_counter()
                with autocast(im.device, im.autocast_dtype):
                    im.model(im.prepare(x))
                if cuda:
                    torch.cuda.synchronize()
                if i:  # the first call warms up
                    times[size].append(time.perf_counter() - start)
    return times


def check_outputs(tile: Path, out: Path) -> bool:
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


def measure(
    config_file: Path, tile: Path, checkpoint: Path, cache: Path, repeats: int, device: str
) -> dict:
    """One row: predict of ``tile`` in its own process against the bare forward on its windows."""
    im = load_inference_model(checkpoint, device)
    window, _, batch = resolve_geometry(im.config.data.patch_size)
    calls = forward_calls(im, tile)
    before = time_forward(im, calls, repeats)
    folder = cache / f"out-{config_file.stem}-{device}"
    process_seconds, tile_seconds, rss = run_predict(tile, checkpoint, folder, device)
    after = time_forward(im, calls, repeats)
    forward = sum(n * statistics.median(before[b] + after[b]) for b, n in calls.items())
    windows = sum(b * n for b, n in calls.items())
    with rasterio.open(tile) as ds:
        mpx = ds.width * ds.height / 1e6
        size = f"{ds.width}x{ds.height}"
    del im
    return {
        "model": config_file.stem,
        "device": device,
        "tile": size,
        "window": window,
        "batch": batch,
        "mpx": round(mpx, 1),
        "windows_mpx": round(windows * window * window / 1e6, 1),
        "process_seconds": round(process_seconds, 1),
        "tile_seconds": round(tile_seconds, 1),
        "forward_seconds": round(forward, 1),
        "mpx_per_s": mpx / tile_seconds,
        "forward_mpx_per_s": mpx / forward,
        "peak_rss_mb": round(rss),
        "predict_over_forward": forward / tile_seconds,
        "process_over_forward": forward / process_seconds,
        "cog_ok": check_outputs(tile, folder),
    }


TTA_SPEC = "d4"
"""The TTA measured against none."""


def tta_model(cache: Path, quick: bool) -> Path:
    """A CPU-config model trained briefly on synthetic tiles (trained once, then cached).

    Args:
        cache: The cache folder.
        quick: Train less (a separate cached model).

    Returns:
        Its checkpoint.
    """
    epochs = 2 if quick else 4
    run = cache / f"tta-cpu-{epochs}ep"
    checkpoint = run / "checkpoints" / "last.pt"
    if checkpoint.is_file():
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


def tta_rows(cache: Path, quick: bool) -> list[dict]:
    """mIoU and seconds of ``evaluate`` on unseen synthetic tiles without and with TTA."""
    checkpoint = tta_model(cache, quick)
    unseen = cache / "tta-unseen"
    if not unseen.is_dir():
        write_synthetic_dataset(unseen, tiles=6, size=512, seed=2024)
    im = load_inference_model(checkpoint, "cpu")
    pairs = discover_pairs(str(unseen), im.config.data.image_suffix, im.config.data.label_suffix)
    rows = []
    for spec in ("none", TTA_SPEC):
        metrics = evaluate_pairs(
            pairs, im, str(cache / f"tta-eval-{spec}"), None, None, None, parse_tta(spec)
        )
        rows.append(
            {
                "tta": spec,
                "transforms": len(parse_tta(spec)),
                "tiles": len(pairs),
                "epochs": im.epoch,
                "miou": metrics["miou"],
                "accuracy": metrics["accuracy"],
                "seconds": round(metrics["seconds"], 1),
            }
        )
    return rows


def run(quick: bool, out: Path, cache: Path | None = None) -> list[Goal]:
    """Runs the predict benchmark part.

    Args:
        quick: The CPU config's model only, fewer repeats, a shorter-trained TTA model.
        out: Results folder.
        cache: Where the synthetic tiles, models and outputs go (default: the temp folder).

    Returns:
        The goals: memory growth and predict / forward ratio per model; the GPU's figures
        when there is one; TTA's mIoU gain and time ratio (reported).
    """
    cache = cache or Path(tempfile.gettempdir()) / "landcover-bench"
    cache.mkdir(parents=True, exist_ok=True)
    configs = [REPO / "configs" / "cpu.yaml"] + (
        [] if quick else [REPO / "configs" / "default.yaml"]
    )
    tiles = [make_tile(2000, 2000, cache), make_tile(7500, 6000, cache)]
    repeats = 3 if quick else 5
    rows = []
    for config_file in configs:
        checkpoint = make_checkpoint(config_file, cache)
        for tile in tiles:
            rows.append(measure(config_file, tile, checkpoint, cache, repeats, "cpu"))
    if torch.cuda.is_available():
        config_file = configs[-1]
        checkpoint = make_checkpoint(config_file, cache)
        rows.append(measure(config_file, tiles[-1], checkpoint, cache, 20, "cuda"))
    goals = []
    for model in dict.fromkeys(r["model"] for r in rows if r["device"] == "cpu"):
        small, large = (r for r in rows if r["model"] == model and r["device"] == "cpu")
        growth = large["peak_rss_mb"] / small["peak_rss_mb"]
        goals.append(
            Goal(
                "predict",
                f"peak memory growth for 11.25x the area ({model} model)",
                round(growth, 2),
                f"<= {MEMORY_GOAL}",
                growth <= MEMORY_GOAL,
                f"{small['peak_rss_mb']} -> {large['peak_rss_mb']} MB",
            )
        )
        goals.append(ratio_goal(large))
    goals += [ratio_goal(r) for r in rows if r["device"] == "cuda"]
    write_results("predict", rows, {"goal_memory_growth": MEMORY_GOAL}, out, goals)
    tta = tta_rows(cache, quick)
    plain, augmented = tta
    gain = augmented["miou"] - plain["miou"]
    cost = augmented["seconds"] / plain["seconds"]
    tta_goals = [
        Goal(
            "predict",
            f"TTA {TTA_SPEC} ({augmented['transforms']} transforms): mIoU gain on unseen "
            "synthetic tiles",
            round(gain, 4),
            "report",
            None,
            f"mIoU {plain['miou']:.4f} -> {augmented['miou']:.4f}; CPU model trained "
            f"{plain['epochs']} epochs",
        ),
        Goal(
            "predict",
            f"TTA {TTA_SPEC}: evaluate time / without TTA",
            round(cost, 2),
            "report",
            None,
            f"{plain['seconds']} -> {augmented['seconds']} s for {plain['tiles']} tiles",
        ),
    ]
    write_results("predict_tta", tta, {}, out, tta_goals)
    return goals + tta_goals


def ratio_goal(row: dict) -> Goal:
    """The predict / bare forward goal of a row of the large tile."""
    ratio = row["predict_over_forward"]
    return Goal(
        "predict",
        f"predict / bare forward on the same windows, {row['tile']} ({row['model']} model, "
        f"{row['device']})",
        round(ratio, 2),
        f">= {RATIO_GOAL}",
        ratio >= RATIO_GOAL,
        f"{row['tile_seconds']} s vs {row['forward_seconds']} s ({row['mpx_per_s']:.2f} vs "
        f"{row['forward_mpx_per_s']:.2f} tile Mpx/s); whole process "
        f"{row['process_over_forward']:.2f}; window {row['window']} batch {row['batch']}; "
        f"COG ok {row['cog_ok']}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CPU-config model only")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "landcover-bench"
    )
    args = parser.parse_args()
    run(args.quick, args.out, args.cache)


if __name__ == "__main__":
    main()
