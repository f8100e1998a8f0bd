"""A tile whose input changed since its maps were made is predicted again on a rerun.

A rerun skips a tile whose maps are complete for the job's model and options; the maps'
completeness did not look at the input itself, so imagery replaced under the same name and
grid (a re-delivered flight, a corrected file) kept its old maps and hectares. The stats file
now records the input's size and version (modification time, ETag) the maps were made from.
"""

import json
import os
from pathlib import Path

import numpy as np
import rasterio

from conftest import run_cli, write_naip_tile

SIDE = 64


def _write(path: Path, seed: int) -> None:
    image = np.random.default_rng(seed).integers(1, 255, size=(4, SIDE, SIDE), dtype=np.uint8)
    write_naip_tile(path, image, "EPSG:26918", 1.0, (400000, 4300000))


def _statuses(out: Path) -> list[str]:
    return [t["status"] for t in json.loads((out / "summary.json").read_text())["tiles"]]


def _predict(tile: Path, checkpoint: Path, out: Path) -> np.ndarray:
    result = run_cli("predict", str(tile), "-k", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    with rasterio.open(out / "t_naip_prob.tif") as ds:
        return ds.read()


def test_a_tile_replaced_under_its_name_is_predicted_again(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    tile, out = tmp_path / "t_naip.tif", tmp_path / "maps"
    _write(tile, 1)
    first = _predict(tile, quick_checkpoint, out)
    assert _statuses(out) == ["done"]
    _predict(tile, quick_checkpoint, out)
    assert _statuses(out) == ["skipped"]  # unchanged: its maps stand

    _write(tile, 2)  # other imagery, same name, grid and size
    stamp = tile.stat().st_mtime + 10
    os.utime(tile, (stamp, stamp))  # a clock that ticks coarsely still sees it changed
    second = _predict(tile, quick_checkpoint, out)
    assert _statuses(out) == ["done"]
    assert not np.array_equal(first, second)  # the maps are the new imagery's
    _predict(tile, quick_checkpoint, out)
    assert _statuses(out) == ["skipped"]

    # maps whose stats file does not record their input (an older landcover's) stand
    stats = out / "t_naip_stats.json"
    record = json.loads(stats.read_text())
    assert record["input_version"].startswith(f"{tile.stat().st_size}:")
    del record["input_version"]
    stats.write_text(json.dumps(record))
    _predict(tile, quick_checkpoint, out)
    assert _statuses(out) == ["skipped"]
