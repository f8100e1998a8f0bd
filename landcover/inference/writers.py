"""Writing georeferenced maps: window by window to a scratch GeoTIFF, then a Cloud Optimized GeoTIFF.

GDAL's COG driver only creates whole files from a source, so maps are first written block by
block into an uncompressed tiled scratch GeoTIFF (bounded memory), then copied with the COG
driver (deflate, 256 px blocks, internal overviews) to a temporary name beside the destination
and renamed over it: a reader never sees a half-written map.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.windows import Window

from landcover.classes import ClassMapping
from landcover.fileio import make_temp_beside

CLASS_NODATA = 255
"""Class-map value where the input has no data."""


def class_colormap(mapping: ClassMapping) -> dict[int, tuple[int, int, int, int]]:
    """The colour table of a class map: each class's colour, transparent no-data.

    Args:
        mapping: The class mapping.

    Returns:
        A GDAL colour table ``{value: (r, g, b, a)}``.
    """
    table = {i: (*spec.rgb, 255) for i, spec in enumerate(mapping.classes)}
    table[CLASS_NODATA] = (0, 0, 0, 0)
    return table


@contextmanager
def scratch_folder(near: Path) -> Iterator[Path]:
    """A hidden scratch folder beside ``near`` (same file system), removed afterwards.

    Args:
        near: The destination folder.

    Yields:
        The scratch folder.
    """
    near.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".landcover-tmp-", dir=near))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class MapWriter:
    """Writes the class map and the probability map of one tile, strip by strip.

    Args:
        src: The input image dataset (its grid is copied).
        mapping: The class mapping (names, colours).
        scratch: A scratch folder for the uncompressed intermediates.
        prob_dtype: ``uint8`` (probability x 255) or ``float32``.
        tags: Extra metadata written into both maps.
    """

    def __init__(
        self,
        src: rasterio.io.DatasetReader,
        mapping: ClassMapping,
        scratch: Path,
        prob_dtype: str = "uint8",
        tags: dict[str, str] | None = None,
    ) -> None:
        self.mapping = mapping
        self.prob_dtype = np.dtype(prob_dtype)
        base = {
            "driver": "GTiff",
            "width": src.width,
            "height": src.height,
            "crs": src.crs,
            "transform": src.transform,
            "tiled": True,
            "blockxsize": 256,
            "blockysize": 256,
            "BIGTIFF": "IF_SAFER",
        }
        names = mapping.names
        meta = {
            "CLASS_NAMES": json.dumps(names),
            "CLASS_COLORS": json.dumps([c.color for c in mapping.classes]),
            "CLASS_SCHEME": mapping.name,
            **(tags or {}),
        }
        self.class_path = scratch / "class.tif"
        self.prob_path = scratch / "prob.tif"
        self.cls = rasterio.open(
            self.class_path, "w", **base, count=1, dtype="uint8", nodata=CLASS_NODATA
        )
        self.cls.write_colormap(1, class_colormap(mapping))
        self.cls.update_tags(**meta, **{f"CLASS_{i}": n for i, n in enumerate(names)})
        self.cls.set_band_description(1, "class")
        self.prob = rasterio.open(
            self.prob_path,
            "w",
            **base,
            count=len(names),
            dtype=self.prob_dtype.name,
            photometric="MINISBLACK",
        )
        self.prob.update_tags(
            **meta, PROBABILITY_SCALE="255" if self.prob_dtype == np.uint8 else "1"
        )
        for i, name in enumerate(names, start=1):
            self.prob.set_band_description(i, name)

    def write(self, row: int, probs: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Writes a strip of rows.

        Args:
            row: First row of the strip.
            probs: ``(K, h, W)`` float32 probabilities.
            valid: ``(h, W)`` bool, False where the input has no data.

        Returns:
            The strip's ``(h, W)`` uint8 class map (no-data included).
        """
        h, w = valid.shape
        window = Window(0, row, w, h)
        classes = probs.argmax(axis=0).astype(np.uint8)
        classes[~valid] = CLASS_NODATA
        self.cls.write(classes, 1, window=window)
        if self.prob_dtype == np.uint8:
            out = np.rint(probs * 255.0).astype(np.uint8)
        else:
            out = probs.astype(np.float32)
        out[:, ~valid] = 0
        self.prob.write(out, window=window)
        self.prob.write_mask(np.where(valid, 255, 0).astype(np.uint8), window=window)
        return classes

    def close(self) -> None:
        """Closes the scratch files."""
        self.cls.close()
        self.prob.close()

    def publish(self, class_dst: Path, prob_dst: Path) -> None:
        """Converts the scratch files to COGs and renames them into place.

        Args:
            class_dst: Final path of the class map.
            prob_dst: Final path of the probability map.
        """
        self.close()
        publish_cog(self.class_path, class_dst, resampling="NEAREST")
        publish_cog(self.prob_path, prob_dst, resampling="AVERAGE")


def publish_cog(src: Path, dst: Path, resampling: str) -> None:
    """Copies a GeoTIFF to a Cloud Optimized GeoTIFF at ``dst`` atomically.

    Args:
        src: The source GeoTIFF.
        dst: The destination; written under a temporary name in its folder, then renamed.
        resampling: Overview resampling (``NEAREST`` for classes, ``AVERAGE`` for probabilities).
    """
    tmp = make_temp_beside(dst)
    try:
        rasterio.shutil.copy(
            src,
            tmp,
            driver="COG",
            COMPRESS="DEFLATE",
            PREDICTOR="YES",
            BLOCKSIZE="256",
            OVERVIEW_RESAMPLING=resampling,
            BIGTIFF="IF_SAFER",
            NUM_THREADS="ALL_CPUS",  # deflate and overviews on every core (~1.7x on 2)
        )
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
