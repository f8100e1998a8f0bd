"""Initial weights (``model.weights``): encoder-only files in torchvision, timm and smp layouts,
whole models, checkpoints, RGB-to-4-band adaptation, clear errors, and ``imagenet`` offline.

Every file is written here from a freshly seeded network, so the expected tensors are known;
nothing is downloaded (``imagenet`` runs with ``HF_HUB_OFFLINE=1``, an unreachable endpoint or
proxy, or a Hugging Face cache this test fills itself).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import segmentation_models_pytorch as smp
import timm
import torch
import torchvision
import yaml
from safetensors.torch import save_file
from torch import nn

from landcover.config import Config, load_config
from landcover.errors import CheckpointError
from landcover.models import build_model, load_initial_weights

from conftest import assert_one_line_error, run_cli, train_args

SEED = 1234


def _torchvision_resnet18(path: Path, seed: int = SEED) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    state = torchvision.models.resnet18(weights=None).state_dict()
    torch.save(state, path)
    return state


def _model(tiny_config: Path, weights: Path | str, *sets: str) -> tuple[Config, nn.Module]:
    config = load_config(tiny_config, sets=[f"model.weights={weights}", *sets])
    model = build_model(config.model, len(config.data.bands), config.data.classes.num_classes)
    return config, model


def _load(tiny_config: Path, weights: Path | str, *sets: str) -> tuple[nn.Module, str]:
    config, model = _model(tiny_config, weights, *sets)
    loaded = load_initial_weights(model, config.model, len(config.data.bands))
    return model, loaded.summary()


def _random_init(tiny_config: Path, seed: int, *sets: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return _model(tiny_config, "unused", *sets)[1].state_dict()


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()


def test_torchvision_rgb_encoder_fills_a_4_band_encoder(tiny_config: Path, tmp_path: Path) -> None:
    file = _torchvision_resnet18(tmp_path / "resnet18.pth")
    torch.manual_seed(5)
    model, summary = _load(tiny_config, tmp_path / "resnet18.pth")
    state = model.state_dict()
    encoder_keys = [k for k in state if k.startswith("encoder.")]
    assert len(encoder_keys) == len(file) - 2  # all but fc.weight / fc.bias
    for key in encoder_keys:
        if key != "encoder.conv1.weight":
            assert torch.equal(state[key], file[key.removeprefix("encoder.")]), key
    # smp's rule for extra bands: band i takes RGB band i % 3, all scaled by 3 / 4
    red, green, blue = (file["conv1.weight"][:, i] for i in range(3))
    conv = state["encoder.conv1.weight"]
    assert conv.shape == (64, 4, 7, 7)
    for band, rgb in enumerate([red, green, blue, red]):
        assert torch.allclose(conv[:, band], rgb * 0.75), band
    # the decoder and head keep the random init they had before loading
    reference = _random_init(tiny_config, 5)
    for key in state:
        if not key.startswith("encoder."):
            assert torch.equal(state[key], reference[key]), key
    assert "encoder only" in summary and "120 tensors loaded into the encoder" in summary
    assert "adapted from 3 to 4 bands" in summary and "2 classifier-head tensors dropped" in summary
    assert "decoder and segmentation head left at random init" in summary


def test_one_band_model_gets_the_sum_of_the_rgb_kernels(tiny_config: Path, tmp_path: Path) -> None:
    file = _torchvision_resnet18(tmp_path / "resnet18.pth")
    model, summary = _load(
        tiny_config,
        tmp_path / "resnet18.pth",
        "data.bands=[nir]",
        "data.mean=[0.5]",
        "data.std=[0.2]",
    )
    expected = file["conv1.weight"][:, 0] + file["conv1.weight"][:, 1] + file["conv1.weight"][:, 2]
    assert torch.allclose(model.state_dict()["encoder.conv1.weight"][:, 0], expected)
    assert "adapted from 3 to 1 bands" in summary


@pytest.mark.parametrize("encoder", ["resnet18", "tu-resnet18"])
def test_timm_layout(encoder: str, tiny_config: Path, tmp_path: Path) -> None:
    torch.manual_seed(SEED)
    file = timm.create_model("resnet18", pretrained=False).state_dict()
    torch.save(file, tmp_path / "timm.pth")
    model, summary = _load(tiny_config, tmp_path / "timm.pth", f"model.encoder={encoder}")
    state = model.state_dict()
    prefix = "encoder.model." if encoder.startswith("tu-") else "encoder."
    for key in ("layer1.0.conv1.weight", "layer2.1.bn2.running_var", "bn1.bias"):
        assert torch.equal(state[prefix + key], file[key]), key
    assert torch.allclose(state[prefix + "conv1.weight"][:, 3], file["conv1.weight"][:, 0] * 0.75)
    if encoder.startswith("tu-"):
        # smp's timm feature extractor stops at encoder_depth 3: layer3/layer4 are not built
        assert not any(k.startswith("encoder.model.layer3") for k in state)
        assert "timm keys of an smp tu- encoder" in summary
        assert "60 tensors of stages the encoder does not build skipped" in summary


@pytest.mark.parametrize("prefix", ["", "encoder."])
def test_smp_encoder_layout(prefix: str, tiny_config: Path, tmp_path: Path) -> None:
    torch.manual_seed(SEED)
    encoder = smp.encoders.get_encoder("resnet18", depth=3)
    file = {prefix + k: v for k, v in encoder.state_dict().items()}
    torch.save(file, tmp_path / "encoder.pt")
    model, summary = _load(tiny_config, tmp_path / "encoder.pt")
    state = model.state_dict()
    for key in ("layer1.0.conv1.weight", "layer4.1.conv2.weight", "bn1.running_mean"):
        assert torch.equal(state["encoder." + key], encoder.state_dict()[key]), key
    assert "loaded into the encoder" in summary


@pytest.mark.parametrize("wrap", ["bare", "state_dict", "model", "DataParallel"])
def test_whole_model_state_dict(wrap: str, tiny_config: Path, tmp_path: Path) -> None:
    source = _random_init(tiny_config, SEED)
    if wrap == "DataParallel":  # torch's own wrapper writes the 'module.' prefix DDP writes
        _, net = _model(tiny_config, "unused")
        net.load_state_dict(source)
        blob = nn.DataParallel(net).state_dict()
        assert all(k.startswith("module.") for k in blob)
    else:
        blob = source if wrap == "bare" else {wrap: source, "epoch": 3}
    torch.save(blob, tmp_path / "whole.pt")
    torch.manual_seed(99)
    model, summary = _load(tiny_config, tmp_path / "whole.pt")
    for key, value in model.state_dict().items():
        assert torch.equal(value, source[key]), key
    assert "loaded into the whole model" in summary


def test_safetensors_file(tiny_config: Path, tmp_path: Path) -> None:
    file = _torchvision_resnet18(tmp_path / "unused.pth")
    save_file(file, tmp_path / "resnet18.safetensors")
    model, _ = _load(tiny_config, tmp_path / "resnet18.safetensors")
    assert torch.equal(
        model.state_dict()["encoder.layer3.1.conv2.weight"], file["layer3.1.conv2.weight"]
    )


def _resnet34(path: Path) -> None:
    torch.save(torchvision.models.resnet34(weights=None).state_dict(), path)


def _wrong_shape(path: Path) -> None:
    state = torchvision.models.resnet18(weights=None).state_dict()
    state["layer2.0.conv1.weight"] = torch.zeros(128, 64, 5, 5)
    torch.save(state, path)


def _missing(path: Path) -> None:
    state = torchvision.models.resnet18(weights=None).state_dict()
    del state["layer2.0.bn1.weight"]
    torch.save(state, path)


MISFITS = {
    "resnet34": (_resnet34, "unexpected key 'layer1.2.conv1.weight'"),
    "wrong_shape": (
        _wrong_shape,
        "shape mismatch at 'encoder.layer2.0.conv1.weight': file (128, 64, 5, 5), "
        "model (128, 64, 3, 3)",
    ),
    "missing": (_missing, "missing key 'encoder.layer2.0.bn1.weight'"),
}


@pytest.mark.parametrize("misfit", sorted(MISFITS))
def test_misfit_names_file_and_first_key(misfit: str, tiny_config: Path, tmp_path: Path) -> None:
    write, message = MISFITS[misfit]
    path = tmp_path / f"{misfit}.pth"
    write(path)
    with pytest.raises(CheckpointError) as err:
        _load(tiny_config, path)
    assert str(err.value).startswith(f"{path}: weights do not fit the configured resnet18 model")
    assert message in str(err.value)


@pytest.mark.parametrize("misfit", ["resnet34", "wrong_shape"])
def test_misfit_through_the_cli(
    misfit: str, tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    write, message = MISFITS[misfit]
    path = tmp_path / f"{misfit}.pth"
    write(path)
    args = train_args(tiny_config, tiny_data, tmp_path / "run", "--set", f"model.weights={path}")
    assert_one_line_error(run_cli(*args), str(path), message)


def test_not_a_state_dict(tiny_config: Path, tmp_path: Path) -> None:
    torch.save({"epoch": 3, "lr": 0.1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"other\.pt: holds no state dict"):
        _load(tiny_config, tmp_path / "other.pt")


@pytest.fixture(scope="module")
def run_from_file(
    tiny_config: Path, tiny_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """A real one-epoch CLI training run started from a torchvision RGB resnet18 file."""
    folder = tmp_path_factory.mktemp("weights_run")
    file = folder / "resnet18.pth"
    _torchvision_resnet18(file)
    run = folder / "run"
    args = train_args(
        tiny_config, tiny_data, run, "--epochs", "1", "--set", f"model.weights={file}"
    )
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return run, file


def test_training_starts_from_the_file(run_from_file: tuple[Path, Path], tiny_config: Path) -> None:
    run, path = run_from_file
    log = (run / "logs" / "rank0.log").read_text()
    assert re.search(
        rf"initial weights from {re.escape(str(path))} \(encoder only, .*\): 120 tensors loaded "
        r"into the encoder; first conv encoder.conv1.weight adapted from 3 to 4 bands",
        log,
    ), log
    file = torch.load(path, weights_only=True)
    trained = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["model"]
    seed = yaml.safe_load((run / "config.yaml").read_text())["run"]["seed"]
    random_init = _random_init(tiny_config, seed)
    # encoder_depth 3 never runs layer3/layer4: frozen, they still hold the file's exact values
    frozen = [k for k in file if k.startswith(("layer3.", "layer4."))]
    assert len(frozen) == 60
    for key in frozen:
        assert torch.equal(trained["encoder." + key], file[key]), key
        if file[key].ndim == 4:  # conv kernels (BatchNorm starts at ones and zeros either way)
            assert not torch.equal(trained["encoder." + key], random_init["encoder." + key]), key
    # the stages it trained moved, but stay near the file and unrelated to the random init
    for key in ("layer1.0.conv1.weight", "layer2.0.conv2.weight"):
        assert not torch.equal(trained["encoder." + key], file[key]), key
        assert _cos(trained["encoder." + key], file[key]) > 0.9, key
        assert abs(_cos(trained["encoder." + key], random_init["encoder." + key])) < 0.2, key
    # the NIR kernel started from red * 3/4
    nir, red = trained["encoder.conv1.weight"][:, 3], file["conv1.weight"][:, 0] * 0.75
    assert _cos(nir, red) > 0.9


def test_a_landcover_checkpoint(run_from_file: tuple[Path, Path], tiny_config: Path) -> None:
    run, _ = run_from_file
    checkpoint = run / "checkpoints" / "last.pt"
    saved = torch.load(checkpoint, weights_only=True)
    model, summary = _load(tiny_config, checkpoint)
    for key, value in model.state_dict().items():
        assert torch.equal(value, saved["model"][key]), key
    assert "(landcover checkpoint, whole model)" in summary


def _offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "HF_HOME": str(tmp_path / "hf"),  # an empty cache: nothing to fall back on
        "TORCH_HOME": str(tmp_path / "torch"),
        **extra,
    }


@pytest.mark.parametrize(
    "env",
    [{"HF_HUB_OFFLINE": "1"}, {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:1"}],
    ids=["HF_HUB_OFFLINE", "unreachable-hub"],
)
def test_imagenet_offline_fails_fast_with_one_line(
    env: dict[str, str], tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    args = train_args(tiny_config, tiny_data, tmp_path / "run", "--set", "model.weights=imagenet")
    start = time.monotonic()
    result = run_cli(*args, env=_offline_env(tmp_path, **env), timeout=120)
    elapsed = time.monotonic() - start
    line = assert_one_line_error(
        result,
        "model.weights imagenet: the pretrained resnet18 encoder could not be downloaded",
        "smp-hub/resnet18.imagenet",
        "set model.weights: /path/resnet18.pth",
    )
    reason = "HF_HUB_OFFLINE is set" if env["HF_HUB_OFFLINE"] == "1" else "127.0.0.1:1"
    assert reason in line
    # the hub client alone retries for about 40 s when it cannot connect
    assert elapsed < 30, elapsed


def test_imagenet_from_a_url_fails_fast_when_unreachable(
    tiny_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a tu- encoder timm fetches from a plain URL (torch.hub, no timeout of its own), through
    # a proxy that refuses connections
    for name, value in _offline_env(tmp_path, HTTPS_PROXY="http://127.0.0.1:1").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    config, model = _model(tiny_config, "imagenet", "model.encoder=tu-legacy_seresnet18")
    start = time.monotonic()
    with pytest.raises(CheckpointError) as err:
        load_initial_weights(model, config.model, len(config.data.bands))
    assert time.monotonic() - start < 10
    message = str(err.value)
    assert "could not be downloaded from https://github.com/" in message
    assert "cannot connect to 127.0.0.1:1" in message
    assert "timm.create_model('legacy_seresnet18', pretrained=True)" in message
    assert "\n" not in message


def test_imagenet_from_the_hugging_face_cache(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    # fill an empty cache the way the hub client lays it out, with a known encoder
    settings = smp.encoders.encoders["resnet18"]["pretrained_settings"]["imagenet"]
    repo = "models--" + settings["repo_id"].replace("/", "--")
    snapshot = tmp_path / "hf" / "hub" / repo / "snapshots" / settings["revision"]
    snapshot.mkdir(parents=True)
    torch.manual_seed(SEED)
    encoder = smp.encoders.get_encoder("resnet18").state_dict()
    save_file(encoder, snapshot / "model.safetensors")
    (snapshot / "config.json").write_text("{}")
    run = tmp_path / "run"
    args = train_args(
        tiny_config,
        tiny_data,
        run,
        "--epochs",
        "1",
        "--samples-per-epoch",
        "8",
        "--set",
        "model.weights=imagenet",
    )
    result = run_cli(*args, env=_offline_env(tmp_path, HF_HUB_OFFLINE="1"))
    assert result.returncode == 0, result.stderr
    log = (run / "logs" / "rank0.log").read_text()
    assert "(smp's imagenet resnet18 encoder): 120 tensors loaded into the encoder" in log
    trained = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["model"]
    for key in (k for k in encoder if k.startswith(("layer3.", "layer4."))):
        assert torch.equal(trained["encoder." + key], encoder[key]), key
