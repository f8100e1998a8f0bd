"""Which smp architectures ``landcover export`` refuses, in one line, and that nothing is written.

A checkpoint of each (untrained: the tiny trained model's config with ``model.arch`` changed)
is exported through the CLI. An architecture exports when its ONNX file computes torch's logits
at another batch and size than the example it was traced on: PSPNet's and UPerNet's pooling
grids are fixed at the traced size (they fail or compute something else at another), and DPT's
ViT takes one input size only. U-Net's export is tested in tests/export/test_export.py; the
other architectures that export cost 10-20 s each here, and docs/guide/export.md lists them
as measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import ModelConfig
from landcover.models import build_model

from conftest import assert_one_line_error, run_cli

# (model settings, exports, what the refusal says)
CASES = {
    "pspnet": ({"arch": "pspnet"}, False, "at another input size"),
    "upernet": ({"arch": "upernet"}, False, "at another input size"),
    "dpt": (
        {"arch": "dpt", "encoder": "tu-vit_tiny_patch16_224", "encoder_depth": 4},
        False,
        "runs at one input size only",
    ),
}


def arch_checkpoint(checkpoint: Path, folder: Path, settings: dict) -> Path:
    """An untrained checkpoint of another architecture, with the tiny model's data settings."""
    state = load_checkpoint(checkpoint)
    config = yaml.safe_load(yaml.safe_dump(state.config))
    config["model"].update(settings)
    if settings["arch"] == "dpt":
        config["data"]["patch_size"] = 224  # the ViT's one input size
    data = config["data"]
    model = build_model(
        ModelConfig(**config["model"]),
        len(data["bands"]),
        len(data["classes"]["classes"]),
        data["patch_size"],
    )
    path = folder / f"{settings['arch']}.pt"
    path.write_bytes(Checkpoint(model=model.state_dict(), config=config).serialize())
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_architecture_exports_or_is_refused_in_one_line(
    name: str, checkpoint: Path, tmp_path: Path
) -> None:
    settings, exports, reason = CASES[name]
    ckpt = arch_checkpoint(checkpoint, tmp_path, settings)
    out = tmp_path / "out"
    result = run_cli("export", str(ckpt), "--out", str(out))
    if exports:
        assert result.returncode == 0, result.stderr
        assert (out / "model.onnx").is_file() and (out / "model.json").is_file()
    else:
        error = assert_one_line_error(result, f"model.arch {settings['arch']!r}", reason)
        assert error.startswith("error: ")
        assert not out.exists()  # nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [ckpt.name, *(["out"] if exports else [])]
    )  # and no scratch folder left
