"""Plugins: a module named by LANDCOVER_PLUGINS or an installed entry point, in every process.

The plugin here is a real module on PYTHONPATH that registers a loss term and a training
callback; a real two-worker training through ``python -m landcover`` uses both: the term in
each worker (each writes what it computed), the callback on rank 0 (it writes each epoch).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import rasterio
import torch

from landcover.archregistry import register_architecture, unregister_architecture
from landcover.checkpoint import load_checkpoint
from landcover.config import ModelConfig
from landcover.errors import CheckpointError, ConfigError
from landcover.models import build_model, load_initial_weights

from conftest import assert_one_line_error, run_cli, train_args

PLUGIN = """
import json
import os

import torch.nn.functional as F
from torch import nn

from landcover.classes import IGNORE_INDEX
from landcover.training.callbacks import Callback, register_callback
from landcover.training.losses import register_loss

OUT = os.environ["PLUGIN_OUT"]


@register_loss("plugin_ce", "cross-entropy, from a plugin")
class PluginCrossEntropy(nn.Module):
    def __init__(self, config, num_classes, class_weights):
        super().__init__()

    def forward(self, logits, target):
        loss = F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX)
        if logits.requires_grad:  # a training step, not the loss's check of its terms
            with open(os.path.join(OUT, f"term-rank{os.environ['RANK']}.txt"), "a") as f:
                f.write(f"{float(loss):.6f}\\n")
        return loss


@register_callback("epoch_file")
class EpochFile(Callback):
    def __init__(self, config, folder):
        self.folder = folder

    def on_epoch_end(self, record):
        with open(os.path.join(OUT, "epochs.jsonl"), "a") as f:
            f.write(json.dumps({"epoch": record.epoch, "loss": record.train_loss}) + "\\n")
"""


def _plugin(tmp_path: Path, name: str = "myplugin") -> dict[str, str]:
    """The plugin module on a PYTHONPATH folder; the environment that names it."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent(PLUGIN))
    out = tmp_path / "plugin_out"
    out.mkdir()
    return {"PYTHONPATH": str(folder), "LANDCOVER_PLUGINS": name, "PLUGIN_OUT": str(out)}


def test_a_plugin_named_in_the_environment_trains_in_every_worker(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    env = _plugin(tmp_path)
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "2", "--workers", "2"),
        *("--samples-per-epoch", "16", "--set", "optim.loss.terms.ce=0"),
        *("--set", "optim.loss.terms.plugin_ce=1"),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    out = Path(env["PLUGIN_OUT"])
    # the term: in both workers, every step (16 samples / (2 workers x batch 4) = 2 a epoch)
    for rank in (0, 1):
        values = (out / f"term-rank{rank}.txt").read_text().split()
        assert len(values) == 2 * 2, rank
    # the callback: on rank 0 alone, each epoch, with the loss the run folder records
    logged = [json.loads(line) for line in (out / "epochs.jsonl").read_text().splitlines()]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in logged] == [r["epoch"] for r in records] == [1, 2]
    assert [e["loss"] for e in logged] == [r["train_loss"] for r in records]
    assert "plugin callbacks: epoch_file" in result.stderr


def test_an_installed_entry_point_is_loaded(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "entryplug-1.0.dist-info").mkdir(parents=True)
    (site / "entryplug-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: entryplug\nVersion: 1.0\n"
    )
    (site / "entryplug-1.0.dist-info" / "entry_points.txt").write_text(
        "[landcover.plugins]\nentryplug = entryplug\n"
    )
    marker = tmp_path / "imported"
    (site / "entryplug.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    result = run_cli("data", "--help", env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "yes"


def test_a_plugin_that_fails_to_load_is_one_line(tmp_path: Path) -> None:
    result = run_cli("data", "--help", env={"LANDCOVER_PLUGINS": "no_such_plugin"})
    assert_one_line_error(
        result, "plugin no_such_plugin (LANDCOVER_PLUGINS) failed to load", "ModuleNotFoundError"
    )
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "badplug.py").write_text("raise RuntimeError('needs a licence key')\n")
    env = {"PYTHONPATH": str(broken), "LANDCOVER_PLUGINS": "badplug"}
    result = run_cli("data", "--help", env=env)
    assert_one_line_error(result, "plugin badplug", "RuntimeError: needs a licence key")


ARCH_PLUGIN = """
from torch import nn

from landcover.archregistry import register_architecture


@register_architecture("tiny_fcn")
def build(config, in_channels, num_classes):
    width = int(config.arch_options.get("width", 8))
    return nn.Sequential(
        nn.Conv2d(in_channels, width, 3, padding=1),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.Conv2d(width, num_classes, 1),
    )
"""


def test_a_registered_architecture_trains_predicts_and_exports(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "tinyarch.py").write_text(textwrap.dedent(ARCH_PLUGIN))
    env = {"PYTHONPATH": str(folder), "LANDCOVER_PLUGINS": "tinyarch"}
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "2"),
        *("--samples-per-epoch", "8", "--set", "model.arch=tiny_fcn"),
        *("--set", "model.arch_options.width=6"),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    checkpoint = run / "checkpoints" / "last.pt"
    state = load_checkpoint(checkpoint)
    assert state.config["model"]["arch"] == "tinyfcn"
    assert state.model["0.weight"].shape == (6, 4, 3, 3)  # the builder's, with its option
    tile = str(tiny_data / "synth_000_naip.tif")
    maps = tmp_path / "maps"
    result = run_cli("predict", tile, "-k", str(checkpoint), "--out", str(maps), env=env)
    assert result.returncode == 0, result.stderr
    result = run_cli("export", str(checkpoint), "--out", str(tmp_path / "model"), env=env)
    assert result.returncode == 0, result.stderr
    card = json.loads((tmp_path / "model" / "model.json").read_text())
    assert card["architecture"] == "tinyfcn"
    onnx_maps = tmp_path / "onnx_maps"
    model = str(tmp_path / "model" / "model.onnx")
    # ONNX Runtime runs the export without the plugin that built the model
    result = run_cli("predict", tile, "--model", model, "--out", str(onnx_maps), env={})
    assert result.returncode == 0, result.stderr
    with (
        rasterio.open(maps / "synth_000_naip_class.tif") as a,
        rasterio.open(onnx_maps / "synth_000_naip_class.tif") as b,
    ):
        assert (a.read(1) == b.read(1)).mean() > 0.999
    # without the plugin the name is unknown, and the line lists what is known
    result = run_cli("predict", tile, "-k", str(checkpoint), "--out", str(tmp_path / "x"), env={})
    assert_one_line_error(result, "unknown architecture 'tinyfcn'", "unet")


def test_a_registered_name_must_be_plain_and_not_smps() -> None:
    with pytest.raises(ValueError, match="is smp's"):
        register_architecture("U-Net")
    with pytest.raises(ValueError, match="letters and digits"):
        register_architecture("my net!")
    register_architecture("broken_net")(lambda config, bands, classes: 1 / 0)
    try:
        with pytest.raises(
            ConfigError, match=r"'brokennet' \(registered\): its builder failed: ZeroDivisionError"
        ):
            build_model(ModelConfig(arch="broken_net"), 4, 6)
    finally:
        unregister_architecture("broken_net")


def test_a_registered_architecture_takes_its_own_whole_weights_file(tmp_path: Path) -> None:
    def build(config: ModelConfig, bands: int, classes: int) -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Conv2d(bands, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, classes, 1)
        )

    register_architecture("small_net")(build)
    try:
        trained = build_model(ModelConfig(arch="small_net"), 4, 6)
        path = tmp_path / "w.pt"
        torch.save(
            {"state_dict": {f"module.{k}": v for k, v in trained.state_dict().items()}}, path
        )
        config = ModelConfig(arch="small_net", weights=str(path))
        fresh = build_model(config, 4, 6)
        loaded = load_initial_weights(fresh, config, 4)
        assert loaded.tensors == 4 and not loaded.encoder_only
        for key, value in trained.state_dict().items():
            assert torch.equal(fresh.state_dict()[key], value), key
        with pytest.raises(
            CheckpointError, match=r"do not fit the registered model: size mismatch for 2\.weight"
        ):
            load_initial_weights(build_model(config, 4, 7), config, 4)
    finally:
        unregister_architecture("small_net")
