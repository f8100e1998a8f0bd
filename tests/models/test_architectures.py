"""Every smp architecture trains, resumes, predicts (also with TTA), evaluates and loads weights.

Each runs in-process (``--workers 1`` trains in the calling process) with a tiny resnet18
encoder on tiny real GeoTIFFs. DPT needs a ViT encoder at a fixed input size and is built, not
trained, here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
import yaml

from landcover.checkpoint import load_checkpoint
from landcover.config import ARCHITECTURES, ModelConfig, load_config
from landcover.errors import ConfigError
from landcover.inference.evaluate import run_evaluate
from landcover.inference.loader import load_inference_model
from landcover.inference.options import PredictOptions
from landcover.inference.predict import predict_tile
from landcover.models import build_model, load_initial_weights
from landcover.training.launcher import train_main

from conftest import TINY_CONFIG, assert_one_line_error, run_cli, train_args

TRAINED = [arch for arch in ARCHITECTURES if arch != "dpt"]


def _config(tmp_path: Path, arch: str) -> Path:
    tree = yaml.safe_load(yaml.safe_dump(TINY_CONFIG))
    tree["model"]["arch"] = arch
    tree["optim"].update(samples_per_epoch=8, epochs=1)
    path = tmp_path / f"{arch}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


@pytest.mark.parametrize("arch", TRAINED)
def test_architecture_trains_resumes_predicts_and_evaluates(
    arch: str, tiny_data: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, arch)
    run = tmp_path / "run"
    overrides = {"data.root": str(tiny_data), "run.out": str(run), "run.workers": 1}
    train_main(load_config(config, overrides))
    first = load_checkpoint(run / "checkpoints" / "last.pt")
    assert first.epoch == 1
    assert first.config["model"]["arch"] == arch

    # resume to epoch 2 from last.pt: the weights continue from the first epoch's
    train_main(load_config(config, {**overrides, "optim.epochs": 2}))
    second = load_checkpoint(run / "checkpoints" / "last.pt")
    assert second.epoch == 2
    changed = [k for k, v in second.model.items() if not torch.equal(v, first.model[k])]
    assert changed

    # predict (plain and with TTA): maps on the tile's grid, classes the model knows
    im = load_inference_model(run / "checkpoints" / "last.pt", "cpu")
    assert type(im.model).__name__ == ARCHITECTURES[arch]
    tile = str(tiny_data / "synth_007_naip.tif")
    for tta in ("none", "flips"):
        out = tmp_path / f"maps_{tta}"
        predict_tile(tile, im, PredictOptions(out=str(out), tta=tta, preview=False))
        with rasterio.open(out / "synth_007_naip_class.tif") as ds, rasterio.open(tile) as src:
            assert (ds.shape, ds.transform) == (src.shape, src.transform)
            classes = ds.read(1)
        valid = classes[classes != 255]
        assert valid.size and valid.max() < im.config.data.classes.num_classes

    # evaluate over two labelled tiles (a manifest of the validation pair names)
    manifest = tmp_path / "eval.csv"
    names = ("synth_006", "synth_007")
    manifest.write_text(
        "image,label\n"
        + "".join(f"{tiny_data}/{n}_naip.tif,{tiny_data}/{n}_lc.tif\n" for n in names)
    )
    metrics = run_evaluate(
        str(run / "checkpoints" / "last.pt"), str(manifest), str(tmp_path / "eval"), None, 8, "cpu"
    )
    assert [tile["tile"] for tile in metrics["tiles"]] == [f"{n}_naip" for n in names]
    assert 0.0 <= metrics["accuracy"] <= 1.0
    assert (tmp_path / "eval" / "metrics.json").is_file()

    # the checkpoint as initial weights of a fresh model of the same architecture
    loaded = load_config(config, overrides)
    cfg, classes = loaded.model, loaded.data.classes.num_classes
    model = build_model(cfg.model_copy(update={"weights": None}), 4, classes, 64)
    with_weights = cfg.model_copy(update={"weights": str(run / "checkpoints" / "last.pt")})
    load_initial_weights(model, with_weights, 4)
    state = model.state_dict()
    for key, value in second.model.items():
        assert torch.equal(state[key], value), key


def test_dpt_builds_with_a_vit_encoder() -> None:
    cfg = ModelConfig(arch="DPT", encoder="tu-vit_tiny_patch16_224", encoder_depth=4)
    model = build_model(cfg, 4, 7, 224)
    with torch.no_grad():
        logits = model.eval()(torch.zeros(1, 4, 224, 224))
    assert tuple(logits.shape) == (1, 7, 224, 224)


@pytest.mark.parametrize("depth", [3, 5])
@pytest.mark.parametrize("arch", ["fpn", "pspnet", "deeplabv3", "segformer"])
def test_logits_come_out_at_the_input_size(arch: str, depth: int) -> None:
    """smp's head upsampling defaults assume one encoder depth; the factory fixes it."""
    cfg = ModelConfig(arch=arch, encoder="resnet18", encoder_depth=depth)
    model = build_model(cfg, 4, 3, 64).eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(np.zeros((2, 4, 96, 96), np.float32)))
    assert tuple(logits.shape) == (2, 3, 96, 96)


def test_unknown_architecture_and_encoder_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown architecture 'unet3'.*deeplabv3plus"):
        load_config(_config(tmp_path, "unet3"), {})
    cfg = ModelConfig(arch="fpn", encoder="resnet9000")
    with pytest.raises(ConfigError, match=r"model\.arch 'fpn' with model\.encoder 'resnet9000'"):
        build_model(cfg, 4, 3, 64)


def test_an_option_the_architecture_does_not_take_is_refused() -> None:
    # smp's own encoders drop names they do not know: the misspelt option trained a plain U-Net
    typo = ModelConfig(encoder="resnet18", arch_options={"decoder_attention_typ": "scse"})
    with pytest.raises(
        ConfigError, match=r"decoder_attention_typ: .*did you mean decoder_attention_type\?"
    ):
        build_model(typo, 4, 6)
    spelt = ModelConfig(encoder="resnet18", arch_options={"decoder_attention_type": "scse"})
    assert any("SCSE" in type(m).__name__ for m in build_model(spelt, 4, 6).modules())
    deeplab = ModelConfig(
        arch="deeplabv3plus", encoder="resnet18", arch_options={"encoder_output_stride": 8}
    )
    assert build_model(deeplab, 4, 6).encoder.output_stride == 8


def test_options_smp_still_reads_and_empty_owned_ones_are_taken(tmp_path: Path) -> None:
    # smp 0.6 reads its older names from **kwargs: they change the model
    older = ModelConfig(encoder="resnet18", arch_options={"decoder_use_batchnorm": False})
    assert not any(
        isinstance(m, torch.nn.BatchNorm2d) for m in build_model(older, 4, 6).decoder.modules()
    )
    build_model(ModelConfig(encoder="resnet18", arch_options={"activation": None}), 4, 6)
    # a model trained with a misspelt option before the check: loaded, with a warning
    typo = ModelConfig(encoder="resnet18", arch_options={"decoder_attention_typ": "scse"})
    assert build_model(typo, 4, 6, strict=False) is not None


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("activation", "the model gives logits"),
        ("aux_params", "one output"),
        ("classes", "data.classes"),
    ],
)
def test_options_landcover_sets_itself_are_refused(option: str, says: str) -> None:
    with pytest.raises(ConfigError, match=f"arch_options.{option} is not an option here: .*{says}"):
        load_config(None, None, [f"model.arch_options.{option}=softmax2d"])


def test_train_refuses_a_misspelt_option_in_one_line(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1"),
        *("--set", "model.arch_options.decoder_attention_typ=scse"),
    )
    assert_one_line_error(
        result, "model.arch_options.decoder_attention_typ", "decoder_attention_type"
    )
    assert not list(run.rglob("*.pt"))


def _with_misspelt_option(checkpoint: Path, target: Path) -> Path:
    """The checkpoint as a run begun before arch_options were checked wrote it (a typo kept)."""
    state = torch.load(checkpoint, weights_only=True)
    state["config"]["model"]["arch_options"] = {"decoder_attention_typ": "scse"}
    torch.save(state, target)
    return target


def test_a_checkpoint_with_an_option_no_architecture_takes_still_maps(
    checkpoint: Path, tiny_data: Path, tmp_path: Path
) -> None:
    """Trained before the check, the misspelt option did nothing: its maps are made, warned."""
    old = _with_misspelt_option(checkpoint, tmp_path / "old.pt")
    tile = str(tiny_data / "synth_000_naip.tif")
    result = run_cli("predict", tile, "-k", str(old), "--out", str(tmp_path / "maps"), "--no-probs")
    assert result.returncode == 0, result.stderr
    assert "decoder_attention_typ" in result.stderr and "ignored" in result.stderr
    assert (tmp_path / "maps" / "synth_000_naip_class.tif").is_file()


def test_a_run_begun_with_an_option_no_architecture_takes_resumes(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    first = run_cli(*train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1"))
    assert first.returncode == 0, first.stderr
    typo = ("--set", "model.arch_options.decoder_attention_typ=scse")
    for name in ("last.pt", "best.pt"):  # as a run begun before the check recorded it
        path = run / "checkpoints" / name
        if path.exists():
            _with_misspelt_option(path, path)
    again = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "2", "--workers", "1"), *typo
    )
    assert again.returncode == 0, again.stderr
    assert "decoder_attention_typ" in again.stderr and "ignored" in again.stderr
    assert [
        json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()
    ] == [1, 2]
