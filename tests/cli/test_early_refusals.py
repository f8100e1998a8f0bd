"""Refusals before any work and any folder, and honest errors (issue 42, items 6 and 8).

Every command is a real ``python -m landcover`` subprocess on GeoTIFFs written here, with
conftest's one-epoch checkpoint (patch 64: default window 256, so overlaps stop at 127).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
from test_disk_errors import fill_leaving, tiny_disk  # noqa: F401 - the fixture

from landcover.diskerrors import human_bytes

from conftest import assert_one_line_error, run_cli, write_naip_tile

SUBPROCESS = {"LANDCOVER_TEST_SUBPROCESS": "1"}
SIG = "OUTPUTSIGNATURE0123456789abcdef"
UTM = "EPSG:26918"
CORNER = (400000.0, 4300000.0)


def write_pair(folder: Path, labelled: bool = True) -> Path:
    """A 64 px tile pair; ``labelled=False``: every label pixel is no-data (15)."""
    folder.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(5).integers(20, 230, size=(4, 64, 64), dtype=np.uint8)
    image = write_naip_tile(folder / "t_naip.tif", pixels, UTM, 1.0, CORNER)
    codes = np.random.default_rng(6).integers(1, 7, size=(64, 64)).astype(np.uint8)
    if not labelled:
        codes[:] = 15
    with rasterio.open(image) as src:
        profile = {**src.profile, "count": 1, "nodata": 15}
    with rasterio.open(folder / "t_lc.tif", "w", **profile) as ds:
        ds.write(codes[None])
    return image


def predict(checkpoint: Path, tile: Path, out: str, *extra: str):
    return run_cli(
        "predict", str(tile), "-k", str(checkpoint), "--out", out, "--device", "cpu", *extra,
        env=SUBPROCESS,
    )  # fmt: skip


def evaluate(checkpoint: Path, data: Path, out: str, *extra: str):
    return run_cli(
        "evaluate", "-k", str(checkpoint), "--data", str(data), "--out", out, "--device", "cpu",
        *extra, env=SUBPROCESS,
    )  # fmt: skip


# --- 6: a SAS token in an output URL is refused before any work --------------------------------


def test_predict_refuses_an_output_url_with_a_signature_before_any_work(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    tile = write_pair(tmp_path / "in")
    result = predict(quick_checkpoint, tile, f"az://c/maps?sv=1&sig={SIG}")
    line = assert_one_line_error(result, "shared access signature", "az://c/maps", "sig=***")
    assert SIG not in result.stdout + result.stderr
    assert result.stderr.splitlines() == [line]  # no tile measured, predicted or logged


def test_evaluate_refuses_an_output_url_with_a_signature(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    write_pair(tmp_path / "in")
    result = evaluate(quick_checkpoint, tmp_path / "in", f"az://c/eval?sv=1&sig={SIG}")
    line = assert_one_line_error(result, "shared access signature", "sig=***")
    assert SIG not in result.stdout + result.stderr
    assert result.stderr.splitlines() == [line]


# --- 8: no scorable pixel is an error; refusals leave no folder; the free space is true ------


def test_evaluate_with_no_scorable_pixel_is_an_error(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    write_pair(tmp_path / "in", labelled=False)
    out = tmp_path / "eval"
    result = evaluate(quick_checkpoint, tmp_path / "in", str(out))
    assert_one_line_error(result, "no pixel to score", "1 tile")
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [(("--window", "0"), "--window 0"), (("--overlap", "128"), "--overlap 128")],
)
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_refused_window_or_overlap_leaves_no_folder(
    quick_checkpoint: Path, tmp_path: Path, command: str, extra: tuple[str, ...], needle: str
) -> None:
    tile = write_pair(tmp_path / "in")
    out = tmp_path / "new" / "out"
    if command == "predict":
        result = predict(quick_checkpoint, tile, str(out), *extra)
    else:
        result = evaluate(quick_checkpoint, tmp_path / "in", str(out), *extra)
    assert_one_line_error(result, needle)
    assert not (tmp_path / "new").exists()


def test_a_full_disk_reports_the_space_really_free(tiny_disk: Path) -> None:  # noqa: F811
    """The write that fills the disk held a partial file when the error was made."""
    fill_leaving(tiny_disk, 300_000)
    free = shutil.disk_usage(tiny_disk).free
    out = tiny_disk / "synth"
    result = run_cli("data", "synth", str(out), "--tiles", "2", "--size", "512", env=SUBPROCESS)
    line = assert_one_line_error(result, str(out), "no space left on device")
    assert shutil.disk_usage(tiny_disk).free == free  # nothing of the failed write is left
    shown = re.search(r"\((\S+ \S+) free", line)
    assert shown, line
    assert shown.group(1) == human_bytes(free), line
    assert human_bytes(free) == f"{free / 1000:.1f} kB"  # the figure people read: ~300 kB


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is there: --device cuda is fine")
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_device_cuda_without_a_gpu_leaves_no_folder(
    quick_checkpoint: Path, tmp_path: Path, command: str
) -> None:
    tile = write_pair(tmp_path / "in")
    out = tmp_path / "new" / "out"
    common = ("-k", str(quick_checkpoint), "--out", str(out), "--device", "cuda")
    if command == "predict":
        result = run_cli("predict", str(tile), *common, env=SUBPROCESS)
    else:
        result = run_cli("evaluate", "--data", str(tmp_path / "in"), *common, env=SUBPROCESS)
    assert_one_line_error(result, "no CUDA GPU")
    assert not (tmp_path / "new").exists()
