"""IO benchmark: training patches per second, our in-memory sampler against torchgeo's.

Both sides read the same synthetic NAIP-like GeoTIFF pairs (4-band imagery ``*_naip.tif`` and
Chesapeake-coded labels ``*_lc.tif``, EPSG:26918, 1 m) and draw random 256 x 256 patches in
one process, in batches of the CPU config's batch size:

- **ours**: ``load_tiles`` (the worker's one-off load into memory) then
  ``PatchSampler(augment=True)`` with the config's no-data and rare-class settings, as the
  trainer builds it, drawing ``sampler.batch(batch, epoch_rng(...))``. The one-off load (and the
  sampler's construction) is its own column, ``setup_s``, not part of patches/s.
- **torchgeo**: ``RandomGeoSampler`` over ``NAIP & ChesapeakeLabels`` (a ``RasterDataset`` with
  ``is_image=False`` whose transform maps the Chesapeake codes to training classes, as our
  loader does), through a ``DataLoader`` (``num_workers=0``, ``stack_samples``). Its
  ``setup_s`` is the dataset's construction (the file index) plus the first batch.

This small data set fits in GDAL's block cache (5% of RAM by default), so torchgeo decodes
each block once and then reads from the cache; a worker's real share of NAIP tiles does not
fit, and every patch decodes its blocks. A third row measures torchgeo that way (GDAL's cache
set to 1 MB through ``rasterio.Env``). The goal is taken against the cached (faster) torchgeo.

The samplers are measured in alternating rounds of equal length (so a change of load on the
machine hits all of them), and the patch counts and times are summed over the rounds. The
torchgeo side does no augmentation, which only flatters it. Goal: ours >= 20x torchgeo's
patches/s.

Usage: python benchmarks/io_bench.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rasterio
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, write_results

from landcover.classes import ClassMapping
from landcover.config import Config, load_config
from landcover.synthetic.synthetic import write_synthetic_dataset

CONFIG = REPO / "configs" / "cpu.yaml"
SEED = 7
PREFIX = "bench"
GOAL_RATIO = 20.0
NOCACHE_BYTES = 1_000_000


def bench_config() -> Config:
    """The configuration the io and train parts share (the CPU config: patch 256, batch 8)."""
    return load_config(CONFIG, {"run.device": "cpu"})


def bench_data(tiles: int, size: int) -> Path:
    """Writes (once) and returns a folder of synthetic tile pairs for the benchmarks.

    The folder is cached under the temporary directory, keyed by tile count and size; the
    generator is deterministic, so a cached folder holds the same files a new one would.

    Args:
        tiles: Number of tile pairs.
        size: Tile side in pixels.

    Returns:
        The folder holding ``bench_{i:03d}_naip.tif`` / ``bench_{i:03d}_lc.tif``.
    """
    folder = Path(tempfile.gettempdir()) / "landcover-bench" / f"pairs-{tiles}x{size}-s{SEED}"
    done = folder / ".complete"
    if not done.exists():
        write_synthetic_dataset(folder, tiles, size, SEED, prefix=PREFIX)
        done.touch()
    return folder


def quiet_torchgeo() -> None:
    """Silences lightning's and torchgeo's informational logging and warnings.

    Call it again after importing lightning, whose import sets its loggers to INFO.
    """
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"(lightning|torchgeo|pytorch_lightning)(\.|$)")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")


def torchgeo_dataset(
    folder: Path,
    mapping: ClassMapping,
    normalize: tuple[list[float], list[float]] | None = None,
) -> Any:
    """torchgeo's view of the tile pairs: ``NAIP & ChesapeakeLabels`` on the same files.

    ``NAIP`` is torchgeo's class with only its file pattern changed (ours are named
    ``*_naip.tif``, not ``m_*``); the labels are a ``RasterDataset`` with ``is_image=False``
    whose transform maps Chesapeake codes to class indices (no-data to 255), as torchgeo's
    Chesapeake datasets do with their ordinal maps.

    Args:
        folder: Folder of ``*_naip.tif`` / ``*_lc.tif`` pairs.
        mapping: Our class mapping (its lookup table is applied to the labels).
        normalize: Optional per-band ``(mean, std)`` on the 0..1 scale, applied to each image
            sample (for training; the io part leaves imagery as read).

    Returns:
        A torchgeo ``IntersectionDataset`` yielding ``image`` (float32, C x H x W) and ``mask``
        (int64, H x W) samples.
    """
    from torchgeo.datasets import NAIP, RasterDataset

    lut = torch.from_numpy(mapping.lookup_table()).long()

    class BenchNAIP(NAIP):
        filename_glob = f"{PREFIX}_*_naip.tif"
        filename_regex = r".*"

    class ChesapeakeLabels(RasterDataset):
        filename_glob = f"{PREFIX}_*_lc.tif"
        is_image = False

    def map_codes(sample: dict[str, Any]) -> dict[str, Any]:
        sample["mask"] = lut[sample["mask"]]
        return sample

    image_transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    if normalize is not None:
        mean = torch.tensor(normalize[0]).view(-1, 1, 1) * 255.0
        std = torch.tensor(normalize[1]).view(-1, 1, 1) * 255.0

        def image_transform(sample: dict[str, Any]) -> dict[str, Any]:
            sample["image"] = (sample["image"] - mean) / std
            return sample

    images = BenchNAIP(str(folder), transforms=image_transform)
    labels = ChesapeakeLabels(str(folder), transforms=map_codes)
    return images & labels


def torchgeo_loader(dataset: Any, patch: int, batch: int, length: int) -> Any:
    """A ``DataLoader`` of random patches through torchgeo's ``RandomGeoSampler``.

    Args:
        dataset: A torchgeo ``GeoDataset``.
        patch: Patch side in pixels.
        batch: Batch size.
        length: Patches the sampler yields per pass.

    Returns:
        A one-process ``DataLoader`` (``num_workers=0``) collating with ``stack_samples``.
    """
    from torch.utils.data import DataLoader
    from torchgeo.datasets import stack_samples
    from torchgeo.samplers import RandomGeoSampler

    sampler = RandomGeoSampler(dataset, size=patch, length=length)
    return DataLoader(
        dataset, batch_size=batch, sampler=sampler, collate_fn=stack_samples, num_workers=0
    )


def _count(draw: Callable[[], int], seconds: float) -> tuple[int, float]:
    """Draws batches for ``seconds``; returns (patches, elapsed seconds)."""
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        n += draw()
    return n, time.perf_counter() - start


def run(quick: bool, out: Path) -> list[Goal]:
    """Measures patches/s of both samplers, writes ``io.json`` / ``io.csv``.

    Args:
        quick: Fewer tiles and shorter rounds (under 45 s).
        out: Results folder.

    Returns:
        The io goal (ours / torchgeo patches/s, target >= 20).
    """
    from landcover.data.pairs import discover_pairs
    from landcover.feed.memory import load_tiles
    from landcover.feed.sampler import PatchSampler, epoch_rng

    quiet_torchgeo()
    threads = 1
    torch.set_num_threads(threads)
    tiles, size = (4, 1024) if quick else (8, 2048)
    rounds, round_s = (2, 4.5) if quick else (3, 12.0)
    config = bench_config()
    cfg = config.data
    batch, patch = config.optim.batch_size, cfg.patch_size
    folder = bench_data(tiles, size)

    start = time.perf_counter()
    pairs = discover_pairs(str(folder), cfg.image_suffix, cfg.label_suffix)
    arrays, report = load_tiles(pairs, cfg.classes, len(cfg.bands))
    sampler = PatchSampler(
        arrays,
        patch,
        cfg.classes.num_classes,
        max_nodata_fraction=cfg.max_nodata_fraction,
        oversample_rare=cfg.oversample_rare,
        class_balance=cfg.class_balance,
        augment=True,
    )
    ours_setup = time.perf_counter() - start
    rng = epoch_rng(config.run.seed, 0, 0)

    def ours_batch() -> int:
        images, _ = sampler.batch(batch, rng)
        return images.shape[0]

    import_start = time.perf_counter()
    import torchgeo.datasets  # noqa: F401  (its import time is reported, not counted)

    torchgeo_import = time.perf_counter() - import_start
    start = time.perf_counter()
    dataset = torchgeo_dataset(folder, cfg.classes)
    loader = torchgeo_loader(dataset, patch, batch, length=10**9)
    batches = iter(loader)
    first = next(batches)
    tg_setup = time.perf_counter() - start
    shapes = {k: tuple(first[k].shape) for k in ("image", "mask")}

    def torchgeo_batch() -> int:
        return next(batches)["image"].shape[0]

    ours_batch()  # warm-up
    names = ("ours", "torchgeo", "torchgeo_nocache")
    totals = {name: [0, 0.0] for name in names}
    per_round: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            draw = ours_batch if name == "ours" else torchgeo_batch
            # GDAL's block cache (default 5% of RAM) holds all of this small data set; with a
            # 1 MB cache every patch decodes its blocks, as when a worker's data exceed it
            env = {"GDAL_CACHEMAX": NOCACHE_BYTES} if name == "torchgeo_nocache" else {}
            with rasterio.Env(**env):
                n, seconds = _count(draw, round_s)
            totals[name][0] += n
            totals[name][1] += seconds
            per_round[name].append(n / seconds)
    rate = {name: n / seconds for name, (n, seconds) in totals.items()}
    ratio = rate["ours"] / rate["torchgeo"]
    ratio_nocache = rate["ours"] / rate["torchgeo_nocache"]

    common = {"tiles": tiles, "tile_px": size, "patch": patch, "batch": batch}
    labels = {
        "ours": "ours: load_tiles + PatchSampler (D4 augment)",
        "torchgeo": "torchgeo: NAIP & labels, RandomGeoSampler",
        "torchgeo_nocache": "torchgeo, GDAL block cache 1 MB",
    }
    setup = {"ours": ours_setup, "torchgeo": tg_setup, "torchgeo_nocache": tg_setup}
    rows = [
        {
            "sampler": labels[name],
            **common,
            "patches": totals[name][0],
            "seconds": round(totals[name][1], 1),
            "patches_per_s": rate[name],
            "ours_over_this": rate["ours"] / rate[name],
            "setup_s": round(setup[name], 2),
            "setup_is": (
                "one-off load into memory + sampler"
                if name == "ours"
                else "dataset index + first batch"
            ),
        }
        for name in names
    ]
    note = (
        f"{tiles} tiles of {size}x{size} px, patch {patch}, batch {batch}, one process, "
        f"{threads} torch thread(s), {rounds} alternating rounds of {round_s:g} s each; "
        f"ours {rate['ours']:.0f} patches/s after a {ours_setup:.2f} s load into memory "
        f"({report.megabytes:.0f} MB), torchgeo {rate['torchgeo']:.0f} patches/s "
        f"({tg_setup:.2f} s to its first batch) with every block in GDAL's cache (this small "
        f"data set fits), {rate['torchgeo_nocache']:.0f} patches/s when each patch decodes "
        f"its blocks (ratio {ratio_nocache:.1f}); torchgeo does no augmentation here"
    )
    goal = Goal(
        part="io",
        goal="patches/s of our in-memory sampler (D4 augment) / torchgeo RandomGeoSampler",
        value=round(ratio, 2),
        target=f">= {GOAL_RATIO:g}",
        holds=ratio >= GOAL_RATIO,
        note=note,
    )
    extra = {
        "quick": quick,
        "settings": {
            **common,
            "rounds": rounds,
            "round_s": round_s,
            "torch_threads": threads,
            "config": str(CONFIG.relative_to(REPO)),
            "max_nodata_fraction": cfg.max_nodata_fraction,
            "oversample_rare": cfg.oversample_rare,
            "class_balance": cfg.class_balance,
            "nocache_gdal_cachemax_bytes": NOCACHE_BYTES,
        },
        "ratio": ratio,
        "ratio_nocache": ratio_nocache,
        "per_round_patches_per_s": per_round,
        "ours_memory_mb": report.megabytes,
        "torchgeo_import_s": torchgeo_import,
        "torchgeo_batch_shapes": shapes,
        "torchgeo_version": _torchgeo_version(),
    }
    write_results("io", rows, extra, out, [goal])
    return [goal]


def _torchgeo_version() -> str:
    import torchgeo

    return str(torchgeo.__version__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tiles, shorter rounds")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    run(args.quick, args.out)


if __name__ == "__main__":
    main()
