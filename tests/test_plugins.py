"""Plugins: a module named by LANDCOVER_PLUGINS or an installed entry point, in every process.

The plugin here is a real module on PYTHONPATH that registers a loss term and a training
callback; a real two-worker training through ``python -m landcover`` uses both: the term in
each worker (each writes what it computed), the callback on rank 0 (it writes each epoch).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

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
