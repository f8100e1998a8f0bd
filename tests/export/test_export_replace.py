"""An export into a folder that holds another: one export there, and ``predict`` checks the pair.

``landcover export A --out M`` then ``landcover export B --format exported-program --out M``
left A's ``model.onnx`` beside B's ``model.json``, and ``predict --model M/model.onnx`` ran A's
weights with B's classes and bands: every tile failed, or (the classes alike) the maps were
silently A's. Now the second export removes the file its ``model.json`` does not describe, and
``predict`` refuses, in one line, a model file whose size and sha256 are not the ones the
``model.json`` beside it records (a stale file put back, or copied over).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from landcover.checkpoint import load_checkpoint
from landcover.synthetic.synthetic import synthesize_scene

from conftest import assert_one_line_error, run_cli, write_naip_tile

NAMES = {"onnx": "model.onnx", "exported-program": "model.pt2"}


@pytest.fixture(scope="module")
def other_checkpoint(quick_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick checkpoint with other weights in its head: same classes, other maps."""
    state = load_checkpoint(quick_checkpoint)
    for name, tensor in state.model.items():
        if name.startswith("segmentation_head."):
            state.model[name] = tensor.flip(0)  # the classes' logits swapped round
    path = tmp_path_factory.mktemp("other") / "other.pt"
    path.write_bytes(state.serialize())
    return path


def export(checkpoint: Path, out: Path, fmt: str = "onnx") -> None:
    """``landcover export CHECKPOINT --format FMT --out OUT``, which must succeed."""
    result = run_cli("export", str(checkpoint), "--format", fmt, "--out", str(out))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("first", "second"), [("onnx", "exported-program"),
                                               ("exported-program", "onnx")])  # fmt: skip
def test_an_export_in_another_format_replaces_the_previous_one(
    quick_checkpoint: Path, other_checkpoint: Path, tmp_path: Path, first: str, second: str
) -> None:
    out = tmp_path / "model"
    export(quick_checkpoint, out, first)
    export(other_checkpoint, out, second)
    model = out / NAMES[second]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [model.name, "model.json", "model.stac.json"]
    )  # no stale model file of the first export
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no scratch folder
    meta = json.loads((out / "model.json").read_text())
    assert (meta["model_file"], meta["source_checkpoint"]) == (model.name, "other.pt")
    assert meta["model_bytes"] == model.stat().st_size
    assert meta["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()


def test_predict_refuses_a_model_file_its_metadata_does_not_describe(
    quick_checkpoint: Path, other_checkpoint: Path, tmp_path: Path
) -> None:
    image, _ = synthesize_scene(96, 96, np.random.default_rng(3))
    tile = write_naip_tile(
        tmp_path / "t_naip.tif", np.maximum(image, 1), "EPSG:26918", 1.0, (400000, 4300000)
    )
    first, same, program = tmp_path / "a", tmp_path / "b", tmp_path / "p"
    export(quick_checkpoint, first)
    export(other_checkpoint, same)
    export(other_checkpoint, program, "exported-program")
    stale = first / "model.onnx"
    shutil.copy(stale, program / "model.onnx")  # an older landcover's leftover
    # a file of the very size model.json names, other bytes (a weight changed in place)
    changed = bytearray((same / "model.onnx").read_bytes())
    changed[len(changed) // 2] ^= 0x01
    (same / "model.onnx").write_bytes(bytes(changed))
    for folder, why in [(program, "runtime exported-program"), (same, "another sha256")]:
        maps = tmp_path / f"maps-{folder.name}"
        result = run_cli(
            "predict", str(tile), "--model", str(folder / "model.onnx"), "--out", str(maps),
            "--device", "cpu", "--no-preview",
        )  # fmt: skip
        assert_one_line_error(
            result,
            f"{folder / 'model.onnx'} is not the model {folder / 'model.json'} describes",
            why,
            f"landcover export CHECKPOINT --out {folder}",
        )
        assert not maps.exists()
    result = run_cli(  # the pair an export wrote maps, under another name too
        "predict", str(tile), "--model", str(shutil.copy(stale, first / "renamed.onnx")),
        "--out", str(tmp_path / "maps"), "--device", "cpu", "--no-preview",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_a_model_file_replaced_while_predict_loads_it_is_refused(
    quick_checkpoint: Path, other_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes ONNX Runtime gets are checked again: a file swapped after the metadata check."""
    from landcover.errors import CheckpointError
    from landcover.inference import runner

    ours, theirs = tmp_path / "a", tmp_path / "b"
    export(quick_checkpoint, ours)
    export(other_checkpoint, theirs)
    model = ours / "model.onnx"
    checked = runner.read_metadata

    def swapped_after_the_check(path: str | Path) -> object:
        meta = checked(path)  # the pair as written: passes
        shutil.copy(theirs / "model.onnx", model)  # another process replaces the file now
        return meta

    monkeypatch.setattr(runner, "read_metadata", swapped_after_the_check)
    with pytest.raises(CheckpointError, match="changed while it was loaded"):
        runner.load_onnx_model(model, "cpu")
    monkeypatch.undo()
    shutil.copy(theirs / "model.onnx", model)  # the same bytes, the metadata unchanged
    with pytest.raises(CheckpointError, match="is not the model"):
        runner.load_onnx_model(model, "cpu")  # refused by the first check, as predict is


def test_an_export_writes_no_query_of_its_checkpoints_or_folders_name(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    """model.json names the checkpoint and the STAC item takes its id from it: both redacted."""
    secret = "EXPORTSECRET123"
    checkpoint = Path(shutil.copy(quick_checkpoint, tmp_path / f"ck?sv=1&sig={secret}.pt"))
    out = tmp_path / f"model?sv=1&sig={secret}"
    result = run_cli("export", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout + result.stderr
    written = sorted(p.name for p in out.iterdir())
    assert written == ["model.json", "model.onnx", "model.stac.json"]
    for name in written:
        assert secret.encode() not in (out / name).read_bytes(), name
    meta = json.loads((out / "model.json").read_text())
    item = json.loads((out / "model.stac.json").read_text())
    assert meta["source_checkpoint"] == "ck?sv=***&sig=***"
    assert item["id"] == meta["source_checkpoint"]  # the redaction takes the hash's '-...' too
