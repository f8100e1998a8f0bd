"""A refused resume is one line and leaves the run folder as it was (issue 42, item 3).

A run of ``configs/cpu.yaml`` (auto band statistics and class weights) trained one short epoch
with AdamW, the chesapeake7 classes and a resnet18 encoder is resumed (real ``landcover train``
runs, one and two workers) with another optimizer, class scheme or encoder: each is refused in
one ``error:`` line naming the checkpoint and both settings, before any worker starts, and
every file of the run folder (``config.yaml``, the logs, the checkpoints) keeps its bytes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO, assert_one_line_error, run_cli, train_args

CPU = REPO / "configs" / "cpu.yaml"
SMALL = ("--epochs", "1", "--samples-per-epoch", "32", "--set", "data.patch_size=64")


@pytest.fixture(scope="module")
def adamw_run(tiny_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-epoch AdamW run of configs/cpu.yaml (chesapeake7, resnet18)."""
    run = tmp_path_factory.mktemp("adamw") / "run"
    result = run_cli(*train_args(CPU, tiny_data, run, *SMALL, "--workers", "1"))
    assert result.returncode == 0, result.stderr
    return run


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


CLASSES = ("trained with data.classes chesapeake7 (6 classes", "resumed with cvpr4 (4 classes")
CASES = {
    "optimizer": (
        ("--epochs", "3", "--set", "optim.optimizer=sgd", "--workers", "1"),
        ("trained with optim.optimizer adamw, resumed with sgd",),
    ),
    "classes": (("--classes", "cvpr4", "--workers", "1"), CLASSES),
    "classes-2-workers": (("--classes", "cvpr4", "--workers", "2"), CLASSES),
    "encoder": (
        ("--encoder", "resnet34", "--workers", "1"),
        ("trained with model.encoder resnet18, resumed with resnet34",),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_resume_is_one_line_and_leaves_the_run_folder_as_it_was(
    case: str, adamw_run: Path, tiny_data: Path, tmp_path: Path
) -> None:
    extra, needles = CASES[case]
    run = tmp_path / "run"
    shutil.copytree(adamw_run, run)
    before = _files(run)
    result = run_cli(*train_args(CPU, tiny_data, run, *SMALL, *extra))
    assert _files(run) == before  # config.yaml, logs and checkpoints untouched
    last = run / "checkpoints" / "last.pt"
    line = assert_one_line_error(result, f"{last}:", *needles)
    assert "train into a new --out" in line
    assert "rank 0" not in result.stderr  # refused before any worker started
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["optim"]["optimizer"] == "adamw" and config["optim"]["epochs"] == 1
    assert config["data"]["classes"]["name"] == "chesapeake7"
    assert config["model"]["encoder"] == "resnet18"


def test_a_resume_with_other_data_says_what_it_does_to_best_pt(
    adamw_run: Path, tiny_data: Path, tmp_path: Path
) -> None:
    """Other tiles are allowed (a fine-tune, more data) and said: ``best.pt`` then compares
    epochs validated on two sets. The same folder given as ``./x/`` is not other data."""
    other = tmp_path / "other"
    shutil.copytree(tiny_data, other)
    run = tmp_path / "run"
    shutil.copytree(adamw_run, run)
    result = run_cli(*train_args(CPU, other, run, *SMALL[2:], "--epochs", "2", "--workers", "1"))
    assert result.returncode == 0, result.stderr
    warned = [ln for ln in result.stderr.splitlines() if "resumed with other data" in ln]
    assert len(warned) == 1, result.stderr
    assert f"data.root {tiny_data} -> {other}" in warned[0]
    assert "best.pt" in warned[0]
    # the same data, named another way (relative to here, with ./ and a last /): no warning
    named = f"{os.path.relpath(other.parent)}/./{other.name}/"
    args = ["train", "--config", str(CPU), "--data", named, "--out", str(run)]
    again = run_cli(*args, *SMALL[2:], "--epochs", "3", "--workers", "1")
    assert again.returncode == 0, again.stderr
    assert "resumed with other data" not in again.stderr


def test_a_resume_with_the_same_data_named_with_a_query_is_not_other_data(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """The checkpoint keeps data.root redacted: compared with the redacted name, not the secret."""
    data = Path(shutil.copytree(tiny_data, tmp_path / "data?sv=1&sig=RESUMESECRET1"))
    run = tmp_path / "run"
    for epochs in ("1", "2"):
        args = train_args(tiny_config, data, run, "--epochs", epochs, "--samples-per-epoch", "8")
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
    assert "resumed with other data" not in result.stderr, result.stderr
