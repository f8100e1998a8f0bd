import numpy as np
import pytest

from landcover.classes import IGNORE_INDEX
from landcover.data.raster import TileArrays
from landcover.data.sharding import shard
from landcover.feed.sampler import PatchSampler, epoch_rng


@pytest.mark.parametrize(("tiles", "world"), [(10, 1), (10, 2), (10, 3), (7, 7), (5, 4)])
def test_shards_are_disjoint_and_cover(tiles: int, world: int) -> None:
    items = list(range(tiles))
    shares = [shard(items, r, world) for r in range(world)]
    flat = [i for s in shares for i in s]
    assert sorted(flat) == items
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_more_workers_than_tiles_every_worker_gets_a_tile() -> None:
    items = ["a", "b", "c"]
    shares = [shard(items, r, 8) for r in range(8)]
    assert all(len(s) == 1 for s in shares)
    assert {s[0] for s in shares} == set(items)
    assert [s[0] for s in shares] == ["a", "b", "c", "a", "b", "c", "a", "b"]


def _tile(name: str, label: np.ndarray) -> TileArrays:
    image = np.stack([label * 10 + b for b in range(4)], axis=-1).astype(np.uint8)
    return TileArrays(name, image, label.astype(np.uint8))


def test_patches_have_shape_and_keep_image_label_aligned() -> None:
    rng = np.random.default_rng(0)
    label = rng.integers(0, 6, size=(100, 90)).astype(np.uint8)
    sampler = PatchSampler([_tile("t", label)], 32, 6, augment=True)
    images, labels = sampler.batch(16, epoch_rng(0, 0, 0))
    assert images.shape == (16, 32, 32, 4)
    assert labels.shape == (16, 32, 32)
    # the image encodes the label (band 0 = 10 * label) and must stay aligned after D4 augmentation
    np.testing.assert_array_equal(images[..., 0].numpy(), labels.numpy() * 10)


def test_augmentation_draws_all_eight_d4_transforms() -> None:
    # one tile exactly the patch's size, with no symmetry: every patch is the whole tile
    label = np.arange(32 * 32).reshape(32, 32) % 6
    label[0, :3] = [5, 4, 3]
    tile = _tile("t", label)
    sampler = PatchSampler([tile], 32, 6, augment=True)
    images, labels = sampler.batch(200, epoch_rng(0, 0, 0))
    seen = {lab.numpy().tobytes() for lab in labels}
    expected = set()
    for m in (tile.label, tile.label.T):  # D4: the 4 rotations of the tile and of its transpose
        for k in range(4):
            expected.add(np.ascontiguousarray(np.rot90(m, k)).tobytes())
    assert len(expected) == 8 and seen == expected
    np.testing.assert_array_equal(images[..., 0].numpy(), labels.numpy() * 10)
    plain = PatchSampler([tile], 32, 6, augment=False).batch(5, epoch_rng(0, 0, 0))[1]
    assert all((p.numpy() == tile.label).all() for p in plain)


def test_mostly_nodata_patches_are_redrawn() -> None:
    label = np.full((64, 256), IGNORE_INDEX, dtype=np.uint8)
    label[:, 192:] = 1  # only the right quarter is labelled
    sampler = PatchSampler([_tile("t", label)], 64, 6, max_nodata_fraction=0.5, max_tries=50)
    _, labels = sampler.batch(64, epoch_rng(1, 0, 0))
    nodata = (labels == IGNORE_INDEX).float().mean(dim=(1, 2))
    assert float(nodata.max()) <= 0.5


def test_rare_class_oversampling_raises_rare_class_share() -> None:
    label = np.zeros((256, 256), dtype=np.uint8)
    label[100:108, 100:108] = 3  # a rare class: 0.1 % of pixels
    tiles = [_tile("t", label)]
    plain = PatchSampler(tiles, 32, 6, oversample_rare=0.0)
    over = PatchSampler(tiles, 32, 6, oversample_rare=0.5)
    _, a = plain.batch(200, epoch_rng(0, 0, 0))
    _, b = over.batch(200, epoch_rng(0, 0, 0))
    assert float((b == 3).float().mean()) > 5 * float((a == 3).float().mean())


def test_draws_are_reproducible_per_rank_and_epoch() -> None:
    label = np.random.default_rng(0).integers(0, 6, size=(128, 128)).astype(np.uint8)
    sampler = PatchSampler([_tile("t", label)], 32, 6)
    a = sampler.batch(4, epoch_rng(5, 1, 2))[1]
    b = sampler.batch(4, epoch_rng(5, 1, 2))[1]
    c = sampler.batch(4, epoch_rng(5, 0, 2))[1]
    assert (a == b).all()
    assert not (a == c).all()


def test_small_tiles_are_padded_to_the_patch() -> None:
    label = np.ones((20, 30), dtype=np.uint8)
    sampler = PatchSampler([_tile("t", label)], 32, 6, max_nodata_fraction=1.0)
    images, labels = sampler.batch(2, epoch_rng(0, 0, 0))
    assert images.shape == (2, 32, 32, 4)
    assert int((labels == 1).sum()) == 2 * 20 * 30
