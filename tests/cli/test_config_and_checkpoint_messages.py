"""Issue 42, item 10: a missing ``best.pt`` names ``last.pt``; a YAML key named twice is refused.

Each command is a real ``python -m landcover`` subprocess on real files; the expected line
numbers are counted here from the text written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import TINY_CONFIG, assert_one_line_error, run_cli, train_args

SUBPROCESS = {"LANDCOVER_TEST_SUBPROCESS": "1"}


def _lines_of(text: str, key: str) -> list[int]:
    """The 1-based numbers of the lines where ``key:`` is written (at any indentation)."""
    return [n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith(key)]


@pytest.fixture(scope="module")
def unvalidated_run(
    tiny_data: Path, tiny_config: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A run folder trained one short epoch with validation off (no validation tiles)."""
    run = tmp_path_factory.mktemp("unvalidated") / "run"
    args = train_args(tiny_config, tiny_data, run, "--epochs", "1", "--samples-per-epoch", "4")
    result = run_cli(*args, "--set", "data.val_fraction=0", env=SUBPROCESS)
    assert result.returncode == 0, result.stderr
    return run


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_missing_best_checkpoint_names_the_runs_last_one(
    unvalidated_run: Path, tiny_data: Path, tmp_path: Path, command: str
) -> None:
    checkpoints = unvalidated_run / "checkpoints"
    assert (checkpoints / "last.pt").is_file() and not (checkpoints / "best.pt").exists()
    best = checkpoints / "best.pt"
    if command == "predict":
        args = ["predict", str(tiny_data / "synth_000_naip.tif"), "--checkpoint", str(best)]
    else:
        args = ["evaluate", "--checkpoint", str(best), "--data", str(tiny_data)]
    result = run_cli(*args, "--out", str(tmp_path / "out"), env=SUBPROCESS)
    line = assert_one_line_error(result, f"{best}: checkpoint not found", "validation tiles")
    assert line.endswith(f"use this run's last checkpoint, {checkpoints / 'last.pt'}"), line


def test_a_missing_best_checkpoint_without_a_last_one_says_what_runs_have(
    tiny_data: Path, tmp_path: Path
) -> None:
    best = tmp_path / "checkpoints" / "best.pt"
    tile = str(tiny_data / "synth_000_naip.tif")
    result = run_cli("predict", tile, "--checkpoint", str(best), "--out", str(tmp_path / "o"))
    assert_one_line_error(result, f"{best}: checkpoint not found", "only last.pt")
    other = tmp_path / "model.pt"  # any other name: no advice to give
    result = run_cli("predict", tile, "--checkpoint", str(other), "--out", str(tmp_path / "o"))
    line = assert_one_line_error(result, f"{other}: checkpoint not found")
    assert line == f"error: {other}: checkpoint not found"


def _yaml_with_twice(key: str) -> str:
    """The tiny config as YAML with ``key`` written a second time in its section."""
    text = yaml.safe_dump(TINY_CONFIG, sort_keys=False)
    if key == "optim":  # a second optim section at the end: the first would be dropped
        return text + "optim:\n  lr: 0.5\n  epochs: 1\n  samples_per_epoch: 4\n"
    # a second lr under optim, two lines after the first
    return text.replace("  lr: 0.003\n", "  lr: 0.003\n  weight_decay: 0.0\n  lr: 0.5\n")


@pytest.mark.parametrize("key", ["lr", "optim"])
def test_a_key_written_twice_in_a_config_is_refused(
    tiny_data: Path, tmp_path: Path, key: str
) -> None:
    text = _yaml_with_twice(key)
    first, second = _lines_of(text, f"{key}:")
    config = tmp_path / "twice.yaml"
    config.write_text(text)
    run = tmp_path / "run"
    result = run_cli(*train_args(config, tiny_data, run), env=SUBPROCESS)
    assert_one_line_error(
        result, f"{config}: line {second}: key '{key}' appears twice", f"first on line {first}"
    )
    assert not run.exists()


def test_a_key_written_twice_in_an_included_file_is_refused(
    tiny_data: Path, tmp_path: Path
) -> None:
    text = _yaml_with_twice("lr")
    first, second = _lines_of(text, "lr:")
    (tmp_path / "base.yaml").write_text(text)
    config = tmp_path / "top.yaml"
    config.write_text("include: base.yaml\noptim:\n  epochs: 1\n")
    result = run_cli(*train_args(config, tiny_data, tmp_path / "run"), env=SUBPROCESS)
    assert_one_line_error(
        result, f"{tmp_path / 'base.yaml'}: line {second}: key 'lr'", f"first on line {first}"
    )


def test_a_key_written_twice_in_a_set_value_is_refused(tiny_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_CONFIG))
    args = train_args(config, tiny_data, tmp_path / "run")
    result = run_cli(
        *args, "--set", "data.class_frequencies={water: 0.1, water: 0.2}", env=SUBPROCESS
    )
    assert_one_line_error(result, "--set data.class_frequencies: key 'water' appears twice")


def test_yaml_merge_keys_may_still_be_overridden(tmp_path: Path) -> None:
    """``<<: {...}`` then one of its keys is YAML's way to override, not a key named twice."""
    from landcover.config import load_config

    config = tmp_path / "merge.yaml"
    config.write_text("optim:\n  <<: {lr: 0.5, epochs: 4}\n  lr: 0.25\n")
    optim = load_config(config).optim
    assert (optim.lr, optim.epochs) == (0.25, 4)
