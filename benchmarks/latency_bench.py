"""Device busy: predict's pipeline with a stand-in model that takes a device's time per window.

On a GPU node the question is not how fast the host maps with a free model
(:mod:`ceiling_bench`) but whether the host keeps the GPU fed: whether reading, decoding,
encoding and publishing overlap the device's work, or the device waits for them. Without a GPU
this is measured with a **latency stand-in**: a model that returns fixed logits (as
:class:`ceiling_bench.StandIn`) after sleeping for the time a device would take on the batch's
pixels (``time.sleep`` releases the GIL, as a CUDA call's wait does: the host's other threads
run meanwhile). Its "device" is busy while it sleeps.

The host floor of this pipeline is measured first, in the same run: the seconds per tile of
predict's own per-tile code (:class:`~landcover.inference.predict.TileMapper`, tiles back to
back as a region job maps them, class and probability COGs, default window, overlap and batch
of ``configs/default.yaml``) with the free stand-in, on the same cores. The latency stand-in
then takes ``factor`` times that per tile: at a factor of 1 or more the device is the slower
side and the host floor allows it to be busy all the time; below 1 the host is the slower side
and allows ``factor`` of the time. Over the steady state (the spacing of finished tiles, the
first and the last tile left out, as :func:`ceiling_bench.sustained_once`):

- ``busy``: the stand-in's sleeping time over the wall time: the model alone;
- ``thread_busy``: the device's thread at the device's work (the windows through the model,
  blending, the softmax, the arg-max and the uint8 encoding: ``StripBlender.add`` and
  ``encode_strip``) over the wall time. On a GPU all of that is device work, queued by this
  thread; here blending and encoding run on the CPU in this thread, beside the sleep. What the
  thread does not spend there, it waits for the host: for rows, for a writer or a publisher
  falling behind, or between tiles. This is the goal's figure: ``>= 0.8`` where the host floor
  allows the device to be busy throughout (factor >= 1);
- ``busy / allowed``: the model's share of what the host floor allows.

One more run of the host floor has py-spy attached over its steady state (``record --gil
--nonblocking``: samples of the thread holding the GIL, the process not paused): the share of
the wall one predict process holds the GIL, as milliseconds a megapixel. Everything else the
pipeline does (GDAL's decoding and compressing, torch's kernels, numpy) releases the GIL, so
its inverse bounds what one process maps on a host of any number of cores: the figure that
says whether one predict process a GPU can reach issue 43's 60 Mpx/s on a 16-core host, which
2 cores cannot show (goal: at least 60).

Every measurement runs in its own process pinned to the cores it is given (``sched_setaffinity``;
torch's threads set to match), with the process settings of the ``landcover`` command.

Usage: python benchmarks/latency_bench.py [--quick] [--out DIR] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ceiling_bench import FULL, QUICK, REPO, StandIn, _pin, make_tile, sustained_once
from common import RESULTS, Goal, write_results
from predict_bench import make_checkpoint

from landcover.allocator import tune_allocator
from landcover.inference.loader import load_inference_model
from landcover.threads import ENV as OMP_ENV
from landcover.threads import POLICY as OMP_POLICY

FACTORS = (0.5, 1.25, 2.0)
"""The stand-in device's seconds per tile, as multiples of the host floor's."""
TILES = 6
"""Tiles mapped back to back (after one untimed tile)."""
BUSY_GOAL = 0.8
SPY_RATE = 100
"""py-spy's samples a second."""
GIL_GOAL = 60.0
"""Mpx/s one predict process must be able to map on one GPU, class only (issue 43)."""


class Spans:
    """Time spans (``perf_counter`` pairs) recorded from any thread."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def add(self, start: float, stop: float) -> None:
        """Records a span."""
        with self._lock:
            self.spans.append((start, stop))

    def between(self, start: float, stop: float) -> float:
        """Seconds covered by the spans between two times (spans do not overlap)."""
        with self._lock:
            return sum(max(0.0, min(b, stop) - max(a, start)) for a, b in self.spans)

    @contextmanager
    def timing(self, owner: Any, name: str) -> Iterator[None]:
        """Records every call of ``owner.name`` while inside (patched on ``owner``)."""
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(start, time.perf_counter())

        setattr(owner, name, timed)
        try:
            yield
        finally:
            setattr(owner, name, original)


class LatencyStandIn(StandIn):
    """The fixed-logits stand-in, taking ``seconds_per_px`` of device time per input pixel.

    The wait is a sleep: it releases the GIL, and the host's other threads (reading,
    decoding, writing, publishing) run meanwhile, as they do while a GPU computes.

    Args:
        bands: Input bands.
        classes: Output classes.
        seconds_per_px: Device seconds per pixel of a batch (0: no wait).
    """

    def __init__(self, bands: int, classes: int, seconds_per_px: float) -> None:
        super().__init__(bands, classes)
        self.seconds_per_px = seconds_per_px
        self.sleeps = Spans()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of a normalised batch, after the device's time for its pixels."""
        logits = super().forward(x)
        if self.seconds_per_px:
            start = time.perf_counter()
            time.sleep(self.seconds_per_px * x.shape[0] * x.shape[2] * x.shape[3])
            self.sleeps.add(start, time.perf_counter())
        return logits


def region_once(tile: Path, checkpoint: Path, out: Path, seconds_per_px: float) -> dict[str, Any]:
    """Maps :data:`TILES` copies of the tile back to back with the (latency) stand-in, as a
    region job's worker maps them (:func:`ceiling_bench.sustained_once`).

    Returns:
        The steady state's seconds per tile and the device's busy share over it.
    """
    import landcover.inference.predict as predict_module
    from landcover.inference.blend import StripBlender

    im = load_inference_model(checkpoint, "cpu")
    model = LatencyStandIn(len(im.config.data.bands), im.mapping.num_classes, seconds_per_px)
    device = Spans()  # the device's thread at the device's work: windows, blending, encoding
    with device.timing(StripBlender, "add"), device.timing(predict_module, "encode_strip"):
        # the next tile decoded ahead, as with the model on a GPU
        result = sustained_once(tile, checkpoint, out, True, TILES, model, decode_ahead=True)
    start, stop = result["steady_from"], result["steady_to"]
    return {
        "steady_from": start,  # time.perf_counter: CLOCK_MONOTONIC, the parent's clock too
        "steady_to": stop,
        "steady_seconds": result["steady_seconds"],
        "busy": model.sleeps.between(start, stop) / (stop - start),
        "thread_busy": device.between(start, stop) / (stop - start),
        "pixels": _pixels_per_tile(tile),
    }


def _pixels_per_tile(tile: Path) -> int:
    import rasterio

    with rasterio.open(tile) as ds:
        return ds.width * ds.height


def _child(args: argparse.Namespace) -> None:
    _pin(args.threads)
    tune_allocator()
    out = Path(tempfile.mkdtemp(prefix="lc-latency-"))
    try:
        row = region_once(Path(args.tile), Path(args.checkpoint), out, args.seconds_per_px)
    finally:
        subprocess.run(["rm", "-rf", str(out)], check=False)
    print(json.dumps(row))


def _command(tile: Path, checkpoint: Path, threads: int, seconds_per_px: float) -> list[str]:
    command = [sys.executable, __file__, "--child", "--threads", str(threads)]
    command += ["--tile", str(tile), "--checkpoint", str(checkpoint)]
    return [*command, "--seconds-per-px", repr(seconds_per_px)]


def _measure(tile: Path, checkpoint: Path, threads: int, seconds_per_px: float) -> dict[str, Any]:
    command = _command(tile, checkpoint, threads, seconds_per_px)
    env = {**os.environ, OMP_ENV: OMP_POLICY}
    launched = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"latency run failed:\n{result.stderr[-3000:]}")
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "launched": launched}


def gil_share(
    tile: Path, checkpoint: Path, threads: int, floor: dict[str, Any], folder: Path
) -> dict[str, Any]:
    """The share of the wall one predict process holds the GIL, in the host floor's steady state.

    The floor's run is repeated with py-spy attached (``record --gil --nonblocking``: it samples
    only the thread holding the GIL and does not pause the process) over the floor's steady
    state less a tile (half a tile in from either end); the window is checked to lie inside the
    spied run's own steady state, whose megapixels a second the share is set against, and
    py-spy's failed samples are not counted. The GIL-held seconds a megapixel bound what one process
    can map however many cores it has: the rest (decoding, blending, compressing) runs in
    libraries that release the GIL.

    Args:
        tile: The tile.
        checkpoint: The stand-in's checkpoint.
        threads: Cores.
        floor: The host floor's result (its launch and steady state).
        folder: Where py-spy writes its samples.

    Returns:
        ``gil_share``, ``gil_ms_per_mpx`` and ``gil_ceiling_mpx_s``, or ``gil_error`` where
        py-spy is missing or cannot attach (it needs ptrace).
    """
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return {"gil_error": "py-spy not installed (pip install -e '.[bench]')"}
    # inside the floor's steady state, half a tile in from either end: the spied run is
    # another run and py-spy takes a moment to attach
    tile_s = floor["steady_seconds"]
    start = floor["steady_from"] - floor["launched"] + tile_s / 2
    seconds = int(floor["steady_to"] - floor["steady_from"] - tile_s)
    if seconds < 2:
        return {"gil_error": f"the steady state ({tile_s:.1f} s a tile) is too short to sample"}
    samples = folder / "gil.txt"
    env = {**os.environ, OMP_ENV: OMP_POLICY}
    command = _command(tile, checkpoint, threads, 0.0)
    with subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True) as child:
        time.sleep(start)
        record = [spy, "record", "--pid", str(child.pid), "--gil", "--nonblocking", "-f", "raw"]
        sampled_from = time.perf_counter()
        spy_run = subprocess.run(
            [*record, "-r", str(SPY_RATE), "-d", str(seconds), "-o", str(samples)],
            capture_output=True,
            text=True,
            check=False,
        )
        sampled_to = time.perf_counter()
        out, _ = child.communicate()
    said = spy_run.stdout + spy_run.stderr
    if spy_run.returncode != 0 or not samples.exists():
        return {"gil_error": f"py-spy could not sample: {said.strip()[-200:]}"}
    spied = json.loads(out.strip().splitlines()[-1])  # the spied run's own steady state
    if not spied["steady_from"] <= sampled_from < sampled_to <= spied["steady_to"]:
        return {"gil_error": "py-spy's window fell outside the spied run's steady state"}
    errors = re.search(r"Errors: (\d+)", said)
    ticks = SPY_RATE * seconds - (int(errors.group(1)) if errors else 0)
    held = sum(int(line.rsplit(" ", 1)[1]) for line in samples.read_text().splitlines() if line)
    share = held / ticks
    mpx_s = spied["pixels"] / 1e6 / spied["steady_seconds"]
    ms_per_mpx = 1000 * share / mpx_s
    return {
        "gil_share": round(share, 4),
        "gil_ms_per_mpx": round(ms_per_mpx, 2),
        "gil_ceiling_mpx_s": round(1000 / ms_per_mpx, 1) if ms_per_mpx > 0 else None,
        "gil_spied_mpx_s": round(mpx_s, 2),
    }


def run(quick: bool, out: Path, cache: Path | None = None) -> list[Goal]:
    """Measures the host floor, then the device's busy share at each factor.

    Args:
        quick: A 1,500 x 1,200 tile, no goals.
        out: Results folder.
        cache: Folder for the tile and the checkpoint (default: a temporary folder).

    Returns:
        The goals: busy >= 0.8 where the host floor allows the device to be busy throughout.
    """
    height, width = QUICK if quick else FULL
    threads = min(2, len(os.sched_getaffinity(0)))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lc-latency-") as tmp:
        folder = cache or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        checkpoint = make_checkpoint(REPO / "configs" / "default.yaml", folder)
        tile = make_tile(height, width, "deflate", folder)
        floor = _measure(tile, checkpoint, threads, 0.0)
        host_s = floor["steady_seconds"]
        pixels = floor["pixels"]
        rows.append(_row("host floor (free stand-in)", threads, 0.0, floor, None))
        gil = gil_share(tile, checkpoint, threads, floor, folder)
        for factor in FACTORS:
            # the device's time per input pixel: factor x the host's seconds per tile, over
            # the pixels the windows cover (overlapping windows cover some twice)
            seconds_per_px = factor * host_s / (pixels * _coverage(height, width))
            result = _measure(tile, checkpoint, threads, seconds_per_px)
            rows.append(_row(f"device {factor:g} x host", threads, factor, result, host_s))
    held = [] if quick else _goals(rows) + _gil_goal(gil, threads)
    extra = {"tile": f"{width} x {height}", "tiles": TILES, "factors": list(FACTORS), **gil}
    print(f"GIL held by one predict process in the host floor's steady state: {gil}")
    write_results("latency", rows, extra, out, held)
    return held


def _coverage(height: int, width: int) -> float:
    """Window pixels per tile pixel for predict's default geometry (overlapping windows)."""
    from landcover.config import load_config
    from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry

    config = load_config(REPO / "configs" / "default.yaml")
    window, overlap, batch = resolve_geometry(config.data.patch_size)
    predictor = SlidingWindowPredictor(
        torch.nn.Identity(), window, overlap, batch, lambda x: x, torch.device("cpu")
    )
    plan = predictor.plan(height, width)
    return len(plan.ys) * len(plan.xs) * plan.window**2 / (height * width)


def _row(
    name: str, threads: int, factor: float, result: dict[str, Any], host_s: float | None
) -> dict[str, Any]:
    allowed = None if host_s is None else min(1.0, factor)
    busy = None if host_s is None else result["busy"]
    return {
        "run": name,
        "threads": threads,
        "seconds_per_tile": round(result["steady_seconds"], 2),
        "mpx_s": round(result["pixels"] / 1e6 / result["steady_seconds"], 2),
        "device_s_per_tile": "" if host_s is None else round(factor * host_s, 2),
        "busy": "" if busy is None else round(busy, 3),
        "thread_busy": round(result["thread_busy"], 3),
        "allowed": "" if allowed is None else round(allowed, 3),
        "busy_of_allowed": "" if busy is None or not allowed else round(busy / allowed, 3),
    }


def _goals(rows: list[dict[str, Any]]) -> list[Goal]:
    found = []
    for r in rows:
        if r["allowed"] == "":
            continue
        if r["allowed"] >= 1.0:
            found.append(
                Goal(
                    "latency",
                    f"device's thread busy, {r['run']} (the host floor allows 1.0)",
                    r["thread_busy"],
                    f">= {BUSY_GOAL}",
                    r["thread_busy"] >= BUSY_GOAL,
                    f"model alone {r['busy']}; {r['threads']} threads, "
                    f"{r['seconds_per_tile']} s a tile",
                )
            )
        else:
            found.append(
                Goal(
                    "latency",
                    f"device busy / allowed, {r['run']}",
                    r["busy_of_allowed"],
                    "report",
                    None,
                    f"busy {r['busy']} of {r['allowed']} allowed",
                )
            )
    return found


def _gil_goal(gil: dict[str, Any], threads: int) -> list[Goal]:
    if "gil_error" in gil:
        return [
            Goal(
                "latency", "one predict process's GIL ceiling", None, "n/a", None, gil["gil_error"]
            )
        ]
    ceiling = gil["gil_ceiling_mpx_s"]
    return [
        Goal(
            "latency",
            "one predict process's GIL-bound ceiling, Mpx/s (the GIL-held ms a Mpx, inverted)",
            ceiling,
            f">= {GIL_GOAL:g}",
            ceiling is not None and ceiling >= GIL_GOAL,
            f"GIL held {gil['gil_share']:.1%} of the host floor's steady state on {threads} "
            f"cores ({gil['gil_ms_per_mpx']} ms a Mpx): the cores, not the GIL, bound one process",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, help=f"results folder (default {RESULTS})")
    parser.add_argument("--cache", type=Path, help="keep the tile and checkpoint here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--seconds-per-px", type=float, default=0.0, help=argparse.SUPPRESS)
    for key in ("tile", "checkpoint"):
        parser.add_argument(f"--{key}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    run(args.quick, out, args.cache)


if __name__ == "__main__":
    main()
