"""Photometric augmentation: landcover's batched torch pass against albumentations per patch.

Both turn 64 patches of 256 px x 4 bands (uint8 NAIP, ``(B, H, W, C)`` as the sampler gives
them) into the perturbed float batch on the 0..1 scale, with per-band brightness/contrast,
gamma, Gaussian noise and a Gaussian blur on a quarter of the patches, every patch perturbed.
landcover: :func:`landcover.feed.photometric.photometric_uint8`, the path training uses (the
uint8 batch through per-(patch, band) lookup tables, noise and blur on top; on the CPU here,
on the GPU in CUDA training), and, for reference, :func:`~landcover.feed.photometric.photometric`
on the float batch (per-pixel arithmetic); albumentations 2.x: ``A.Compose`` called on each
patch (HWC uint8, as a DataLoader worker would), then the batch stacked and made float (one
float allocation, as ours). Best of ``repeats`` timings, on 1 thread (torch's and OpenCV's; a
training worker's share of 2 cores).

Usage: python benchmarks/run.py augment  (or: python benchmarks/augment_bench.py)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results

from landcover.feed.photometric import PhotometricRanges, photometric, photometric_uint8


def _patches(n: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (n, size, size, 4), dtype=np.uint8)


def _best(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def time_torch(patches: np.ndarray, repeats: int) -> float:
    """Seconds for landcover's fast path: the uint8 batch in, the perturbed float batch out."""
    batch = torch.from_numpy(patches)
    gen = torch.Generator().manual_seed(0)
    ranges = PhotometricRanges()

    def run() -> torch.Tensor:
        return photometric_uint8(batch, 1.0, gen, ranges, channels_last=True)

    return _best(run, repeats)


def time_torch_float(patches: np.ndarray, repeats: int) -> float:
    """Seconds for landcover's float pass: the batch made float, then perturbed per pixel."""
    batch = torch.from_numpy(patches)
    gen = torch.Generator().manual_seed(0)
    ranges = PhotometricRanges()

    def run() -> torch.Tensor:
        x = batch.permute(0, 3, 1, 2).float().mul_(1.0 / 255.0)
        return photometric(x, 1.0, gen, ranges)

    return _best(run, repeats)


def time_albumentations(patches: np.ndarray, repeats: int) -> float | None:
    """Seconds for albumentations on each patch, then stacking to a float batch."""
    try:
        import albumentations as A
        import cv2
    except ImportError:
        return None
    cv2.setNumThreads(1)
    pipeline = A.Compose(
        [
            A.RandomBrightnessContrast(brightness_limit=0.12, contrast_limit=0.4, p=1.0),
            A.RandomGamma(gamma_limit=(70, 140), p=1.0),
            A.MultiplicativeNoise(multiplier=(0.67, 1.5), per_channel=True, p=1.0),
            A.GaussNoise(std_range=(0.0, 0.02), p=1.0),
            A.GaussianBlur(blur_limit=(3, 5), sigma_limit=(0.4, 1.2), p=0.25),
        ]
    )

    def run() -> torch.Tensor:
        out = [pipeline(image=p)["image"] for p in patches]
        return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).float().mul_(1.0 / 255.0)

    return _best(run, repeats)


def run(quick: bool, out: Path, n: int = 64, size: int = 256) -> list[Goal]:
    """Runs the augmentation benchmark part.

    Args:
        quick: Fewer repeats.
        out: Results folder.
        n: Patches per batch.
        size: Patch side.

    Returns:
        The comparison, as a goal: albumentations time / landcover time, at least 1.
    """
    torch.set_num_threads(1)
    repeats = 3 if quick else 10
    patches = _patches(n, size)
    ours = time_torch(patches, repeats)
    floats = time_torch_float(patches, repeats)
    theirs = time_albumentations(patches, repeats)
    rows = [
        {"implementation": "landcover batched torch, uint8 in (training's path)",
         "seconds": round(ours, 4), "patches_per_s": round(n / ours, 1)},
        {"implementation": "landcover batched torch, float in",
         "seconds": round(floats, 4), "patches_per_s": round(n / floats, 1)},
    ]  # fmt: skip
    if theirs is not None:
        rows.append(
            {"implementation": "albumentations per patch", "seconds": round(theirs, 4),
             "patches_per_s": round(n / theirs, 1)}
        )  # fmt: skip
    ratio = None if theirs is None else round(theirs / ours, 2)
    goal = Goal(
        "augment",
        f"photometric augmentation of {n} patches of {size} px, 4 bands, 1 CPU thread, uint8 "
        "in, float out: albumentations time / landcover time",
        ratio,
        ">= 1",
        None if ratio is None else ratio >= 1,
        "albumentations not installed"
        if theirs is None
        else "landcover's uint8 path: lookup tables per (patch, band), noise from 16-bit "
        "codes, separable blur of the blurred patches only; both pay for page-faulting the "
        "fresh float batch",
    )
    write_results("augment", rows, {"patches": n, "size": size}, out, [goal])
    return [goal]


if __name__ == "__main__":
    run("--quick" in sys.argv, RESULTS / "quick" if "--quick" in sys.argv else RESULTS)
