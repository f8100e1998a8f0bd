"""Which smp architectures ``landcover export`` refuses, in one line, and that nothing is written.

A checkpoint of each (untrained: the tiny trained model's config with ``model.arch`` changed)
is exported through the CLI. An architecture exports when its ONNX file computes torch's logits
at another batch and size than the example it was traced on: PSPNet's and UPerNet's pooling
grids are fixed at the traced size (they fail or compute something else at another). U-Net's
export is tested in tests/export/test_export.py; the other architectures that export cost 10 to
20 s each here, and DPT (refused before its export: its ViT runs at one input size only) 30 s
to build twice, so docs/guide/export.md lists them as measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import ModelConfig
from landcover.models import build_model

from conftest import assert_one_line_error, run_cli

REFUSED = ("pspnet", "upernet")


def arch_checkpoint(checkpoint: Path, folder: Path, settings: dict) -> Path:
    """An untrained checkpoint of another architecture, with the tiny model's data settings."""
    state = load_checkpoint(checkpoint)
    config = yaml.safe_load(yaml.safe_dump(state.config))
    config["model"].update(settings)
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


@pytest.mark.parametrize("arch", REFUSED)
def test_architecture_that_cannot_export_is_refused_in_one_line(
    arch: str, checkpoint: Path, tmp_path: Path
) -> None:
    ckpt = arch_checkpoint(checkpoint, tmp_path, {"arch": arch})
    out = tmp_path / "out"
    result = run_cli("export", str(ckpt), "--out", str(out))
    assert_one_line_error(result, f"model.arch {arch!r}", "at another input size")
    assert sorted(p.name for p in tmp_path.iterdir()) == [ckpt.name]  # nothing, no scratch
