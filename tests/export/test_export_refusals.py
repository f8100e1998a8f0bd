"""Which smp architectures ``landcover export`` refuses, in one line, and that nothing is written.

A checkpoint of each (untrained: the tiny trained model's config with ``model.arch`` changed)
is exported through the CLI. An architecture exports when its ONNX file computes torch's logits
at another batch and size than the example it was traced on: PSPNet's and UPerNet's pooling
grids are fixed at the traced size (they fail or compute something else at another); DPT is
refused before its export (its ViT takes one input size only). The architectures that export
are tested in tests/export/test_export_architectures.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from archs import arch_checkpoint

from conftest import assert_one_line_error, run_cli

REFUSED = {
    "pspnet": ({"arch": "pspnet"}, {}, "at another input size"),
    "upernet": ({"arch": "upernet"}, {}, "at another input size"),
    "dpt": (
        {"arch": "dpt", "encoder": "tu-vit_tiny_patch16_224", "encoder_depth": 4},
        {"patch_size": 224},  # the ViT's one input size
        "runs at one input size only",
    ),
}


@pytest.mark.parametrize("arch", list(REFUSED))
def test_architecture_that_cannot_export_is_refused_in_one_line(
    arch: str, checkpoint: Path, tmp_path: Path
) -> None:
    settings, data, why = REFUSED[arch]
    ckpt = arch_checkpoint(checkpoint, tmp_path, settings, arch, data, calibrated=False)
    out = tmp_path / "out"
    result = run_cli("export", str(ckpt), "--out", str(out))
    assert_one_line_error(result, f"model.arch {arch!r}", why)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ckpt.name]  # nothing, no scratch
