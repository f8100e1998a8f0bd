"""Generalising across flights: photometric augmentation, per-tile standardisation, weight EMA."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
from scipy import ndimage, special

from landcover.checkpoint import load_checkpoint
from landcover.classes import resolve_mapping
from landcover.config import Config, DataConfig, config_from_dict
from landcover.data.normalize import array_band_stats, dataset_band_stats
from landcover.data.raster import TileArrays
from landcover.feed import photometric as photometric_module
from landcover.feed.inputs import TrainingInput
from landcover.feed.noiseblur import (
    BLUR_KERNEL,
    NOISE_LEVELS,
    gaussian_kernels,
    gaussian_kernels_1d,
)
from landcover.feed.photometric import (
    PhotometricDraw,
    PhotometricRanges,
    photometric,
    photometric_uint8,
)
from landcover.feed.sampler import PatchSampler
from landcover.inference.loader import load_inference_model
from landcover.models import build_model
from landcover.training.ema import ema_decay_at

from conftest import run_cli, train_args

# --- photometric augmentation -------------------------------------------------------------


def _position_tile(size: int = 96, classes: int = 6) -> TileArrays:
    """A tile whose bands 0 and 1 are each pixel's row and column, with random labels."""
    rng = np.random.default_rng(3)
    rows, cols = np.mgrid[0:size, 0:size]
    image = np.stack(
        [rows, cols, rng.integers(0, 256, (size, size)), rng.integers(0, 256, (size, size))],
        axis=-1,
    ).astype(np.uint8)
    label = rng.integers(0, classes, (size, size)).astype(np.uint8)
    return TileArrays("pos", image, label)


def test_sampled_patches_keep_image_and_label_aligned() -> None:
    tile = _position_tile()
    sampler = PatchSampler([tile], 32, 6, augment=True)
    images, labels, tiles = sampler.batch_with_tiles(32, np.random.default_rng(0))
    assert tiles.tolist() == [0] * 32
    for image, label in zip(images.numpy(), labels.numpy(), strict=True):
        # numpy's expectation: the label at the tile position each image pixel came from
        expected = tile.label[image[..., 0].astype(int), image[..., 1].astype(int)]
        np.testing.assert_array_equal(label, expected)


def _numpy_photometric(x: np.ndarray, draw: PhotometricDraw) -> np.ndarray:
    gain, offset, gamma = draw.gain.numpy(), draw.offset.numpy(), draw.gamma.numpy()
    chosen = draw.chosen.numpy()
    # the noise: each code stands for the normal quantile of its 1/65536 of probability
    codes = draw.noise_codes().numpy().transpose(0, 3, 1, 2).astype(np.float64)
    noise = np.zeros_like(x)
    sd = draw.noise_sd.numpy().astype(np.float64)[chosen, None, None, None]
    noise[chosen] = sd * special.ndtri((codes + 0.5) / NOISE_LEVELS)
    y = np.clip(x, 0, 1) ** gamma * gain + offset + noise
    for b, sigma in enumerate(draw.blur_sigma.numpy()):
        if sigma > 0:
            r = np.arange(BLUR_KERNEL) - BLUR_KERNEL // 2
            g = np.exp(-(r**2) / (2 * float(sigma) ** 2))
            kernel = np.outer(g, g) / np.outer(g, g).sum()
            for c in range(y.shape[1]):
                y[b, c] = ndimage.convolve(y[b, c], kernel, mode="mirror")
    return np.clip(y, 0, 1)


def test_photometric_matches_numpy_and_leaves_unchosen_patches_alone() -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.rand((16, 4, 40, 40), generator=gen)
    ranges = PhotometricRanges(blur_p=0.5)
    draw = PhotometricDraw.draw(x.shape, 0.7, gen, ranges, x.device)
    out = draw.apply(x).numpy()
    np.testing.assert_allclose(
        out, _numpy_photometric(x.numpy().astype(np.float64), draw), atol=2e-5
    )
    chosen = (draw.gain != 1).flatten(1).any(1).numpy()
    np.testing.assert_array_equal(chosen, draw.chosen.numpy())
    blurred = (draw.blur_sigma > 0).numpy()
    assert 0 < chosen.sum() < 16 and blurred.any() and not blurred[~chosen].any()
    np.testing.assert_array_equal(out[~chosen], x.numpy()[~chosen])  # unchosen: unchanged
    # the ranges cover tens of DN of shift and a NIR drop of a third
    assert (draw.offset.abs().max() * 255) > 20 and draw.gain.min() < 0.75


def test_noise_codes_are_uniform_and_the_noise_standard_normal() -> None:
    gen = torch.Generator().manual_seed(8)
    draw = PhotometricDraw.draw((8, 4, 64, 64), 1.0, gen, PhotometricRanges(), gen.device)
    codes = draw.noise_codes().numpy().ravel()
    assert codes.min() >= 0 and codes.max() < NOISE_LEVELS
    counts = np.bincount(codes >> 12, minlength=16)  # 16 bins of 4096 codes
    expected = len(codes) / 16
    assert ((counts - expected) ** 2 / expected).sum() < 40  # chi-square, 15 dof: p < 1e-3
    z = special.ndtri((codes + 0.5) / NOISE_LEVELS)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs((np.abs(z) < 1).mean() - 0.6827) < 0.005
    # every patch and band draws its own noise
    per_patch = draw.noise_codes().numpy()
    assert (per_patch[0] == per_patch[1]).mean() < 0.01
    assert (per_patch[0, ..., 0] == per_patch[0, ..., 1]).mean() < 0.01


def test_uint8_fast_path_equals_the_float_path(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = torch.Generator().manual_seed(11)
    images = torch.randint(0, 256, (10, 36, 44, 4), generator=gen, dtype=torch.uint8)
    x = images.permute(0, 3, 1, 2).float() * (1.0 / 255.0)
    ranges = PhotometricRanges(blur_p=0.5)
    state = gen.get_state()
    draw = PhotometricDraw.draw(x.shape, 0.6, gen, ranges, x.device)
    assert 0 < int(draw.chosen.sum()) < 10 and (draw.blur_sigma > 0).any()
    expected = draw.apply(x)
    torch.testing.assert_close(draw.apply_uint8(images), expected, atol=1e-6, rtol=0)
    planar = images.permute(0, 3, 1, 2).contiguous()
    torch.testing.assert_close(draw.apply_uint8(planar, False), expected, atol=1e-6, rtol=0)
    # standardised on the way out: per patch, or one for all
    scale, shift = torch.rand((10, 4), generator=gen) + 1, torch.rand((10, 4), generator=gen)
    for s, t in ((scale, shift), (scale[:1], shift[:1])):
        standardised = expected * s[:, :, None, None] - t[:, :, None, None]
        torch.testing.assert_close(draw.apply_uint8(images, True, s, t), standardised)
    # the functions draw the same perturbation from the same generator state
    gen.set_state(state)
    fast = photometric_uint8(images, 0.6, gen, ranges)
    gen.set_state(state)
    torch.testing.assert_close(fast, photometric(x, 0.6, gen, ranges), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast, expected, atol=1e-6, rtol=0)
    # the patches processed together on the CPU do not change the result
    for chunk in (1, 3, 16):
        monkeypatch.setattr(photometric_module, "CPU_CHUNK", chunk)
        torch.testing.assert_close(draw.apply_uint8(images), fast, atol=1e-6, rtol=0)


def test_no_data_pixels_stay_zero_through_the_perturbation() -> None:
    gen = torch.Generator().manual_seed(12)
    images = torch.randint(1, 256, (6, 32, 40, 4), generator=gen, dtype=torch.uint8)
    images[:, :, :13] = 0  # the edge of a flight: every band 0 (nodatafill's no-data)
    images[2, 20:, 30:] = 0
    images[3, 5:9, 20:, 1] = 0  # a band at 0 alone is data
    x = images.permute(0, 3, 1, 2).float() * (1.0 / 255.0)
    draw = PhotometricDraw.draw(x.shape, 1.0, gen, PhotometricRanges(blur_p=0.5), x.device)
    nodata = (x == 0).all(1, keepdim=True).numpy()
    expected = np.where(nodata, 0.0, _numpy_photometric(x.numpy().astype(np.float64), draw))
    np.testing.assert_allclose(draw.apply(x).numpy(), expected, atol=2e-5)
    scale, shift = torch.rand((6, 4), generator=gen) + 1, torch.rand((6, 4), generator=gen)
    out = draw.apply_uint8(images, True, scale, shift).numpy()
    standardised = expected * scale.numpy()[:, :, None, None] - shift.numpy()[:, :, None, None]
    np.testing.assert_allclose(out, standardised, atol=1e-5)
    # no data is what an unperturbed zero standardises to; the data around it is perturbed
    mask = np.broadcast_to(nodata, out.shape)
    zero = np.broadcast_to(-shift.numpy()[:, :, None, None], out.shape)
    assert mask.mean() > 0.3 and (out[mask] == zero[mask]).all()
    plain = x.numpy() * scale.numpy()[:, :, None, None] - shift.numpy()[:, :, None, None]
    assert np.abs(out - plain)[~mask].mean() > 0.02


def test_gaussian_kernels_are_normalised() -> None:
    k = gaussian_kernels(torch.tensor([0.5, 1.2]))
    assert k.shape == (2, 1, BLUR_KERNEL, BLUR_KERNEL)
    torch.testing.assert_close(k.sum(dim=(1, 2, 3)), torch.ones(2))
    one_d = gaussian_kernels_1d(torch.tensor([0.5, 1.2]))  # the separable blur's
    torch.testing.assert_close(one_d[:, :, None] * one_d[:, None, :], k[:, 0])


def test_training_input_augments_images_only_and_normalises_per_tile() -> None:
    tiles = [_position_tile(), _position_tile()]
    tiles[1] = TileArrays("bright", (tiles[1].image // 2 + 100).astype(np.uint8), tiles[1].label)
    cfg = DataConfig(mean=[0.5] * 4, std=[0.25] * 4, normalize="per_tile")
    prepare = TrainingInput(cfg, tiles, torch.device("cpu"))
    images = torch.from_numpy(np.stack([tiles[0].image[:32, :32], tiles[1].image[:32, :32]]))
    out = prepare(images, torch.tensor([0, 1]))
    for i, tile in enumerate(tiles):
        stats = array_band_stats(tile.image, None)
        pixels = tile.image.reshape(-1, 4).astype(np.float64) / 255
        np.testing.assert_allclose(stats.mean, pixels.mean(0), rtol=1e-12)
        np.testing.assert_allclose(stats.std, pixels.std(0), rtol=1e-9)
        expected = (
            images[i].permute(2, 0, 1).double() / 255 - torch.tensor(stats.mean)[:, None, None]
        ) / torch.tensor(stats.std)[:, None, None]
        torch.testing.assert_close(out[i].double(), expected, atol=1e-5, rtol=1e-5)
    cfg = DataConfig(mean=[0.5] * 4, std=[0.25] * 4, photometric=1.0)
    prepare = TrainingInput(cfg, tiles, torch.device("cpu"))
    prepare.start_epoch(0, 0)
    a = prepare(images)
    prepare.start_epoch(0, 0)
    torch.testing.assert_close(prepare(images), a)  # reproducible per (seed, rank, epoch)
    prepare.start_epoch(0, 0)  # the uint8 fast path: the float pass, then standardised
    floats = images.permute(0, 3, 1, 2).float() * (1.0 / 255.0)
    perturbed = photometric(floats, 1.0, prepare.generator, prepare.ranges)
    torch.testing.assert_close(a, (perturbed - 0.5) / 0.25, atol=1e-5, rtol=1e-5)
    plain = (images.permute(0, 3, 1, 2).float() / 255 - 0.5) / 0.25
    assert (a - plain).abs().mean() > 0.05


# --- per-tile band standardisation --------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 3])
def test_band_stats_of_a_file_match_those_in_memory_over_valid_pixels(
    tmp_path: Path, threads: int
) -> None:
    rng = np.random.default_rng(1)
    image = rng.integers(1, 256, (4, 1300, 90)).astype(np.uint8)  # 3 strips of 512 rows
    image[:, 100:200, 10:50] = 0  # no data (nodata=0 on every band)
    image[:, 1100:, 60:] = 0
    path = tmp_path / "t.tif"
    profile = {"driver": "GTiff", "width": 90, "height": 1300, "count": 4, "dtype": "uint8"}
    with rasterio.open(path, "w", nodata=0, **profile) as dst:
        dst.write(image)
    with rasterio.open(path) as src:
        from_file = dataset_band_stats(src)
    pixels = np.moveaxis(image, 0, -1)
    nodata = (pixels == 0).all(axis=-1)
    in_memory = array_band_stats(pixels, nodata, threads)  # strips counted in threads
    assert from_file == in_memory
    valid = pixels[~nodata].astype(np.float64) / 255
    np.testing.assert_allclose(in_memory.mean, valid.mean(0), rtol=1e-12)
    np.testing.assert_allclose(in_memory.std, valid.std(0), rtol=1e-9)


def _confusion_from_map(pred: np.ndarray, truth: np.ndarray, k: int = 6) -> np.ndarray:
    keep = (truth != 255) & (pred != 255)
    return np.bincount(truth[keep] * k + pred[keep], minlength=k * k).reshape(k, k)


def test_per_tile_model_gives_the_same_map_through_predict_and_evaluate(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "1"),
        "--set", "data.normalize=per_tile",
        "--set", "data.photometric=0.5",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    checkpoint = run / "checkpoints" / "last.pt"
    assert load_checkpoint(checkpoint).config["data"]["normalize"] == "per_tile"
    # a tile and itself with bands 12 DN brighter or darker: per-tile standardisation cancels it
    data = tmp_path / "data"
    data.mkdir()
    for name in ("a", "b"):
        shutil.copy(tiny_data / "synth_000_lc.tif", data / f"{name}_lc.tif")
    shutil.copy(tiny_data / "synth_000_naip.tif", data / "a_naip.tif")
    with rasterio.open(tiny_data / "synth_000_naip.tif") as src:
        profile, pixels = src.profile, src.read()
    shifted = pixels.astype(np.int16)
    for band in shifted:  # 12 DN up, or down, per band where the values leave room
        band += 12 if band.max() <= 255 - 12 else -12 if band.min() > 12 else 0
    assert (shifted != pixels).any()
    with rasterio.open(data / "b_naip.tif", "w", **profile) as dst:
        dst.write(shifted.astype(np.uint8))
    out = tmp_path / "eval"
    result = run_cli(
        "evaluate", "--checkpoint", str(checkpoint), "--data", str(data), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    maps = tmp_path / "maps"
    result = run_cli(
        "predict", str(data / "*_naip.tif"), "--checkpoint", str(checkpoint),
        "--out", str(maps), "--no-preview",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    mapping = resolve_mapping("chesapeake7")
    truth = mapping.encode(rasterio.open(data / "a_lc.tif").read(1)).astype(np.int64)
    pred = {n: rasterio.open(maps / f"{n}_naip_class.tif").read(1).astype(np.int64) for n in "ab"}
    with (out / "confusion.csv").open() as handle:
        rows = [line.strip().split(",")[1:] for line in handle.readlines()[1:]]
    evaluated = np.array(rows, dtype=np.int64)
    expected = _confusion_from_map(pred["a"], truth) + _confusion_from_map(pred["b"], truth)
    np.testing.assert_array_equal(evaluated, expected)
    assert (pred["a"] == pred["b"]).mean() > 0.999


# --- exponential moving average of the weights ---------------------------------------------


def _initial_weights(config: Config) -> dict[str, torch.Tensor]:
    torch.manual_seed(config.run.seed)
    model = build_model(
        config.model,
        len(config.data.bands),
        config.data.classes.num_classes,
        config.data.patch_size,
    )
    return {k: v.clone() for k, v in model.state_dict().items()}


def _ema_step(ema: dict, raw: dict, updates: int, decay: float) -> dict:
    d = ema_decay_at(decay, updates)
    return {
        k: (d * ema[k].double() + (1 - d) * raw[k].double())
        if raw[k].is_floating_point()
        else raw[k]
        for k in raw
    }


def _assert_weights_close(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for k, v in actual.items():
        if v.is_floating_point():
            torch.testing.assert_close(v.double(), expected[k].double(), atol=1e-6, rtol=1e-5)
        else:
            assert torch.equal(v, expected[k]), k


def test_ema_weights_are_saved_used_for_prediction_and_continued_on_resume(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    decay = 0.5  # min(0.5, (1 + t) / (10 + t)): the warm-up decides the first four steps
    one_step = ("--set", "optim.samples_per_epoch=4", "--set", f"optim.ema_decay={decay}")
    result = run_cli(*train_args(tiny_config, tiny_data, run, "--epochs", "2"), *one_step)
    assert result.returncode == 0, result.stderr
    result = run_cli(*train_args(tiny_config, tiny_data, run, "--epochs", "3"), *one_step)
    assert result.returncode == 0, result.stderr
    assert "resuming from" in result.stderr + result.stdout
    saved = [load_checkpoint(run / "checkpoints" / f"epoch-{e:04d}.pt") for e in (1, 2, 3)]
    config = config_from_dict(saved[0].config)
    ema = _initial_weights(config)  # the average starts as the initial weights
    for updates, state in enumerate(saved):
        assert state.ema_updates == updates + 1 and state.train_model
        ema = _ema_step(ema, state.train_model, updates, decay)  # one optimizer step per epoch
        _assert_weights_close(state.model, ema)
        assert not torch.equal(
            state.model["segmentation_head.0.weight"],
            state.train_model["segmentation_head.0.weight"],
        )
    # resuming continued the raw weights too: epoch 3's raw weights are not epoch 2's average
    last = load_checkpoint(run / "checkpoints" / "last.pt")
    im = load_inference_model(run / "checkpoints" / "last.pt", device="cpu")
    _assert_weights_close(im.model.state_dict(), last.model)  # prediction uses the average
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics][-1] == 3


def test_without_ema_the_checkpoint_holds_the_raw_weights_only(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "1"),
        "--set", "optim.samples_per_epoch=4",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state.train_model == {} and state.ema_updates == 0


def test_a_run_from_a_manifest_names_the_manifest_in_its_log(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """A manifest overrides the data folder; the log said the folder (the built-in sample when
    none was given) was read, as if the manifest had been ignored."""
    names = sorted(p.name[: -len("_naip.tif")] for p in tiny_data.glob("*_naip.tif"))[:3]
    manifest = tmp_path / "pairs.csv"
    rows = [f"{tiny_data / n}_naip.tif,{tiny_data / n}_lc.tif,{s}" for n, s in zip(
        names, ["train", "train", "val"], strict=True
    )]  # fmt: skip
    manifest.write_text("image,label,split\n" + "\n".join(rows) + "\n")
    args = ["train", "--config", str(tiny_config), "--out", str(tmp_path / "run")]
    result = run_cli(
        *args, "--set", f"data.manifest={manifest}", "--epochs", "1", "--workers", "1",
        "--samples-per-epoch", "8",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"data manifest {manifest}: 2 training and 1 validation tiles" in result.stderr
    assert f"fetching its 2 training tiles (4 files) from manifest {manifest}" in result.stderr
    assert "sample" not in result.stderr.split("fetching its", 1)[1].split("\n", 1)[0]


# --- model selection on validation tiles only ---------------------------------------------


def test_manifest_test_rows_are_neither_trained_nor_validated_on(
    tiny_data: Path, tmp_path: Path
) -> None:
    from landcover.data.pairs import split_pairs

    names = sorted(p.name[: -len("_naip.tif")] for p in tiny_data.glob("*_naip.tif"))
    splits = ["train"] * 4 + ["val"] * 2 + ["test"] * 2
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(
        "image,label,split\n"
        + "".join(
            f"{tiny_data / n}_naip.tif,{tiny_data / n}_lc.tif,{s}\n"
            for n, s in zip(names, splits, strict=True)
        )
    )
    train, val = split_pairs(DataConfig(manifest=str(manifest)), str(tmp_path))
    assert [Path(p.label).name for p in train] == [f"{n}_lc.tif" for n in names[:4]]
    assert [Path(p.label).name for p in val] == [
        f"{n}_lc.tif" for n in names[4:6]
    ]  # best.pt: these only


def test_a_patch_larger_than_the_tiles_is_warned(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """--patch-size 256 on 128 px tiles trained on patches three quarters padding, unsaid."""
    args = train_args(tiny_config, tiny_data, tmp_path / "run", "--epochs", "1", "--workers", "1")
    result = run_cli(*args, "--patch-size", "256", "--samples-per-epoch", "8")
    assert result.returncode == 0, result.stderr
    warned = [ln for ln in result.stderr.splitlines() if "smaller than data.patch_size" in ln]
    assert len(warned) == 1, result.stderr
    assert "6 of 6 training tiles are smaller than data.patch_size (256 px)" in warned[0]
    assert "at most 128 px" in warned[0]
