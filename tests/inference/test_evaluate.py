"""landcover evaluate: exact metrics on a hand-built case and agreement with numpy."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
from rasterio.transform import from_origin
from rasterio.warp import Resampling, reproject

from landcover.classes import resolve_mapping

from conftest import assert_one_line_error, run_cli

NAMES = ["water", "tree_canopy", "low_vegetation", "barren", "impervious", "road"]


@pytest.fixture
def constant_checkpoint(checkpoint: Path, tmp_path: Path) -> Path:
    """The tiny model with its head rewired to predict tree_canopy (class 1) everywhere."""
    state = torch.load(checkpoint, weights_only=True)
    state["model"]["segmentation_head.0.weight"].zero_()
    bias = torch.zeros_like(state["model"]["segmentation_head.0.bias"])
    bias[1] = 10.0
    state["model"]["segmentation_head.0.bias"] = bias
    path = tmp_path / "constant.pt"
    torch.save(state, path)
    return path


def _write(path: Path, array: np.ndarray, nodata: int | None) -> None:
    profile = {
        "driver": "GTiff",
        "width": array.shape[2],
        "height": array.shape[1],
        "count": array.shape[0],
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": from_origin(350000, 4300000, 1, 1),
        "nodata": nodata,
    }
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(array)


def test_hand_built_case_gives_exact_metrics(constant_checkpoint: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # labels (7-class codes): 6 water, 4 tree, 6 field, 2 label no-data, 2 pixels of image no-data
    label = np.array(
        [[1, 1, 1, 2, 2, 3], [1, 1, 1, 2, 2, 3], [3, 3, 3, 3, 15, 15]],
        dtype=np.uint8,
    )
    image = np.full((4, 3, 6), 120, dtype=np.uint8)
    image[:, 0, 0:2] = 0  # image no-data over two water pixels
    _write(data / "hand_naip.tif", image, nodata=0)
    _write(data / "hand_lc.tif", label[None], nodata=15)
    out = tmp_path / "eval"
    result = run_cli(
        "evaluate", "--checkpoint", str(constant_checkpoint), "--data", str(data), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    # valid pixels: 4 water, 4 tree, 6 field; every prediction is tree_canopy
    with (out / "confusion.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["true \\ predicted", *NAMES]
    matrix = [[int(v) for v in r[1:]] for r in rows[1:]]
    expected = np.zeros((6, 6), dtype=int)
    expected[0, 1], expected[1, 1], expected[2, 1] = 4, 4, 6
    assert matrix == expected.tolist()
    assert metrics["iou"] == {
        "water": 0.0,
        "tree_canopy": 4 / 14,
        "low_vegetation": 0.0,
        "barren": None,
        "impervious": None,
        "road": None,
    }
    assert metrics["miou"] == pytest.approx((0 + 4 / 14 + 0) / 3)
    assert metrics["accuracy"] == pytest.approx(4 / 14)
    assert metrics["precision"]["tree_canopy"] == pytest.approx(4 / 14)
    assert metrics["recall"]["tree_canopy"] == 1.0
    assert metrics["f1"]["tree_canopy"] == pytest.approx(2 * 4 / (4 + 14))
    assert metrics["support"] == {
        "water": 4,
        "tree_canopy": 4,
        "low_vegetation": 6,
        "barren": 0,
        "impervious": 0,
        "road": 0,
    }
    assert (out / "confusion.png").stat().st_size > 5_000
    assert "mean IoU" in result.stdout


def test_matches_an_independent_numpy_computation(
    tiny_data: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    result = run_cli(
        "evaluate", "--checkpoint", str(checkpoint), "--data", str(tiny_data), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    maps = tmp_path / "maps"
    result = run_cli(
        "predict",
        str(tiny_data / "*_naip.tif"),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(maps),
        "--no-preview",
    )
    assert result.returncode == 0, result.stderr
    mapping = resolve_mapping("chesapeake7")
    counts = np.zeros((6, 6), dtype=np.int64)
    for image in sorted(tiny_data.glob("*_naip.tif")):
        stem = image.name[: -len("_naip.tif")]
        pred = rasterio.open(maps / f"{stem}_naip_class.tif").read(1).astype(np.int64)
        truth = mapping.encode(rasterio.open(tiny_data / f"{stem}_lc.tif").read(1)).astype(np.int64)
        keep = (truth != 255) & (pred != 255)
        counts += np.bincount(truth[keep] * 6 + pred[keep], minlength=36).reshape(6, 6)
    tp = np.diag(counts)
    union = counts.sum(0) + counts.sum(1) - tp
    for i, name in enumerate(NAMES):
        if union[i]:
            assert metrics["iou"][name] == pytest.approx(tp[i] / union[i], abs=1e-12)
    assert metrics["accuracy"] == pytest.approx(tp.sum() / counts.sum(), abs=1e-12)
    assert metrics["pixels"] == int(counts.sum())
    assert len(metrics["tiles"]) == 8


def test_label_on_another_grid_is_reprojected(
    tiny_data: Path, checkpoint: Path, tmp_path: Path
) -> None:
    """A label shifted by 10.5 m is brought onto the image grid; metrics match numpy on that."""
    data = tmp_path / "data"
    data.mkdir()
    image = rasterio.open(tiny_data / "synth_000_naip.tif").read()
    label = rasterio.open(tiny_data / "synth_000_lc.tif").read()
    _write(data / "a_naip.tif", image, nodata=0)
    shifted = from_origin(350010.5, 4300000, 1, 1)
    with rasterio.open(
        data / "a_lc.tif",
        "w",
        driver="GTiff",
        width=label.shape[2],
        height=label.shape[1],
        count=1,
        dtype="uint8",
        crs="EPSG:26918",
        transform=shifted,
        nodata=15,
    ) as ds:
        ds.write(label)
    out = tmp_path / "e"
    result = run_cli(
        "evaluate", "--checkpoint", str(checkpoint), "--data", str(data), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    maps = tmp_path / "maps"
    assert (
        run_cli(
            "predict", str(data / "a_naip.tif"), "--checkpoint", str(checkpoint), "--out", str(maps)
        ).returncode
        == 0
    )
    pred = rasterio.open(maps / "a_naip_class.tif").read(1).astype(np.int64)
    aligned = np.full(pred.shape, 15, dtype=np.uint8)
    reproject(
        label[0],
        aligned,
        src_transform=shifted,
        src_crs="EPSG:26918",
        src_nodata=15,
        dst_transform=from_origin(350000, 4300000, 1, 1),
        dst_crs="EPSG:26918",
        dst_nodata=15,
        resampling=Resampling.nearest,
    )
    truth = resolve_mapping("chesapeake7").encode(aligned).astype(np.int64)
    keep = (truth != 255) & (pred != 255)
    counts = np.bincount(truth[keep] * 6 + pred[keep], minlength=36).reshape(6, 6)
    assert metrics["pixels"] == int(counts.sum())
    assert metrics["accuracy"] == pytest.approx(np.trace(counts) / counts.sum(), abs=1e-12)


def test_another_models_metrics_are_not_replaced_unasked(
    checkpoint: Path, constant_checkpoint: Path, tiny_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    some = tmp_path / "some"  # two of the eight tiles
    some.mkdir()
    for name in sorted(p.name for p in tiny_data.glob("*_naip.tif"))[:2]:
        for suffix in ("_naip.tif", "_lc.tif"):
            (some / name.replace("_naip.tif", suffix)).symlink_to(
                tiny_data / name.replace("_naip.tif", suffix)
            )

    def evaluate(model: Path, data: Path, *extra: str):
        return run_cli(
            "evaluate", "--checkpoint", str(model), "--data", str(data), "--out", str(out), *extra
        )

    assert evaluate(checkpoint, tiny_data).returncode == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(first) == {"metrics.json", "confusion.csv", "confusion.png"}

    # another model, or the same model on other tiles: one line, the folder as it was
    refused = evaluate(constant_checkpoint, tiny_data)
    assert_one_line_error(refused, str(out), f"model {checkpoint}", "--overwrite")
    refused = evaluate(checkpoint, some)
    assert_one_line_error(refused, str(out), "this model on other tiles (8 tiles)", "--overwrite")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first

    # the same model on the same tiles again replaces them (its path spelt another way too);
    # --overwrite replaces anything
    assert evaluate(checkpoint, tiny_data).returncode == 0
    respelt = Path(f"{checkpoint.parent}/../{checkpoint.parent.name}/./{checkpoint.name}")
    assert evaluate(respelt, tiny_data).returncode == 0
    assert evaluate(constant_checkpoint, some, "--overwrite").returncode == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["checkpoint"] == str(constant_checkpoint)
    assert sorted(t["tile"] for t in metrics["tiles"]) == sorted(
        p.name.removesuffix("_naip.tif") for p in some.glob("*_naip.tif")
    )


def test_a_manifest_with_splits_is_scored_on_its_test_rows(
    checkpoint: Path, tiny_data: Path, tmp_path: Path
) -> None:
    images = sorted(tiny_data.glob("*_naip.tif"))
    splits = ["train"] * 5 + ["val", "test", "test"]
    manifest = tmp_path / "manifest.csv"
    rows = [
        f"{i},{str(i).replace('_naip', '_lc')},{s}" for i, s in zip(images, splits, strict=True)
    ]
    manifest.write_text("image,label,split\n" + "\n".join(rows) + "\n")
    names = [i.name.removesuffix(".tif") for i in images]

    def scored(*extra: str) -> list[str]:
        out = tmp_path / "-".join(("eval", *extra))
        result = run_cli(
            "evaluate",
            "--checkpoint",
            str(checkpoint),
            "--data",
            str(manifest),
            "--out",
            str(out),
            *extra,
        )
        assert result.returncode == 0, result.stderr
        return sorted(t["tile"] for t in json.loads((out / "metrics.json").read_text())["tiles"])

    assert scored() == names[6:]  # the test rows, not the rows the model trained on
    assert scored("--split", "val") == names[5:6]
    assert scored("--split", "all") == names

    no_test = tmp_path / "no_test.csv"
    no_test.write_text("\n".join(manifest.read_text().splitlines()[:7]) + "\n")
    result = run_cli(
        "evaluate",
        "--checkpoint",
        str(checkpoint),
        "--data",
        str(no_test),
        "--out",
        str(tmp_path / "x"),
    )
    assert_one_line_error(result, "no test row among its 6 rows", "--split val, train or all")
    result = run_cli(
        "evaluate", "--checkpoint", str(checkpoint), "--data", str(tiny_data), "--out", str(tmp_path / "y"),
        "--split", "test",
    )  # fmt: skip
    assert_one_line_error(result, "--split picks a manifest's rows")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
