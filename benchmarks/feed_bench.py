"""Training feed ceiling: patches/s per host core of the feed, against one H100's appetite.

On a GPU node the model is fast enough that the host may not keep up: every training patch is
drawn from the tiles in memory, flipped or rotated (D4), assembled into a batch and pinned by
the host's cores. This part measures those host costs alone, the way ``landcover train`` runs
them (:meth:`~landcover.training.trainer.Trainer._train_epoch`): the sampler's
:meth:`~landcover.feed.sampler.PatchSampler.batch_with_tiles` (draw with class balance, D4,
batch assembly) in the :class:`~landcover.feed.prefetch.Prefetcher`'s thread, pinned when CUDA
is there, consumed by a stand-in model that costs nothing (the uint8 batch copied to the
device, if there is one, and dropped). The data settings are ``configs/default.yaml``'s, the GPU
config: patch 256, batch 16, class balance 0.5, D4, ``per_tile`` normalisation, photometric
0.8; the tiles are synthetic NAIP-like scenes (:func:`~landcover.synthetic.synthetic.synthesize_scene`)
held in memory, as a worker holds its share.

What training does on the device, after the uint8 batch crossed PCIe
(:class:`~landcover.feed.inputs.TrainingInput`: the photometric lookup tables and the
per-tile standardisation), is measured apart, on the CPU here (a GPU does it in microseconds).
The alternative, the host path, runs the same ``TrainingInput`` on the host in the feed's
thread and hands over float32 batches: four times the image bytes over PCIe, and the
augmentation's CPU time on top of the sampler's. ``tests/feed/test_feed.py`` checks that both paths
give the same batches.

Everything runs in this one process pinned to one core (``os.sched_setaffinity``, one torch
thread; the feed's thread shares that core with the consumer), the stages in alternating rounds
of equal length so a change of load hits all of them; patch counts and times are summed over
the rounds. A core's rate is patches per CPU second of the process (``time.process_time``: the
feed's thread and the consumer together), so another job time-sliced onto the same core does
not count against the feed; the wall-clock rate is in its own column. The figure of merit is
the headroom: host feed patches/s on one core x 12 cores per GPU (an ND H100 v5 node has 96
cores for 8 GPUs) over the cost model's samples/s of the default model on one H100 SXM in bf16
(:func:`~landcover.cluster.gpus.sample_seconds`, about 1,800/s). Goal: at least 2.

Whether D4 should move to the device too: the sampler with and without D4 (alternating rounds)
gives D4's share of the sampler's time, and a second measurement splits D4's cost between the
image and the label of a patch (``write_transformed`` with a drawn element against a plain
copy, each on a fresh window drawn by the sampler, CPU time). Measured (``benchmarks/README.md``,
"Training feed"): D4 is about 40 % of the sampler's CPU time per patch (about 125 of 315 us;
the label's uint8 flips and transposes cost as much as the image's 4-byte pixels), so doing it
on the device would make a host core about 1.6x faster. It stays on the host: one core already
feeds about 1.7 modelled H100s with it (headroom about 20 at 12 cores per GPU, against the
goal's 2), and in a CPU run the device is the same cores. ``data.augment_on: device`` does it
on the device instead (:func:`~landcover.feed.augment.transform_batch`, one gather per
tensor): its row measures that gather on the CPU (about 5x the host's flips there: an int64
index per pixel) and, with CUDA, on the GPU. On one H100 ``landcover train`` ran 1.34x faster
with D4 and photometric both off, which the CPU seconds above do not show (the feeder thread's
share of the GIL); ``scaling_bench.py``'s GPU section measures the option there.

Usage: python benchmarks/run.py feed [--quick]  (or: python benchmarks/feed_bench.py [--quick])
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, write_results

from landcover.cluster.gpus import sample_seconds
from landcover.config import DataConfig, load_config
from landcover.data.normalize import BandSums
from landcover.data.raster import TileArrays
from landcover.feed.augment import D4, d4_source_index, transform_batch, write_transformed
from landcover.feed.inputs import TrainingInput
from landcover.feed.prefetch import Prefetcher
from landcover.feed.sampler import PatchSampler, epoch_rng
from landcover.synthetic.synthetic import IMAGE_NODATA, synthesize_scene

CONFIG = REPO / "configs" / "default.yaml"
GPU_MODEL = "NVIDIA H100 SXM"
CORES_PER_GPU = 12
GOAL_HEADROOM = 2.0
SEED = 7

Round = Callable[[float], tuple[int, float, float]]
"""Runs one stage for about the given wall seconds; returns (patches, wall s, CPU s)."""


def make_tiles(cfg: DataConfig, count: int, size: int) -> list[TileArrays]:
    """Synthetic NAIP-like tiles in memory, labels as training class indices.

    Args:
        cfg: The data settings (for the class mapping).
        count: Number of tiles.
        size: Tile side in pixels.

    Returns:
        The tiles, ``(H, W, 4)`` uint8 imagery with its no-data mask.
    """
    table = cfg.classes.lookup_table()
    tiles = []
    for i in range(count):
        image, codes = synthesize_scene(size, size, np.random.default_rng([SEED, i]))
        pixels = np.ascontiguousarray(np.moveaxis(image, 0, -1))
        nodata = (pixels == IMAGE_NODATA).all(axis=-1)
        tiles.append(
            TileArrays(f"feed_{i:03d}", pixels, table[codes], nodata if nodata.any() else None)
        )
    return tiles


def resolve_band_stats(cfg: DataConfig, tiles: list[TileArrays]) -> DataConfig:
    """``cfg`` with ``auto`` band statistics replaced by the tiles' own (as training does)."""
    sums = BandSums.empty(tiles[0].image.shape[-1])
    for tile in tiles:
        sums.add(tile.image, tile.nodata)
    stats = sums.stats()
    if stats is None:
        raise ValueError("the synthetic tiles hold no valid pixel")
    changes = {"mean": stats.mean} if cfg.mean == "auto" else {}
    if cfg.std == "auto":
        changes["std"] = stats.std
    return cfg.replace(**changes)


def _count(
    step: Callable[[], int], seconds: float, synchronize: bool = False
) -> tuple[int, float, float]:
    """Calls ``step`` (patches per call) for ``seconds``; returns (patches, wall s, CPU s).

    ``synchronize``: wait for the GPU's queued work before the clocks stop (the GPU's own rate).
    """
    n, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        n += step()
    if synchronize:
        torch.cuda.synchronize()
    return n, time.perf_counter() - start, time.process_time() - cpu


def prefetched(
    make_batch: Callable[[], tuple[torch.Tensor, ...]],
    pin: bool,
    consume: Callable[[tuple[torch.Tensor, ...]], None],
    batch: int,
) -> Round:
    """A round of the feed through the real :class:`Prefetcher`, as the trainer runs it.

    The first batch of each round is taken before the clock starts (the thread's start).

    Args:
        make_batch: The producer (the feed's thread).
        pin: Pin the batch tensors (only with CUDA).
        consume: The stand-in model.
        batch: Patches per batch.

    Returns:
        The round.
    """

    def round_(seconds: float) -> tuple[int, float, float]:
        feed = Prefetcher(make_batch, steps=10**9, pin_memory=pin)
        batches = iter(feed)
        try:
            consume(next(batches))
            n, start, cpu = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - start < seconds:
                consume(next(batches))
                n += batch
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            # the thread may be part-way through the next batch: CPU time a hair high
            return n, time.perf_counter() - start, time.process_time() - cpu
        finally:
            feed.close()

    return round_


def d4_split(sampler: PatchSampler, rng: np.random.Generator, seconds: float) -> dict[str, float]:
    """Microseconds per patch of writing a patch into its batch slot, image and label apart.

    Each window is drawn by the sampler (as in a batch: the label window is read by the
    no-data check just before), then written with a drawn D4 element or, every other window,
    as a plain copy (what the sampler does with ``augment`` off): the same conditions as in
    :meth:`~landcover.feed.sampler.PatchSampler.batch_with_tiles`, a fresh window each time.

    Args:
        sampler: The sampler (its windows and tiles).
        rng: The random generator.
        seconds: Time to spend, about.

    Returns:
        ``image_copy``, ``image_d4``, ``label_copy``, ``label_d4``: microseconds per patch.
    """
    size, bands = sampler.patch_size, sampler.tiles[0].image.shape[2]
    image_dst = torch.empty((size, size, bands), dtype=torch.uint8)
    label_dst = torch.empty((size, size), dtype=torch.uint8)
    totals = dict.fromkeys(("image_copy", "image_d4", "label_copy", "label_d4"), 0.0)
    counts = {"copy": 0, "d4": 0}
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for kind in ("copy", "d4"):
            _, image, label = sampler._draw(rng)
            transform = D4.draw(rng) if kind == "d4" else None
            tick = time.thread_time()  # CPU time: a shared core's other jobs do not count
            write_transformed(image_dst, image, transform)
            tock = time.thread_time()
            write_transformed(label_dst, label, transform)
            totals[f"image_{kind}"] += tock - tick
            totals[f"label_{kind}"] += time.thread_time() - tock
            counts[kind] += 1
    return {key: value / counts[key.split("_")[1]] * 1e6 for key, value in totals.items()}


def run(quick: bool, out: Path) -> list[Goal]:
    """Measures the training feed on one core, writes ``feed.json`` / ``feed.csv``.

    Args:
        quick: Smaller tiles and shorter rounds (under a minute).
        out: Results folder.

    Returns:
        The headroom goal (host feed x 12 cores / modelled H100 samples/s, target >= 2) and
        the figures it rests on (host path headroom, D4's share), reported.
    """
    affinity = os.sched_getaffinity(0)
    threads = torch.get_num_threads()
    core = max(affinity)
    os.sched_setaffinity(0, {core})  # this thread and the threads it starts
    torch.set_num_threads(1)
    try:
        return _run(quick, out, core)
    finally:
        os.sched_setaffinity(0, affinity)
        torch.set_num_threads(threads)


def _run(quick: bool, out: Path, core: int) -> list[Goal]:
    load_before = os.getloadavg()
    count, size = (4, 1024) if quick else (8, 2048)
    rounds, round_s = (2, 1.0) if quick else (3, 4.0)
    config = load_config(CONFIG, {"run.device": "cpu"})
    cfg, batch = config.data, config.optim.batch_size
    start = time.perf_counter()
    tiles = make_tiles(cfg, count, size)
    synth_s = time.perf_counter() - start
    cfg = resolve_band_stats(cfg, tiles)

    def sampler_with(augment: bool) -> PatchSampler:
        return PatchSampler.from_config(tiles, cfg, augment)

    sampler, plain = sampler_with(cfg.augment), sampler_with(False)
    rng = epoch_rng(config.run.seed, 0, 0)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    host = torch.device("cpu")
    prepare_host = TrainingInput(cfg, tiles, host, config.run.seed)
    prepare_host.start_epoch(0, 0)
    prepare_host_plain = TrainingInput(cfg.model_copy(update={"photometric": 0.0}), tiles, host)

    def draw() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return sampler.batch_with_tiles(batch, rng)

    def host_path() -> tuple[torch.Tensor, torch.Tensor]:
        images, labels, index = sampler.batch_with_tiles(batch, rng)
        return prepare_host(images, index), labels

    def to_device(item: tuple[torch.Tensor, ...]) -> None:  # the stand-in model
        for tensor in item:
            tensor.to(device, non_blocking=True)

    ready = [draw() for _ in range(8)]  # batches for the device-side work, cycled
    raw = [sampler.batch_for_device(batch, rng) for _ in range(8)]  # D4 left to the device
    turn = iter(range(10**12))

    def device_d4(on: list[tuple[torch.Tensor, ...]], table: torch.Tensor) -> Callable[[], int]:
        def step() -> int:
            images, labels, _, codes = on[next(turn) % len(on)]
            transform_batch(images, labels, codes, table)
            return images.shape[0]

        return step

    def device_work(prepare: TrainingInput) -> Callable[[], int]:
        def step() -> int:
            images, _, index = ready[next(turn) % len(ready)]
            prepare(images, index)
            return images.shape[0]

        return step

    stages: dict[str, Round] = {
        "sampler": lambda s: _count(lambda: len(draw()[0]), s),
        "sampler_no_d4": lambda s: _count(lambda: len(plain.batch_with_tiles(batch, rng)[0]), s),
        "feed": prefetched(draw, cuda, to_device, batch),
        "device_work": lambda s: _count(device_work(prepare_host), s),
        "device_normalise": lambda s: _count(device_work(prepare_host_plain), s),
        "device_d4": lambda s: _count(device_d4(raw, d4_source_index(cfg.patch_size)), s),
        "host_path": prefetched(host_path, cuda, to_device, batch),
    }
    if cuda:  # the same work where training does it
        prepare_device = TrainingInput(cfg, tiles, device, config.run.seed)
        on_device = [(images.to(device), index) for images, _, index in ready]

        def gpu_work() -> int:
            images, index = on_device[next(turn) % len(on_device)]
            prepare_device(images, index)
            return images.shape[0]

        raw_gpu = [tuple(t.to(device) for t in item) for item in raw]
        d4_gpu = device_d4(raw_gpu, d4_source_index(cfg.patch_size, device))
        stages["device_work_gpu"] = lambda s: _count(gpu_work, s, synchronize=True)
        stages["device_d4_gpu"] = lambda s: _count(d4_gpu, s, synchronize=True)
    for stage in stages.values():  # warm-up
        stage(0.05)
    totals = {name: [0, 0.0, 0.0] for name in stages}
    per_round: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(rounds):
        for name, stage in stages.items():
            n, wall, cpu = stage(round_s)
            totals[name][0] += n
            totals[name][1] += wall
            totals[name][2] += cpu
            per_round[name].append(round(n / cpu, 1))
    split = d4_split(sampler, rng, rounds * round_s / 2)
    load_after = os.getloadavg()
    wall_rate = {name: n / wall for name, (n, wall, _) in totals.items()}
    # patches per CPU second of the pinned process: what the core gives when it is ours alone
    # (on a shared core the wall-clock rate counts the other jobs' time slices too)
    rate = {name: n / cpu for name, (n, _, cpu) in totals.items()}
    if cuda:  # the GPU's own rate, not the host's time spent launching it
        rate["device_work_gpu"] = wall_rate["device_work_gpu"]
        rate["device_d4_gpu"] = wall_rate["device_d4_gpu"]

    gpu_rate = 1.0 / sample_seconds(GPU_MODEL)
    pinned = "pinned" if cuda else "not pinned: no CUDA here"
    image_bytes = cfg.patch_size**2 * len(cfg.bands)
    label_bytes = cfg.patch_size**2
    uint8_bytes = image_bytes + label_bytes + 8  # + the tile index (int64)
    float_bytes = 4 * image_bytes + label_bytes
    d4_us = 1e6 / rate["sampler"] - 1e6 / rate["sampler_no_d4"]
    d4_share = d4_us / (1e6 / rate["sampler"])

    def headroom(name: str) -> float:
        return round(rate[name] * CORES_PER_GPU / gpu_rate, 2)

    described = {
        "sampler": (
            "sampler.batch_with_tiles: draw (class balance 0.5) + D4 + batch assembly",
            uint8_bytes,
        ),
        "sampler_no_d4": ("the same without D4 (augment off)", uint8_bytes),
        "feed": (
            f"host feed: Prefetcher(batch_with_tiles), {pinned}, stand-in model "
            "(training's path: uint8 over PCIe)",
            uint8_bytes,
        ),
        "device_work": (
            "device-side work, on the CPU: TrainingInput (photometric 0.8 + per_tile)",
            None,
        ),
        "device_normalise": (
            "device-side work, on the CPU: TrainingInput normalisation only (photometric 0)",
            None,
        ),
        "device_d4": (
            "device-side D4, on the CPU: transform_batch (data.augment_on: device)",
            None,
        ),
        "host_path": (
            f"host path: Prefetcher(batch_with_tiles + TrainingInput on the host), {pinned}, "
            "stand-in model (float32 over PCIe)",
            float_bytes,
        ),
    }
    if cuda:
        described["device_work_gpu"] = (
            f"device-side work on the GPU ({torch.cuda.get_device_name(0)}): TrainingInput",
            None,
        )
        described["device_d4_gpu"] = (
            f"device-side D4 on the GPU ({torch.cuda.get_device_name(0)}): transform_batch",
            None,
        )

    def row(stage: str, name: str = "", pcie: int | None = None, us: float = 0.0) -> dict:
        """A table row: a measured stage (``name``) or a figure (``us`` per patch)."""
        return {
            "stage": stage,
            "patches_per_cpu_s": round(rate[name], 1) if name else "",
            "patches_per_s_wall": round(wall_rate[name], 1) if name else "",
            "us_per_patch": round(1e6 / rate[name] if name else us, 1),
            "pcie_bytes_per_patch": "" if pcie is None else pcie,
            "x12_cores_over_h100": headroom(name) if name and "device" not in name else "",
        }

    rows = [row(what, name, pcie) for name, (what, pcie) in described.items()]
    extra_image = split["image_d4"] - split["image_copy"]
    extra_label = split["label_d4"] - split["label_copy"]
    rows.append(
        row(
            f"D4 on the host: sampler with - without D4 ({100 * d4_share:.0f} % of the "
            f"sampler's time; over a plain copy: image {extra_image:.0f} us, label "
            f"{extra_label:.0f} us)",
            us=d4_us,
        )
    )
    modelled = f"modelled consumption: default model, one {GPU_MODEL}, bf16 (cost model)"
    rows.append(row(modelled, us=1e6 / gpu_rate))
    rows[-1]["patches_per_cpu_s"] = rows[-1]["patches_per_s_wall"] = round(gpu_rate, 1)
    cpu_share = totals["feed"][2] / totals["feed"][1]
    load = f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    settings = (
        f"{count} synthetic tiles of {size} px in memory, patch {cfg.patch_size}, batch {batch}, "
        f"class balance {cfg.class_balance}, D4 {cfg.augment}, {cfg.normalize}, photometric "
        f"{cfg.photometric}; one process pinned to core {core}, 1 torch thread, {rounds} "
        f"alternating rounds of {round_s:g} s per stage; per core = per CPU second of the "
        f"process (the feed had {cpu_share:.2f} of the core's wall clock); {load}"
    )
    feed_headroom = headroom("feed")
    goals = [
        Goal(
            "feed",
            f"host feed patches/s on 1 core x {CORES_PER_GPU} cores / modelled samples/s of the "
            f"default model on one {GPU_MODEL} in bf16 (headroom)",
            feed_headroom,
            f">= {GOAL_HEADROOM:g}",
            feed_headroom >= GOAL_HEADROOM,
            f"{rate['feed']:.0f} patches/s per core x {CORES_PER_GPU} against {gpu_rate:.0f} "
            f"samples/s; {pinned}; {settings}",
        ),
        Goal(
            "feed",
            "host path (normalised and augmented on the host, float32 over PCIe): headroom as "
            "above",
            headroom("host_path"),
            "report",
            None,
            f"{rate['host_path']:.0f} patches/s per core; {float_bytes:,} bytes per patch over "
            f"PCIe against {uint8_bytes:,} ({float_bytes / uint8_bytes:.1f}x)",
        ),
        Goal(
            "feed",
            "D4's share of the sampler's host time per patch",
            round(d4_share, 3),
            "report",
            None,
            f"{d4_us:.0f} us of {1e6 / rate['sampler']:.0f} us per patch (CPU); over a plain "
            f"copy, measured apart: image {extra_image:.0f} us, label {extra_label:.0f} us",
        ),
    ]
    extra = {
        "quick": quick,
        "settings": {
            "config": str(CONFIG.relative_to(REPO)),
            "tiles": count,
            "tile_px": size,
            "patch": cfg.patch_size,
            "batch": batch,
            "class_balance": cfg.class_balance,
            "augment": cfg.augment,
            "normalize": cfg.normalize,
            "photometric": cfg.photometric,
            "rounds": rounds,
            "round_s": round_s,
            "core": core,
            "torch_threads": 1,
            "pinned": cuda,
            "device": str(device),
        },
        "load_average_before": load_before,
        "load_average_after": load_after,
        "synthesis_s": round(synth_s, 2),
        "patches_per_cpu_s": rate,
        "per_round_patches_per_cpu_s": per_round,
        "patches_per_s_wall": wall_rate,
        "modelled_h100_samples_per_s": gpu_rate,
        "cores_per_gpu": CORES_PER_GPU,
        "d4_us_per_patch": d4_us,
        "d4_share": d4_share,
        "d4_split_us_per_patch": split,
        "pcie_gb_per_s_at_modelled_rate": {
            "uint8": uint8_bytes * gpu_rate / 1e9,
            "float32": float_bytes * gpu_rate / 1e9,
        },
    }
    write_results("feed", rows, extra, out, goals)
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller tiles, shorter rounds")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    args = parser.parse_args()
    run(args.quick, args.out or (RESULTS / "quick" if args.quick else RESULTS))


if __name__ == "__main__":
    main()
