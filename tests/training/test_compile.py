"""torch.compile: ``predict --compile`` gives the eager model's maps, a training run with
``run.compile`` trains and saves an ordinary checkpoint, and ``run.compile_mode`` reaches
TorchInductor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch

from landcover.checkpoint import load_checkpoint
from landcover.models import compile_model

from conftest import assert_one_line_error, run_cli, train_args

PROB_TOLERANCE = 1
"""Largest difference of a stored (x 255) probability: the last bit of rounding."""


@pytest.mark.parametrize(
    ("mode", "cudagraphs", "autotune"),
    [
        ("default", False, False),
        ("reduce-overhead", True, False),
        ("max-autotune", True, True),
        ("max-autotune-no-cudagraphs", False, True),
    ],
)
def test_the_compile_mode_reaches_inductor(mode: str, cudagraphs: bool, autotune: bool) -> None:
    # the compiler's settings as torch.compile resolved them from the mode (nothing compiles
    # until the first call): CUDA graphs and kernel search as torch documents each mode
    compiled = compile_model(torch.nn.Linear(2, 2), "training", mode)
    config = compiled.get_compiler_config()
    assert (config["triton.cudagraphs"], config["max_autotune"]) == (cudagraphs, autotune)


def _read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read()


@pytest.mark.slow
def test_compiled_predict_gives_the_eager_maps(
    tiny_data: Path, checkpoint: Path, tmp_path: Path
) -> None:
    tile = tiny_data / "synth_000_naip.tif"
    maps = {}
    for name, extra in (("eager", []), ("compiled", ["--compile"])):
        out = tmp_path / name
        result = run_cli(
            "predict", str(tile), "--checkpoint", str(checkpoint), "--out", str(out),
            "--no-preview", *extra, timeout=900,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        maps[name] = out
    assert "predict: the model is compiled (torch.compile)" in result.stderr
    eager_class = _read(maps["eager"] / "synth_000_naip_class.tif")
    np.testing.assert_array_equal(_read(maps["compiled"] / "synth_000_naip_class.tif"), eager_class)
    eager_prob = _read(maps["eager"] / "synth_000_naip_prob.tif").astype(np.int16)
    compiled_prob = _read(maps["compiled"] / "synth_000_naip_prob.tif").astype(np.int16)
    assert np.abs(compiled_prob - eager_prob).max() <= PROB_TOLERANCE
    assert len(np.unique(eager_class)) > 1  # a map with something to get wrong


@pytest.mark.slow
def test_two_workers_train_compiled_and_save_an_ordinary_checkpoint(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    args = train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "2")
    # reduce-overhead (CUDA graphs on a GPU) reaches torch.compile; on the CPU it compiles as
    # the default mode does
    sets = ("--set", "run.compile=true", "--set", "run.compile_mode=reduce-overhead")
    result = run_cli(*args, *sets, timeout=900)
    assert result.returncode == 0, result.stderr
    assert "training: the model is compiled (torch.compile, mode reduce-overhead)" in result.stderr
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state.config["run"]["compile"] is True
    assert state.config["run"]["compile_mode"] == "reduce-overhead"
    # the keys of the bare model: no torch.compile wrapper prefix, finite weights
    assert not any(key.startswith("_orig_mod.") for key in state.model)
    assert all(torch.isfinite(v).all() for v in state.model.values() if v.is_floating_point())
    result = run_cli(
        "predict", str(tiny_data / "synth_001_naip.tif"),
        "--checkpoint", str(run / "checkpoints" / "last.pt"), "--out", str(tmp_path / "maps"),
        "--no-preview",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "maps" / "synth_001_naip_class.tif").is_file()


def test_a_compiler_that_fails_is_one_error_line(
    tiny_data: Path, checkpoint: Path, tmp_path: Path
) -> None:
    env = {"CXX": "/bin/false", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    result = run_cli(
        "predict", str(tiny_data / "synth_000_naip.tif"), "--checkpoint", str(checkpoint),
        "--out", str(tmp_path / "maps"), "--compile", env=env,
    )  # fmt: skip
    assert_one_line_error(result, "--compile: torch.compile failed", "C++ compiler")
    assert not list((tmp_path / "maps").glob("*_class.tif"))
