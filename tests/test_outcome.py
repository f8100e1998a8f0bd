"""Outcome checks: the shipped CPU config must learn every class, judged on unseen tiles.

Mechanics tests (the loss falls, replicas agree, files are written) pass on a model that never
learns a class; these tests look at the result instead. Training runs through the real CLI
with ``configs/cpu.yaml`` (the demo's config) on freshly generated synthetic tiles, then
``landcover predict`` maps tiles generated with another seed, and per-class IoU is computed
here with numpy from the class maps and the label files, independently of landcover's metrics.
"""

from pathlib import Path

import numpy as np
import pytest
import rasterio

from landcover.data.synthetic import write_synthetic_dataset

from conftest import REPO, run_cli

NAMES = ["water", "tree_canopy", "low_vegetation", "barren", "impervious", "road"]
# Chesapeake 7-class codes 1..6 are the six classes of the chesapeake7 mapping, in order
CODE_TO_CLASS = {code: code - 1 for code in range(1, 7)}
MIN_CLASS_IOU = 0.5


def per_class_iou(maps: Path, data: Path, names: list[str]) -> dict[str, float]:
    """IoU of each class over every tile of ``data``: pixels where the label has a class code
    and the image has data (the synthetic imagery's no-data is 0 in every band)."""
    k = len(names)
    counts = np.zeros((k, k), dtype=np.int64)
    for image_path in sorted(data.glob("*_naip.tif")):
        stem = image_path.name[: -len("_naip.tif")]
        with rasterio.open(image_path) as src:
            image_valid = np.any(src.read() != 0, axis=0)
        with rasterio.open(data / f"{stem}_lc.tif") as src:
            codes = src.read(1)
        with rasterio.open(maps / f"{stem}_naip_class.tif") as src:
            pred = src.read(1).astype(np.int64)
        truth = np.full(codes.shape, -1, dtype=np.int64)
        for code, index in CODE_TO_CLASS.items():
            truth[codes == code] = index
        keep = (truth >= 0) & image_valid
        assert np.all(pred[keep] < k), "a labelled pixel with image data was mapped as no-data"
        counts += np.bincount(truth[keep] * k + pred[keep], minlength=k * k).reshape(k, k)
    tp = np.diag(counts)
    union = counts.sum(axis=0) + counts.sum(axis=1) - tp
    assert np.all(counts.sum(axis=1) > 0), "every class must occur in the unseen tiles"
    return {name: float(tp[i] / union[i]) for i, name in enumerate(names)}


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_cpu_config_learns_every_class_on_unseen_tiles(tmp_path: Path) -> None:
    train_data = tmp_path / "train"
    write_synthetic_dataset(train_data, tiles=12, size=512, seed=0, prefix="sample")
    unseen = tmp_path / "unseen"
    write_synthetic_dataset(unseen, tiles=2, size=512, seed=2026, prefix="unseen")
    run = tmp_path / "run"
    result = run_cli(
        "train",
        "--config",
        str(REPO / "configs" / "cpu.yaml"),
        "--data",
        str(train_data),
        "--out",
        str(run),
        "--workers",
        "2",
        "--epochs",
        "3",
        timeout=2000,
    )
    assert result.returncode == 0, result.stderr
    maps = tmp_path / "maps"
    result = run_cli(
        "predict",
        str(unseen / "*_naip.tif"),
        "--checkpoint",
        str(run / "checkpoints" / "last.pt"),
        "--out",
        str(maps),
        "--no-preview",
    )
    assert result.returncode == 0, result.stderr
    iou = per_class_iou(maps, unseen, NAMES)
    report = ", ".join(f"{name} {value:.3f}" for name, value in iou.items())
    unlearned = [name for name, value in iou.items() if value < MIN_CLASS_IOU]
    assert not unlearned, f"classes not learned on unseen tiles ({report})"
    assert np.mean(list(iou.values())) >= 0.75, report
