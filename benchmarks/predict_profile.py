"""Where predict's time goes on one tile: wall and CPU seconds per stage, in one process.

Runs the code ``landcover predict`` runs per tile (:class:`~landcover.inference.predict.
TileMapper`, as the job calls it) with timers wrapped around its stages. The wrappers are
installed here, in this process, for the one tile; nothing in ``landcover`` changes:

- ``model``: the model call (its wall seconds; torch's own threads do the work);
- ``compute``: the whole compute stage in the caller's thread: the model call plus
  normalisation, softmax, blending, argmax and uint8 encoding;
- ``decode``: decoding the whole tile into memory before its first window (GDAL, on every
  core; :class:`~landcover.inference.tileread.TileSource`), when it fits;
- ``stats``: the tile's band statistics (``data.normalize: per_tile``);
- ``read``: a row of windows from memory, or read and decoded from the file (a tile too
  large to hold; the reader thread);
- ``write``: writing a strip to the scratch GeoTIFFs and the overviews (the writer thread);
- ``publish``: turning the scratch files into COGs (after the last strip; GDAL's threads).

Each stage has its wall seconds and the CPU seconds of the thread that ran it; the tile has
its wall seconds and the process's CPU seconds. On a machine with few cores, what the reader
and writer threads take runs beside the model but still takes CPU from it.

Usage: python benchmarks/predict_profile.py TILE CHECKPOINT [--out DIR]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import landcover.inference.predict as predict_module
from landcover.inference.loader import InferenceModel, load_inference_model
from landcover.inference.options import PredictOptions
from landcover.inference.predict import TileMapper
from landcover.inference.tileread import TileSource
from landcover.inference.writers import MapWriter

STAGES = ("decode", "stats", "read", "compute", "model", "write", "publish")


@dataclass
class TileProfile:
    """One tile's time, in all and per stage.

    Attributes:
        wall: The tile's wall seconds (submit to maps published).
        cpu: The process's CPU seconds meanwhile (user + system, every thread).
        stages: ``{stage: [wall seconds, thread CPU seconds, calls]}``.
    """

    wall: float
    cpu: float
    stages: dict[str, list[float]] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        """One table row per stage, with its share of the tile's wall time."""
        return [
            {
                "stage": name,
                "calls": int(self.stages[name][2]),
                "wall_s": round(self.stages[name][0], 2),
                "thread_cpu_s": round(self.stages[name][1], 2),
                "share_of_tile_wall": round(self.stages[name][0] / self.wall, 3),
            }
            for name in STAGES
            if name in self.stages
        ]


def _timed(name: str, fn: Callable, timers: dict[str, list[float]]) -> Callable:
    """``fn`` with its wall and thread-CPU seconds added to ``timers[name]``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            timers[name][0] += time.perf_counter() - wall
            timers[name][1] += time.thread_time() - cpu
            timers[name][2] += 1

    return wrapper


def profile_tile(tile: str, im: InferenceModel, out: str, probs: bool = True) -> TileProfile:
    """Predicts ``tile`` as ``landcover predict`` does (no preview), every stage timed.

    Args:
        tile: The tile.
        im: The model, as predict loads it.
        out: Output folder (the maps are written there).
        probs: Write the probability map too (``--no-probs`` when False).

    Returns:
        The tile's profile.
    """
    timers: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    original = predict_module.run_pipelined

    def pipelined(count: int, read: Callable, compute: Callable, write: Callable, **kw: Any):
        return original(
            count,
            _timed("read", read, timers),
            _timed("compute", compute, timers),
            _timed("write", write, timers),
            **kw,
        )

    publish = MapWriter.publish
    source_init, source_stats = TileSource.__init__, TileSource.stats
    TileSource.__init__ = _timed("decode", source_init, timers)  # type: ignore[method-assign]
    TileSource.stats = _timed("stats", source_stats, timers)  # type: ignore[method-assign]
    im.model.forward = _timed("model", im.model.forward, timers)  # type: ignore[method-assign]
    predict_module.run_pipelined = pipelined  # type: ignore[assignment]
    MapWriter.publish = _timed("publish", publish, timers)  # type: ignore[method-assign]
    try:
        options = PredictOptions(out=out, preview=False, probs=probs)
        with TileMapper(im, options) as mapper:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            mapper.submit(tile).result()
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        del im.model.forward  # the class's forward again
        predict_module.run_pipelined = original  # type: ignore[assignment]
        MapWriter.publish = publish  # type: ignore[method-assign]
        TileSource.__init__ = source_init  # type: ignore[method-assign]
        TileSource.stats = source_stats  # type: ignore[method-assign]
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    return TileProfile(wall, cpu, dict(timers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tile")
    parser.add_argument("checkpoint")
    parser.add_argument("--out", default=None, help="output folder (default: a temp folder)")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="lc-profile-")
    profile = profile_tile(args.tile, load_inference_model(args.checkpoint, "cpu"), out)
    print(
        f"tile: {profile.wall:.1f} s wall, {profile.cpu:.1f} s CPU "
        f"({torch.get_num_threads()} torch threads)"
    )
    for row in profile.rows():
        print("  ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
