"""Mechanisms for learning rare classes: loss terms, capped class weights, class-balanced patches.

Every expectation is computed independently (numpy re-implementations of the losses, numpy
counts of the patches).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from landcover.classes import IGNORE_INDEX
from landcover.config import LossConfig, load_config
from landcover.data import classindex
from landcover.data.classindex import index_classes
from landcover.data.raster import TileArrays
from landcover.feed.sampler import RANDOM, PatchSampler, epoch_rng
from landcover.training.autostats import resolve_auto
from landcover.training.losses import SegmentationLoss, frequency_weights

from conftest import REPO, run_cli, train_args

K = 4
EPS = 1e-7


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _flat(logits: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The valid pixels as ``(P, K)`` logits and ``(P,)`` labels."""
    scores = np.moveaxis(logits, 1, -1).reshape(-1, logits.shape[1])
    labels = target.reshape(-1)
    valid = labels != IGNORE_INDEX
    return scores[valid], labels[valid]


def np_ce(logits: np.ndarray, target: np.ndarray, weights: np.ndarray | None = None) -> float:
    z, y = _flat(logits, target)
    logp = z - z.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    w = np.ones(z.shape[1]) if weights is None else weights
    return float(-(w[y] * logp[np.arange(len(y)), y]).sum() / w[y].sum())


def np_focal(
    logits: np.ndarray, target: np.ndarray, gamma: float, weights: np.ndarray | None = None
) -> float:
    """One-vs-rest sigmoid focal loss per class, averaged over the classes (smp's definition)."""
    z, y = _flat(logits, target)
    per_class = []
    for c in range(z.shape[1]):
        t = (y == c).astype(np.float64)
        bce = np.maximum(z[:, c], 0) - z[:, c] * t + np.log1p(np.exp(-np.abs(z[:, c])))
        pt = np.exp(-bce)
        per_class.append(((1 - pt) ** gamma * bce).mean())
    per = np.array(per_class)
    if weights is None:
        return float(per.mean())
    return float((per * weights).sum() / weights.sum())


def _soft_counts(logits: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, ...]:
    z, y = _flat(logits, target)
    p = _softmax(z)
    t = np.eye(z.shape[1])[y]
    return (p * t).sum(0), (p * (1 - t)).sum(0), ((1 - p) * t).sum(0), t.sum(0)


def np_dice(logits: np.ndarray, target: np.ndarray) -> float:
    tp, fp, fn, present = _soft_counts(logits, target)
    score = 2 * tp / np.maximum(2 * tp + fp + fn, EPS)
    return float(((1 - score) * (present > 0)).mean())


def np_tversky(logits: np.ndarray, target: np.ndarray, alpha: float, beta: float) -> float:
    tp, fp, fn, present = _soft_counts(logits, target)
    score = tp / np.maximum(tp + alpha * fp + beta * fn, EPS)
    return float(((1 - score) * (present > 0)).mean())


def np_lovasz(logits: np.ndarray, target: np.ndarray) -> float:
    """Lovasz-softmax (Berman et al. 2018) over the classes present in the valid pixels."""
    z, y = _flat(logits, target)
    p = _softmax(z)
    losses = []
    for c in range(z.shape[1]):
        fg = (y == c).astype(np.float64)
        if fg.sum() == 0:
            continue
        errors = np.abs(fg - p[:, c])
        order = np.argsort(-errors, kind="stable")
        fg_sorted = fg[order]
        gts = fg_sorted.sum()
        jaccard = 1 - (gts - np.cumsum(fg_sorted)) / (gts + np.cumsum(1 - fg_sorted))
        jaccard[1:] = jaccard[1:] - jaccard[:-1]
        losses.append(float(errors[order] @ jaccard))
    return float(np.mean(losses))


@pytest.fixture
def batch() -> tuple[np.ndarray, np.ndarray]:
    """Logits ``(2, K, 8, 8)`` and labels with every class and some no-data pixels."""
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 2, size=(2, K, 8, 8))
    target = rng.integers(0, K, size=(2, 8, 8))
    target[0, :2, :] = IGNORE_INDEX
    target[1, 5, 3:7] = IGNORE_INDEX
    return logits, target


def _loss(**weights: float) -> SegmentationLoss:
    return SegmentationLoss(LossConfig(**weights), K)


TERMS = {
    "ce": ({"ce_weight": 1.0}, lambda z, t: np_ce(z, t)),
    "dice": ({"ce_weight": 0.0, "dice_weight": 1.0}, np_dice),
    "focal": (
        {"ce_weight": 0.0, "focal_weight": 1.0, "focal_gamma": 1.5},
        lambda z, t: np_focal(z, t, 1.5),
    ),
    "lovasz": ({"ce_weight": 0.0, "lovasz_weight": 1.0}, np_lovasz),
    "tversky": (
        {"ce_weight": 0.0, "tversky_weight": 1.0, "tversky_alpha": 0.2, "tversky_beta": 0.8},
        lambda z, t: np_tversky(z, t, 0.2, 0.8),
    ),
}


@pytest.mark.parametrize("name", list(TERMS))
def test_each_loss_term_matches_numpy_and_ignores_nodata(name: str, batch) -> None:
    weights, expected_fn = TERMS[name]
    logits, target = batch
    criterion = _loss(**weights)
    assert [t.name for t in criterion.terms] == [name]
    z = torch.tensor(logits, dtype=torch.float32, requires_grad=True)
    loss = criterion(z, torch.tensor(target))
    assert float(loss.detach()) == pytest.approx(expected_fn(logits, target), rel=1e-5, abs=1e-6)
    loss.backward()
    ignored = torch.tensor(target == IGNORE_INDEX).unsqueeze(1).expand_as(z)
    assert float(z.grad[ignored].abs().max()) == 0.0  # no gradient reaches a no-data pixel
    assert float(z.grad[~ignored].abs().max()) > 0.0

    # other logits at the no-data pixels change neither the loss nor its gradient
    other = logits.copy()
    other[ignored.numpy()] = np.random.default_rng(9).normal(0, 5, size=int(ignored.sum()))
    z2 = torch.tensor(other, dtype=torch.float32, requires_grad=True)
    loss2 = criterion(z2, torch.tensor(target))
    loss2.backward()
    assert float(loss2.detach()) == pytest.approx(float(loss.detach()), rel=1e-6, abs=1e-7)
    torch.testing.assert_close(z2.grad, z.grad, rtol=1e-5, atol=1e-7)


def test_class_weights_apply_to_cross_entropy_and_focal(batch) -> None:
    logits, target = batch
    w = np.array([0.5, 1.0, 4.0, 10.0])
    z, t = torch.tensor(logits, dtype=torch.float32), torch.tensor(target)
    ce = _loss(class_weights=w.tolist())(z, t)
    assert float(ce) == pytest.approx(np_ce(logits, target, w), rel=1e-5)
    focal = _loss(ce_weight=0.0, focal_weight=1.0, class_weights=w.tolist())(z, t)
    assert float(focal) == pytest.approx(np_focal(logits, target, 2.0, w), rel=1e-5)


def test_combined_loss_is_the_weighted_sum(batch) -> None:
    logits, target = batch
    config = {
        "ce_weight": 0.7,
        "dice_weight": 0.3,
        "focal_weight": 1.0,
        "lovasz_weight": 0.5,
        "tversky_weight": 0.25,
    }
    criterion = _loss(**config)
    z, t = torch.tensor(logits, dtype=torch.float32), torch.tensor(target)
    expected = (
        0.7 * np_ce(logits, target)
        + 0.3 * np_dice(logits, target)
        + 1.0 * np_focal(logits, target, 2.0)
        + 0.5 * np_lovasz(logits, target)
        + 0.25 * np_tversky(logits, target, 0.3, 0.7)
    )
    assert float(criterion(z, t)) == pytest.approx(expected, rel=1e-5)
    parts = criterion.components(z, t)
    assert set(parts) == {"ce", "dice", "focal", "lovasz", "tversky"}


def test_an_all_nodata_batch_gives_a_finite_lovasz_term() -> None:
    target = torch.full((1, 4, 4), IGNORE_INDEX)
    z = torch.zeros((1, K, 4, 4), requires_grad=True)
    loss = _loss(ce_weight=0.0, lovasz_weight=1.0)(z, target)
    loss.backward()
    assert float(loss.detach()) == 0.0 and float(z.grad.abs().max()) == 0.0


def test_a_loss_without_any_term_is_refused() -> None:
    with pytest.raises(ValidationError, match="at least one of"):
        LossConfig(ce_weight=0.0)


@pytest.mark.parametrize("scheme", ["median_frequency", "inverse_sqrt"])
def test_a_class_1000x_rarer_than_the_median_gets_exactly_the_cap(scheme: str) -> None:
    frequencies = [0.5, 0.3, 0.1997, 0.0003, 0.0]  # median of the present ones: 0.3 (and 0.25)
    weights = frequency_weights(frequencies, scheme, (1 / 25, 25.0))
    assert weights[3] == 25.0  # 1000x (or sqrt(1000) = 31.6x) the median weight, capped
    assert weights[4] == 1.0  # absent
    present = np.array(frequencies[:3])
    power = 1.0 if scheme == "median_frequency" else 0.5
    expected = (np.median(np.array(frequencies[:4])) / present) ** power
    np.testing.assert_allclose(weights[:3], expected, rtol=1e-12)


def test_class_weight_cap_and_scheme_reach_auto_weights() -> None:
    counts = np.array([1000.0, 1000.0, 1000.0, 0.0, 1.0, 1000.0])  # impervious 1000x rarer
    names = ["water", "tree_canopy", "low_vegetation", "barren", "impervious", "road"]
    frequencies = dict(zip(names, (counts / counts.sum()).tolist(), strict=True))
    base = [
        "data.mean=[0.3,0.4,0.3,0.5]",
        "data.std=[0.1,0.1,0.1,0.2]",
        f"data.class_frequencies={frequencies}",
        "optim.loss.class_weights=auto",
    ]
    for sets, rare, low in (
        ([], 10.0, 1.0),  # default: median frequency capped at 10
        (["optim.loss.class_weight_cap=50"], 50.0, 1.0),
        (["optim.loss.class_weight_cap=2000"], 1000.0, 1.0),
        (["optim.loss.class_weight_scheme=inverse_sqrt"], 10.0, 1.0),
        (
            ["optim.loss.class_weight_scheme=inverse_sqrt", "optim.loss.class_weight_cap=100"],
            1000**0.5,
            1.0,
        ),
    ):
        config = load_config(None, None, base + sets)
        resolved, lines = resolve_auto(config, lambda: pytest.fail("nothing is left to measure"))
        weights = dict(zip(names, resolved.class_weights, strict=True))
        assert weights["impervious"] == pytest.approx(rare, rel=1e-12), sets
        assert weights["water"] == low and weights["barren"] == 1.0
        cap = config.optim.loss.class_weight_cap
        assert any(f"clipped to [{1 / cap:g}, {cap:g}]" in line for line in lines)


# ----------------------------------------------------------------------------- sampling

RARE, PATCH, BATCH = 4, 32, 16
CLASSES = 6


def _share() -> list[TileArrays]:
    """Two 512 px tiles: forest | field halves, a no-data strip, and 24 buildings of 8 x 8 px
    (class 4, 0.29 % of the share's pixels) in the first tile only; classes 0, 3, 5 absent."""
    rng = np.random.default_rng(11)
    tiles = []
    for i in range(2):
        label = np.full((512, 512), 1, dtype=np.uint8)
        label[:, 256:] = 2
        label[:, :8] = IGNORE_INDEX
        if i == 0:
            cells = rng.choice(32 * 32, 24, replace=False)  # one building per 16 px cell at most
            for cell in cells:
                y, x = divmod(int(cell), 32)
                label[y * 16 + 4 : y * 16 + 12, x * 16 + 4 : x * 16 + 12] = RARE
        image = np.stack([label * 10 + b for b in range(4)], axis=-1).astype(np.uint8)
        tiles.append(TileArrays(f"t{i}", image, label))
    return tiles


def _fraction_with(labels: torch.Tensor, c: int) -> np.ndarray:
    """Per patch: whether it holds a pixel of class ``c``."""
    return (labels.numpy() == c).reshape(len(labels), -1).any(axis=1)


def test_class_balance_puts_a_rare_class_in_a_set_fraction_of_every_batch() -> None:
    tiles = _share()
    labels_all = np.concatenate([t.label.ravel() for t in tiles])
    rare_share = np.count_nonzero(labels_all == RARE) / np.count_nonzero(labels_all != IGNORE_INDEX)
    assert 0.002 < rare_share < 0.004  # about 0.3 % of the labelled pixels
    f, present = 0.75, 3  # classes 1, 2 and 4
    floor_per_batch = (int(f * BATCH) // present) / BATCH  # 12 class-centred slots -> 4 each

    balanced = PatchSampler(tiles, PATCH, CLASSES, class_balance=f)
    plain = PatchSampler(tiles, PATCH, CLASSES)
    rng_on, rng_off = epoch_rng(0, 0, 0), epoch_rng(0, 0, 0)
    on, off = [], []
    for _ in range(60):
        on.append(_fraction_with(balanced.batch(BATCH, rng_on)[1], RARE).mean())
        off.append(_fraction_with(plain.batch(BATCH, rng_off)[1], RARE).mean())
    assert min(on) >= floor_per_batch  # in every batch, not only on average
    assert np.mean(on) >= f / present
    assert np.mean(off) < f / present / 2  # far below it without class balance


def test_class_centred_slots_hold_their_class_and_absent_classes_are_never_requested() -> None:
    sampler = PatchSampler(_share(), PATCH, CLASSES, class_balance=1.0)
    np.testing.assert_array_equal(sampler.present_classes, [1, 2, RARE])
    rng = epoch_rng(3, 1, 2)
    for _ in range(40):
        plan = sampler.plan(BATCH, copy.deepcopy(rng))  # the plan batch() is about to draw
        _, labels = sampler.batch(BATCH, rng)
        assert set(plan.tolist()) <= {1, 2, RARE}  # never 0, 3, 5 (absent) nor RANDOM
        counts = np.bincount(plan, minlength=CLASSES)
        assert counts[[1, 2, RARE]].min() == BATCH // 3 and counts.sum() == BATCH
        for label, c in zip(labels.numpy(), plan, strict=True):
            assert (label == c).any()


def test_class_balance_rounds_the_slot_count_at_random_to_the_set_fraction() -> None:
    sampler = PatchSampler(_share(), PATCH, CLASSES, class_balance=0.3)
    rng = epoch_rng(0, 0, 0)
    slots = [int((sampler.plan(5, rng) != RANDOM).sum()) for _ in range(4000)]
    assert set(slots) == {1, 2}  # 1.5 rounded down or up
    assert abs(np.mean(slots) / 5 - 0.3) < 0.01


def test_class_balanced_batches_are_a_function_of_seed_rank_and_epoch() -> None:
    sampler = PatchSampler(_share(), PATCH, CLASSES, class_balance=0.5, oversample_rare=0.2)

    def epoch(seed: int, rank: int, e: int) -> list[torch.Tensor]:
        rng = epoch_rng(seed, rank, e)
        return [sampler.batch(8, rng)[1] for _ in range(3)]

    a, b, c = epoch(5, 1, 2), epoch(5, 1, 2), epoch(5, 1, 3)
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
    assert not all((x == y).all() for x, y in zip(a, c, strict=True))
    # another sampler over the same tiles (another process) draws the same batches
    again = PatchSampler(_share(), PATCH, CLASSES, class_balance=0.5, oversample_rare=0.2)
    rng = epoch_rng(5, 1, 2)
    assert all((again.batch(8, rng)[1] == x).all() for x in a)


def test_class_index_keeps_a_uniform_sample_of_each_class(monkeypatch) -> None:
    monkeypatch.setattr(classindex, "_CHUNK_PIXELS", 1000)  # many chunk boundaries
    rng = np.random.default_rng(0)
    label = rng.choice([0, 1, 2, IGNORE_INDEX], p=[0.9, 0.0995, 0.0005, 0.0], size=(300, 200))
    label = label.astype(np.uint8)
    counts = np.bincount(label.ravel(), minlength=256)[:4][None, :]
    index = index_classes([label], counts, per_class=500)
    flat = label.ravel()
    for c in range(3):
        points = index.points[0][c]
        expected = min(int(counts[0, c]), 500)
        assert len(points) == expected and len(np.unique(points)) == expected
        assert (flat[points] == c).all()
    np.testing.assert_array_equal(index.points[0][2], np.flatnonzero(flat == 2))  # rare: all
    assert len(index.points[0][3]) == 0
    np.testing.assert_array_equal(index.present, [0, 1, 2])
    # the sample of a common class spreads over the whole tile, not its first rows
    rows = index.points[0][0] // 200
    assert np.histogram(rows, bins=3, range=(0, 300))[0].min() > 120


def test_training_with_class_balance_focal_and_lovasz_runs(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    result = run_cli(
        *train_args(tiny_config, tiny_data, tmp_path / "run", "--epochs", "1"),
        *("--samples-per-epoch", "8", "--set", "data.class_balance=0.5"),
        *("--set", "optim.loss.focal_weight=1", "--set", "optim.loss.lovasz_weight=0.5"),
    )
    assert result.returncode == 0, result.stderr
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "class_balance: 0.5" in saved and "lovasz: 0.5" in saved


def test_an_older_config_with_oversample_rare_still_loads_with_class_balance_off(
    tmp_path: Path,
) -> None:
    path = tmp_path / "older.yaml"
    path.write_text("data:\n  oversample_rare: 0.1\noptim:\n  loss: {dice_weight: 0.5}\n")
    config = load_config(path)
    assert config.data.oversample_rare == 0.1 and config.data.class_balance == 0.0
    assert config.data.normalize == "global" and config.data.photometric == 0.0
    assert config.optim.ema_decay == 0.0 and config.optim.loss.class_weights is None
    assert config.optim.loss.class_weight_cap == 10.0


@pytest.mark.parametrize("name", ["cpu.yaml", "default.yaml"])
def test_shipped_configs_turn_on_the_shift_and_rarity_defaults(name: str) -> None:
    """Both shipped configs carry what the shifted world chose (docs/guide/training.md:
    "Against shift between flights"); the pydantic defaults stay off so older configs and
    checkpoints mean what they meant."""
    config = load_config(REPO / "configs" / name)
    assert config.data.normalize == "per_tile"
    assert config.data.photometric == 0.8 and config.data.class_balance == 0.5
    assert config.data.oversample_rare == 0.0
    assert config.optim.ema_decay > 0
    loss = config.optim.loss
    assert loss.class_weights == "auto" and loss.class_weight_scheme == "inverse_sqrt"
    assert loss.terms == {"ce": 1.0, "dice": 1.0}
