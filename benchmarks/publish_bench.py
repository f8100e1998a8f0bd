"""Publishing a tile's maps: GDAL's COG copy of the scratch maps, direct reads against the
block cache.

After a tile's last strip, :meth:`~landcover.inference.writers.MapWriter.publish` copies the
uncompressed scratch maps (with the overviews built while writing) into the class and
probability COGs with GDAL's COG driver. On one tile nothing overlaps that copy, and all of
it but the compression runs in one thread (``benchmarks/README.md``, Predict ceiling). Since
2026-11-27 the copy reads the scratch maps with ``GTIFF_DIRECT_IO=YES``
(:data:`~landcover.inference.writers.SCRATCH_READ_OPTIONS`): GDAL reads their blocks straight
into its buffer instead of through its block cache, where the 6 bands of the probability map
were split into per-band blocks and interleaved again.

Here a MapWriter writes the strips of a ready-made map of the ceiling tile's size (6,000 x
7,500, 6 classes; smooth probabilities, as a model's), then publishes it, with the scratch
read through the block cache (GDAL's default) and directly, alternately, pinned to 1 and to 2
cores (``sched_setaffinity``; GDAL's threads follow it). The COGs of the two are checked equal
byte for byte.

Usage: python benchmarks/run.py publish  (or: python benchmarks/publish_bench.py [--quick])
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
import torch
from affine import Affine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results

from landcover.classes import ClassMapping, resolve_mapping
from landcover.inference import writers
from landcover.inference.encode import EncodedStrip, encode_probs

FULL = (7500, 6000)
QUICK = (1500, 1200)
STRIP = 960


def _strips(height: int, width: int, classes: int) -> list[EncodedStrip]:
    """Encoded strips of smooth probabilities (a softmax of upsampled noise)."""
    gen = torch.Generator().manual_seed(0)
    coarse = torch.randn((1, classes, height // 16 + 1, width // 16 + 1), generator=gen)
    strips = []
    for row in range(0, height, STRIP):
        rows = min(STRIP, height - row)
        logits = torch.nn.functional.interpolate(
            coarse[:, :, row // 16 : (row + rows) // 16 + 2], scale_factor=16, mode="bilinear"
        )[0, :, :rows, :width]
        classes_, stored = encode_probs(logits.mul(3.0).softmax(0), "uint8")
        strips.append(EncodedStrip(row, classes_, stored, np.ones(classes_.shape, dtype=bool)))
    return strips


def publish_once(
    source: Path, mapping: ClassMapping, strips: list[EncodedStrip], folder: Path, direct: bool
) -> tuple[float, str]:
    """Writes the strips and publishes them; the publish's seconds and the COGs' digest."""
    scratch = Path(tempfile.mkdtemp(dir=folder))
    out = Path(tempfile.mkdtemp(dir=folder))
    kept = writers.SCRATCH_READ_OPTIONS
    writers.SCRATCH_READ_OPTIONS = kept if direct else {}
    try:
        with rasterio.open(source) as src:
            writer = writers.MapWriter(src, mapping, scratch, "uint8")
            for strip in strips:  # (a strip's arrays are the writer's to change)
                probs = None if strip.probs is None else strip.probs.copy()
                writer.write(EncodedStrip(strip.row, strip.classes.copy(), probs, strip.valid))
            start = time.perf_counter()
            writer.publish(out / "class.tif", out / "prob.tif")
            seconds = time.perf_counter() - start
        digest = hashlib.sha256()
        for name in ("class.tif", "prob.tif"):
            digest.update((out / name).read_bytes())
        return seconds, digest.hexdigest()
    finally:
        writers.SCRATCH_READ_OPTIONS = kept
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def run(quick: bool, out: Path) -> list[Goal]:
    """Runs the publish benchmark part.

    Args:
        quick: A 1,500 x 1,200 map, 2 rounds.
        out: Results folder.

    Returns:
        Per core count, the block cache's publish time over the direct reads'.

    Raises:
        SystemExit: If the two ways' COGs differ.
    """
    height, width = QUICK if quick else FULL
    rounds = 2 if quick else 3
    mapping = resolve_mapping("chesapeake7")
    strips = _strips(height, width, mapping.num_classes)
    cores = sorted(os.sched_getaffinity(0))
    rows, goals = [], []
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        folder = Path(tmp)
        source = folder / "in.tif"
        profile = {"driver": "GTiff", "height": height, "width": width, "count": 4}
        transform = Affine(1.0, 0, 400000, 0, -1.0, 4300000)
        with rasterio.open(
            source, "w", **profile, dtype="uint8", crs="EPSG:26918", transform=transform
        ):
            pass
        try:
            for count in (1, 2)[: len(cores)]:
                os.sched_setaffinity(0, cores[:count])
                spent: dict[bool, list[float]] = {False: [], True: []}
                digests = set()
                for _ in range(rounds):
                    for direct in (False, True):  # alternately
                        seconds, digest = publish_once(source, mapping, strips, folder, direct)
                        spent[direct].append(seconds)
                        digests.add(digest)
                if len(digests) != 1:
                    raise SystemExit("publish: the COGs differ between the two ways of reading")
                for direct in (False, True):
                    rows.append(
                        {
                            "scratch_read": "direct" if direct else "block cache",
                            "cores": count,
                            "publish_s": round(min(spent[direct]), 2),
                            "each_s": " ".join(f"{s:.2f}" for s in spent[direct]),
                        }
                    )
                ratio = round(min(spent[False]) / min(spent[True]), 2)
                goals.append(
                    Goal(
                        "publish",
                        f"publishing a {width} x {height} tile's class and probability COGs, "
                        f"{count} core(s): block-cache reads' time / direct reads'",
                        ratio,
                        ">= 1",
                        ratio >= 1,
                        f"best of {rounds}, alternating; the COGs are equal byte for byte",
                    )
                )
        finally:
            os.sched_setaffinity(0, cores)
    write_results("publish", rows, {"tile": f"{width} x {height}", "rounds": rounds}, out, goals)
    return goals


if __name__ == "__main__":
    run("--quick" in sys.argv, RESULTS / "quick" if "--quick" in sys.argv else RESULTS)
