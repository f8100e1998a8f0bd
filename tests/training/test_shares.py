"""Each worker's share of the tiles (landcover.training.shares), in process.

With the band statistics given as numbers nothing is reduced across workers, so each rank's
share can be loaded in this process by naming its place in a 3-worker job. The expected
shares are the folder's tile names, found here with pathlib.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch

from landcover.config import load_config
from landcover.errors import DataError
from landcover.parallel.engines import engine_for
from landcover.parallel.env import DistEnv
from landcover.synthetic.synthetic import write_synthetic_dataset
from landcover.training.runfolder import RunFolder
from landcover.training.shares import load_worker_data

MEAN, STD = [0.4, 0.4, 0.4, 0.4], [0.2, 0.2, 0.2, 0.2]


def _shares(tiny_config: Path, data: Path, tmp_path: Path, workers: int) -> list:
    flags = {"data.root": str(data), "run.out": str(tmp_path / "run")}
    config = load_config(tiny_config, flags, sets=[f"data.mean={MEAN}", f"data.std={STD}"])
    engine, cpu = engine_for(config.run), torch.device("cpu")
    return [
        load_worker_data(config, DistEnv(rank, workers), RunFolder(config.run.out), cpu, engine)
        for rank in range(workers)
    ]


def test_ranks_hold_disjoint_shares_that_cover_every_tile(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    shares = _shares(tiny_config, tiny_data, tmp_path, workers=3)
    every = sorted(p.name[: -len("_naip.tif")] for p in tiny_data.glob("*_naip.tif"))
    train = [[t.name for t in share.sampler.tiles] for share in shares]
    val = [[t.name for t in share.val_tiles] for share in shares]
    held = sorted(name for names in train + val for name in names)
    assert held == every  # each tile on exactly one worker, training or validation
    assert all(names for names in train)  # nobody idle: 6 training tiles over 3 workers
    assert {share.n_val for share in shares} == {sum(len(v) for v in val)} == {2}
    # the numbers given are the ones every worker normalises with
    for share in shares:
        assert list(share.stats.mean) == MEAN and list(share.stats.std) == STD


def test_a_folder_of_blank_images_is_one_data_error(tiny_config: Path, tmp_path: Path) -> None:
    folder = tmp_path / "blank"
    write_synthetic_dataset(folder, tiles=4, size=64, seed=3)
    for image in folder.glob("*_naip.tif"):
        with rasterio.open(image, "r+") as ds:
            ds.write(np.zeros((ds.count, ds.height, ds.width), dtype=np.uint8))
    with pytest.raises(DataError, match="every image pixel is no-data"):
        _shares(tiny_config, folder, tmp_path, workers=1)
