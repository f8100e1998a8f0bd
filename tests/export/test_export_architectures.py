"""Every architecture that exports maps a region through ONNX as its checkpoint does.

For the default and CPU configs' models (U-Net with ResNet-34 and ResNet-18, five stages, their
patch sizes and per-tile normalisation) and every other smp architecture that exports (ResNet-18,
five stages, the tiny model's global statistics), an untrained checkpoint (seeded random
weights: the rule compares two runtimes, not a model's skill) is exported to ONNX and a region
is mapped through the region job twice, with the checkpoint and with the ONNX model, in this
process. The class maps must agree as :func:`mapagreement.assert_maps_agree` says, the
probabilities within :data:`mapagreement.DEEP_PROB_TOLERANCE`. The
architectures refused are in tests/export/test_export_refusals.py; the tiny trained model's
export through the CLI in tests/export/test_export.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from archs import arch_checkpoint
from mapagreement import DEEP_PROB_TOLERANCE, assert_maps_agree

from landcover.config import RunConfig
from landcover.export.command import export_model
from landcover.inference.options import PredictOptions
from landcover.mapping.job import run_predict_job
from landcover.mapping.spec import JobOptions
from landcover.synthetic.synthetic import synthesize_scene

from conftest import REPO, write_naip_tile

SMALL = {"encoder": "resnet18", "encoder_depth": 5, "decoder_channels": [32, 32, 16, 16, 8]}
"""The other architectures' model: ResNet-18, five stages (widths where the decoder takes them)."""
OTHERS = ("unetplusplus", "fpn", "deeplabv3", "deeplabv3plus", "linknet", "manet", "pan",
          "segformer")  # fmt: skip
"""smp's architectures besides U-Net that export (docs/guide/export.md, "Architectures")."""

# (name, height, width): several of the tiny model's windows (256 px) with a no-data corner
TILES = [("a1", 300, 280)]


def shipped(name: str) -> tuple[dict, dict]:
    """A shipped config's model section and the data settings the export depends on."""
    config = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    data = {key: config["data"][key] for key in ("patch_size", "normalize")}
    return {"arch": "unet", **config["model"]}, data


CASES = {name: shipped(name) for name in ("default", "cpu")}
CASES.update({arch: ({"arch": arch, **SMALL}, {}) for arch in OTHERS})
CASES["pan"][1]["patch_size"] = 128  # its pyramid pooling needs 128 px (64 is refused)


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("region")
    for seed, (name, height, width) in enumerate(TILES):
        image, _ = synthesize_scene(height, width, np.random.default_rng(70 + seed))
        image[:, :40, :50] = 0  # a no-data corner
        write_naip_tile(folder / f"{name}_naip.tif", image, "EPSG:26918", 1.0, (400000, 4300000))
    return folder


@pytest.mark.parametrize("case", list(CASES))
def test_exported_model_maps_the_region_as_its_checkpoint(
    case: str, checkpoint: Path, region: Path, tmp_path: Path
) -> None:
    settings, data = CASES[case]
    ckpt = arch_checkpoint(checkpoint, tmp_path, settings, case, data)
    exported = export_model(str(ckpt), "onnx", str(tmp_path / "model"))
    outs = {"checkpoint": tmp_path / "checkpoint", "onnx": tmp_path / "onnx"}
    for model, out in ((ckpt, outs["checkpoint"]), (exported.model, outs["onnx"])):
        options = PredictOptions(str(out), prob_dtype="float32", preview=False)
        run_predict_job([str(region)], str(model), options, JobOptions(), "cpu", RunConfig())
    share, worst = assert_maps_agree(outs["checkpoint"], outs["onnx"], TILES, DEEP_PROB_TOLERANCE)
    print(
        f"{case}: class maps agree on {share:.6f} of the pixels, probabilities within {worst:.2g}"
    )
