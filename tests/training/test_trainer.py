"""The trainer and the launcher in process: ``landcover train --workers 1`` without a subprocess.

``train_main`` (through ``conftest.train_here``) runs the one worker in this process (no
DDP), as the CLI does for one worker. The expected values come from the test's own
arithmetic and from reading the run folder's files back (metrics.jsonl, the checkpoint, the
tiles' pixels through rasterio), not from the trainer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pydantic
import pytest
import rasterio

from landcover.checkpoint import load_checkpoint
from landcover.data.pairs import split_pairs

from conftest import one_worker_config, train_here


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_one_worker_trains_in_process_resumes_and_leaves_the_loaded_config_as_it_was(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    config = one_worker_config(tiny_config, tiny_data, run, epochs=2, samples=16)
    as_loaded = config.to_dict()
    assert config.data.mean == "auto" and config.data.std == "auto"
    train_here(config)

    # the loaded configuration is frozen and unchanged: the measured numbers live elsewhere
    assert config.to_dict() == as_loaded
    with pytest.raises(pydantic.ValidationError):
        config.data.mean = [0.5, 0.5, 0.5, 0.5]  # type: ignore[misc]

    records = _records(run)
    assert [r["epoch"] for r in records] == [1, 2]
    steps = -(-16 // config.optim.batch_size)  # one worker: the whole global batch
    assert all(r["steps"] == steps and r["workers"] == 1 for r in records)
    assert all(np.isfinite(r["train_loss"]) and r["samples_per_s"] > 0 for r in records)

    # the checkpoint holds the band statistics of the training tiles, computed here with numpy
    # over the pixels with image data (the synthetic no-data is 0 in every band)
    train_pairs, _ = split_pairs(config.data, str(tiny_data))
    pixels = []
    for pair in train_pairs:
        with rasterio.open(pair.image) as src:
            image = src.read().reshape(src.count, -1)
        pixels.append(image[:, np.any(image != 0, axis=0)] / 255.0)
    values = np.concatenate(pixels, axis=1)
    saved = load_checkpoint(run / "checkpoints" / "last.pt")
    assert saved.epoch == 2
    np.testing.assert_allclose(saved.config["data"]["mean"], values.mean(axis=1), atol=1e-4)
    np.testing.assert_allclose(saved.config["data"]["std"], values.std(axis=1), atol=1e-4)

    # a second call with more epochs continues from last.pt: epoch 3 only, same statistics
    train_here(one_worker_config(tiny_config, tiny_data, run, epochs=3, samples=16))
    assert [r["epoch"] for r in _records(run)] == [1, 2, 3]
    resumed = load_checkpoint(run / "checkpoints" / "last.pt")
    assert resumed.epoch == 3
    assert resumed.config["data"]["mean"] == saved.config["data"]["mean"]
    assert resumed.config["data"]["std"] == saved.config["data"]["std"]
