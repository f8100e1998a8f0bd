"""Fringe benchmark: how well the map holds next to image no-data (a collar, a mosaic's edge).

Synthetic unseen tiles (``landcover data synth``, the easy profile: each has image no-data, a
corner or a strip along an edge, with probability 1/3; 6 of the 24 at seed 7) are mapped with ``landcover predict`` through the
real CLI, and each valid, labelled pixel is scored by its distance to the nearest image
no-data pixel (``scipy.ndimage.distance_transform_edt``): pixel accuracy and the share mapped
water (the class dark pixels lean to) against the share labelled water, band by band
(0-2 px, 2-4, 4-8, 8-16, beyond 16, and the tiles with no image no-data). A model that reads
the collar's zeros as imagery maps its fringe worse than the rest of the tile.

The checkpoint is ``--checkpoint``, or one trained here with ``configs/cpu.yaml`` as the demo
trains it (2 workers; ``--quick``: 3 epochs).

Usage: python benchmarks/fringe_bench.py [--checkpoint runs/demo/checkpoints/best.pt]
                                         [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import rasterio
from scipy.ndimage import distance_transform_edt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, landcover_cli, write_results

from landcover.classes import IGNORE_INDEX, resolve_mapping
from landcover.data.raster import nodata_mask

UNSEEN_SEED = 7
BANDS = ((0.0, 2.0), (2.0, 4.0), (4.0, 8.0), (8.0, 16.0), (16.0, np.inf))
MIN_FRINGE_RATIO = 0.95
"""Goal: accuracy within 2 px of no-data >= this share of the accuracy beyond 16 px."""


def _train(work: Path, quick: bool) -> Path:
    run = work / "run"
    extra = ["--epochs", "3"] if quick else []
    landcover_cli(
        "train", "--config", "configs/cpu.yaml", "--workers", "2", "--out", str(run), *extra
    )
    return run / "checkpoints" / "best.pt"


class _Tally:
    """Pixel counts of one distance band: scored, correct, mapped water, labelled water."""

    def __init__(self) -> None:
        self.scored = self.correct = self.mapped_water = self.labelled_water = 0

    def add(self, truth: np.ndarray, mapped: np.ndarray, water: int) -> None:
        self.scored += truth.size
        self.correct += int((truth == mapped).sum())
        self.mapped_water += int((mapped == water).sum())
        self.labelled_water += int((truth == water).sum())

    def row(self, band: str) -> dict[str, object]:
        n = max(self.scored, 1)
        return {
            "band": band,
            "pixels": self.scored,
            "accuracy": round(self.correct / n, 4),
            "mapped_water": round(self.mapped_water / n, 4),
            "labelled_water": round(self.labelled_water / n, 4),
        }


def measure(checkpoint: Path, tiles: Path, maps: Path) -> list[dict[str, object]]:
    """Maps the tiles with the checkpoint and scores each pixel by its distance to no-data.

    Args:
        checkpoint: A landcover checkpoint.
        tiles: Folder of ``*_naip.tif`` / ``*_lc.tif`` pairs (chesapeake7 codes).
        maps: Output folder for ``landcover predict``.

    Returns:
        One row per distance band, then one for the tiles without image no-data.
    """
    landcover_cli("predict", str(tiles), "--checkpoint", str(checkpoint), "--out", str(maps),
         "--no-probs")  # fmt: skip
    mapping = resolve_mapping("chesapeake7")
    water = mapping.names.index("water")
    tallies = {band: _Tally() for band in BANDS}
    clean = _Tally()
    for image in sorted(tiles.glob("*_naip.tif")):
        stem = image.name.removesuffix(".tif")
        with rasterio.open(image) as ds:
            nodata = nodata_mask(ds)
        with rasterio.open(tiles / image.name.replace("_naip", "_lc")) as ds:
            truth = mapping.encode(ds.read(1))
        with rasterio.open(maps / f"{stem}_class.tif") as ds:
            mapped = ds.read(1)
        scored = (~nodata) & (truth != IGNORE_INDEX)
        if not nodata.any():
            clean.add(truth[scored], mapped[scored], water)
            continue
        distance = distance_transform_edt(~nodata)
        for low, high in BANDS:
            band = scored & (distance > low) & (distance <= high)
            tallies[(low, high)].add(truth[band], mapped[band], water)
    rows = [
        tallies[(low, high)].row(f"{low:g}-{high:g} px" if np.isfinite(high) else f"> {low:g} px")
        for low, high in BANDS
    ]
    rows.append(clean.row("tiles without no-data"))
    return rows


def run(quick: bool, out: Path, checkpoint: Path | None = None) -> list[Goal]:
    """Maps unseen tiles and writes the fringe table.

    Args:
        quick: Fewer, smaller tiles (and a shorter training when no checkpoint is given).
        out: Results folder.
        checkpoint: The model; ``None`` trains ``configs/cpu.yaml`` here.

    Returns:
        The goal: accuracy within 2 px of no-data against beyond 16 px.
    """
    count, size = (8, 512) if quick else (24, 1024)
    with tempfile.TemporaryDirectory(prefix="landcover-fringe-") as tmp:
        work = Path(tmp)
        if checkpoint is None:
            checkpoint = _train(work, quick)
        tiles = work / "unseen"
        landcover_cli("data", "synth", str(tiles), "--tiles", str(count), "--size", str(size),
             "--seed", str(UNSEEN_SEED), "--prefix", "fringe")  # fmt: skip
        rows = measure(checkpoint, tiles, work / "maps")
    ratio = round(
        float(rows[0]["accuracy"]) / max(float(rows[len(BANDS) - 1]["accuracy"]), 1e-9), 4
    )
    goals = [
        Goal(
            "fringe",
            "pixel accuracy within 2 px of image no-data / beyond 16 px",
            ratio,
            f">= {MIN_FRINGE_RATIO}",
            ratio >= MIN_FRINGE_RATIO,
            f"{count} synthetic tiles of {size} px, seed {UNSEEN_SEED}",
        )
    ]
    write_results(
        "fringe",
        rows,
        {
            "tiles": f"{count} of {size} px, seed {UNSEEN_SEED}",
            "checkpoint": str(checkpoint),
            "ratio": ratio,
            "quick": quick,
        },
        out,
        goals,
    )
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    checkpoint = None if args.checkpoint is None else args.checkpoint.resolve()
    run(args.quick, args.out, checkpoint)


if __name__ == "__main__":
    main()
