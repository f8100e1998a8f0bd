"""Predict benchmark: peak memory and throughput of `landcover predict` on large tiles.

Measures, for a 2,000 x 2,000 and a 6,000 x 7,500 synthetic NAIP tile (11x the area):
peak resident memory of the predict process (from the kernel's rusage of that process),
megapixels per second, and checks the class map (valid COG, same CRS / transform / size).
It runs the default model (configs/default.yaml: ResNet-34 U-Net) and the CPU config's model,
both with random weights (speed and memory do not depend on the weights), and the bare
model's forward throughput on random windows of the same size and batch as predict uses
(its default window and batch), for the predict / forward ratio.

Usage: python benchmarks/predict_bench.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
import torch
from rio_cogeo.cogeo import cog_validate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results

from landcover.config import load_config
from landcover.data.synthetic import synthesize_scene, write_pair
from landcover.fileio import atomic_write_bytes
from landcover.inference.sliding import resolve_geometry
from landcover.models import build_model
from landcover.training.checkpoint import checkpoint_state, serialize

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
    atomic_write_bytes(path, serialize(checkpoint_state(model, config.to_dict())))
    return path


def make_tile(height: int, width: int, folder: Path) -> Path:
    path = folder / f"bench{height}x{width}_naip.tif"
    if not path.exists():
        image, label = synthesize_scene(height, width, np.random.default_rng(height + width))
        write_pair(folder, f"bench{height}x{width}", image, label, (400000.0, 4400000.0))
    return path


def run_predict(tile: Path, checkpoint: Path, out: Path) -> tuple[float, float]:
    """Runs predict in its own process; returns (seconds, peak RSS in MB) of that process."""
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
        "cpu",
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
    return seconds, int(result.stdout.split()[-1]) / 1024


_PEAK_RSS = (
    "import os, subprocess, sys\n"
    "proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(proc.pid, 0)\n"
    "print(usage.ru_maxrss)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def forward_mpx_per_s(config_file: Path, seconds: float = 20.0) -> tuple[float, int, int]:
    """The bare model's forward megapixels/s on random windows of predict's size and batch.

    Returns:
        ``(Mpx/s, window, batch)``.
    """
    config = load_config(config_file)
    window, _, batch = resolve_geometry(config.data.patch_size)
    model = build_model(config.model, 4, config.data.classes.num_classes).eval()
    x = torch.randn(batch, 4, window, window)
    with torch.no_grad():
        model(x)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            model(x)
            n += 1
    return n * batch * window * window / 1e6 / (time.perf_counter() - start), window, batch


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


def run(quick: bool, out: Path, cache: Path | None = None) -> list[Goal]:
    """Runs the predict benchmark part.

    Args:
        quick: The CPU config's model only (the default model too otherwise).
        out: Results folder.
        cache: Where the synthetic tiles and outputs go (default: the temp folder).

    Returns:
        Goal 4 of the benchmark issue: memory growth and predict / forward ratio.
    """
    cache = cache or Path(tempfile.gettempdir()) / "landcover-bench"
    cache.mkdir(parents=True, exist_ok=True)
    configs = [REPO / "configs" / "cpu.yaml"] + (
        [] if quick else [REPO / "configs" / "default.yaml"]
    )
    tiles = [make_tile(2000, 2000, cache), make_tile(7500, 6000, cache)]
    rows = []
    for config_file in configs:
        checkpoint = make_checkpoint(config_file, cache)
        forward, window, batch = forward_mpx_per_s(config_file, 10.0 if quick else 20.0)
        for tile in tiles:
            folder = cache / f"out-{config_file.stem}"
            seconds, rss = run_predict(tile, checkpoint, folder)
            with rasterio.open(tile) as ds:
                mpx = ds.width * ds.height / 1e6
                size = f"{ds.width}x{ds.height}"
            rows.append(
                {
                    "model": config_file.stem,
                    "tile": size,
                    "window": window,
                    "batch": batch,
                    "mpx": round(mpx, 1),
                    "seconds": round(seconds, 1),
                    "mpx_per_s": mpx / seconds,
                    "peak_rss_mb": round(rss),
                    "forward_mpx_per_s": forward,
                    "predict_over_forward": mpx / seconds / forward,
                    "cog_ok": check_outputs(tile, folder),
                }
            )
    goals = []
    for model in dict.fromkeys(r["model"] for r in rows):
        small, large = (r for r in rows if r["model"] == model)
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
        ratio = large["predict_over_forward"]
        goals.append(
            Goal(
                "predict",
                f"predict / bare forward throughput, 6000x7500 ({model} model)",
                round(ratio, 2),
                f">= {RATIO_GOAL}",
                ratio >= RATIO_GOAL,
                f"{large['mpx_per_s']:.2f} vs {large['forward_mpx_per_s']:.2f} Mpx/s; "
                f"window {large['window']} batch {large['batch']}; COG ok {large['cog_ok']}",
            )
        )
    write_results("predict", rows, {"goal_memory_growth": MEMORY_GOAL}, out, goals)
    return goals


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
