"""A COG cut short (as a full disk leaves it) is told from a whole one before it is published."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.shutil
from rasterio.transform import from_origin

from landcover.inference.cogcheck import check_complete


def _cog(folder: Path, bands: int, interleave: str) -> Path:
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
    dst = folder / f"cog-{bands}-{interleave}.tif"
    rasterio.shutil.copy(
        src, dst, driver="COG", COMPRESS="DEFLATE", BLOCKSIZE="256", INTERLEAVE=interleave
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
