"""A predict job's last line reads right when one tile or none was mapped.

It said ``1 tiles:`` and, when every tile failed, ``water no ha (0.0 %), ...`` for each class:
hectares of nothing, as if the tiles had no pixel area.
"""

import subprocess
from pathlib import Path

import numpy as np

from conftest import run_cli, write_naip_tile


def _last_line(result: subprocess.CompletedProcess) -> str:
    return [ln for ln in result.stderr.splitlines() if " predicted, " in ln][-1]


def test_a_job_of_one_tile_that_failed_says_so_in_its_last_line(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    tile = tmp_path / "t_naip.tif"
    image = np.random.default_rng(0).integers(1, 255, size=(4, 256, 256), dtype=np.uint8)
    write_naip_tile(tile, image, "EPSG:26918", 1.0, (400000, 4300000))
    data = tile.read_bytes()
    tile.write_bytes(data[: len(data) // 2])  # its header reads; its pixels do not
    result = run_cli("predict", str(tile), "-k", str(quick_checkpoint), "--out", str(tmp_path))
    assert result.returncode != 0
    line = _last_line(result)
    assert "1 tile: 0 predicted, 0 skipped (already complete), 1 failed; no class mapped" in line
    assert " ha (" not in line
