"""A COG cut short (as a full disk leaves it) is told from a whole one before it is published."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.enums
import rasterio.shutil
from rasterio.transform import from_origin

from landcover.inference.cogcheck import check_complete


def _cog(
    folder: Path, bands: int, interleave: str, masked: bool = False, compress: str = "DEFLATE"
) -> Path:
    rng = np.random.default_rng(1)
    src = folder / "src.tif"
    profile = {
        "driver": "GTiff",
        "width": 700,
        "height": 600,
        "count": bands,
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": from_origin(0, 0, 1, 1),
    }
    with rasterio.open(src, "w", **profile) as ds:
        ds.write(rng.integers(0, 256, (bands, 600, 700), dtype=np.uint8))
        if masked:  # noisy, as no map's is: a large last mask block
            ds.write_mask(rng.choice(np.array([0, 255], dtype=np.uint8), size=(600, 700)))
    dst = folder / f"cog-{bands}-{interleave}-{compress}{'-masked' if masked else ''}.tif"
    rasterio.shutil.copy(
        src, dst, driver="COG", COMPRESS=compress, BLOCKSIZE="256", INTERLEAVE=interleave
    )
    return dst


@pytest.mark.parametrize(("bands", "interleave"), [(1, "PIXEL"), (4, "PIXEL"), (4, "BAND")])
def test_a_whole_cog_passes_and_a_cut_one_does_not(
    tmp_path: Path, bands: int, interleave: str
) -> None:
    path = _cog(tmp_path, bands, interleave)
    check_complete(path)
    data = path.read_bytes()
    for keep in (len(data) - 1024, len(data) // 2, 600):  # (its last bytes are padding)
        cut = tmp_path / f"cut{keep}.tif"
        cut.write_bytes(data[:keep])
        with pytest.raises(OSError) as caught:
            check_complete(cut)
        assert caught.value.errno == errno.EIO  # this disk has room: not "full"
        assert f"({keep} of at least" in str(caught.value)


def test_a_cog_cut_inside_its_last_mask_block_does_not_pass(tmp_path: Path) -> None:
    # the probability map has a mask: each block of it follows its block of imagery, so the
    # file ends with the last block's mask, past the end of every block of imagery
    path = _cog(tmp_path, 6, "PIXEL", masked=True, compress="ZSTD")
    check_complete(path)
    with rasterio.open(path) as ds:
        assert rasterio.enums.MaskFlags.per_dataset in ds.mask_flag_enums[0]
        imagery_end = max(
            int(ds.get_tag_item(f"BLOCK_OFFSET_{c}_{r}", "TIFF", bidx=1))
            + int(ds.get_tag_item(f"BLOCK_SIZE_{c}_{r}", "TIFF", bidx=1))
            for r in range(3)
            for c in range(3)
        )
    data = path.read_bytes()
    assert len(data) > imagery_end + 64  # the last mask block comes after the imagery
    cut = tmp_path / "cut.tif"
    keep = imagery_end + 16  # every block of imagery whole; the last mask block cut short
    cut.write_bytes(data[:keep])
    with pytest.raises(OSError) as caught:
        check_complete(cut)
    assert caught.value.errno == errno.EIO
    assert f"({keep} of at least" in str(caught.value)
