"""Writing georeferenced maps: strip by strip to a scratch GeoTIFF, then a Cloud Optimized GeoTIFF.

GDAL's COG driver only creates whole files from a source, so maps are first written block by
block into an uncompressed tiled scratch GeoTIFF (bounded memory), then copied with the COG
driver (256 px blocks, internal overviews) to a temporary name beside the destination and
renamed over it: a reader never sees a half-written map.

Compression (6,000 x 7,500 tile, one core; ``benchmarks/README.md``): the class map is DEFLATE
without a predictor (a horizontal-difference predictor makes categorical maps larger and
slower: 2.1 MB in 0.7 s against 2.5 MB in 0.8 s), readable by every GeoTIFF reader.
The probability map (one band per class, 6x the class map's pixels) is by default ZSTD level 1
with the horizontal predictor: 2.3x faster to write than DEFLATE level 6 at about the same size
(4.3 s against 9.9 s of CPU for 270 M values), and read by GDAL >= 2.3, QGIS, rasterio and
rio-cogeo; ``--prob-compress deflate`` writes DEFLATE for older readers.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.windows import Window

from landcover.classes import ClassMapping
from landcover.diskerrors import (
    disk_bytes,
    free_bytes,
    human_bytes,
    output_failure,
)
from landcover.errors import DataError
from landcover.fileio import make_temp_beside
from landcover.inference.cogcheck import check_complete
from landcover.inference.encode import EncodedStrip
from landcover.inference.georef import ground_control
from landcover.inference.overviews import OverviewPyramid
from landcover.inference.pam import write_class_aux
from landcover.inference.writing import write_errors
from landcover.redaction import redact_tree
from landcover.threads import gdal_threads, usable_cores

CLASS_NODATA = 255
"""Class-map value where the input has no data."""

PROB_COMPRESSION = {
    "zstd": {"COMPRESS": "ZSTD", "LEVEL": "1", "PREDICTOR": "YES"},
    "deflate": {"COMPRESS": "DEFLATE", "PREDICTOR": "YES"},
}
"""COG creation options of the probability map, by ``--prob-compress`` choice."""

PROB_SCALE = 1 / 255
"""GDAL band scale of uint8 probability maps: probability = value x scale (offset 0)."""

CLASS_COMPRESSION = {"COMPRESS": "DEFLATE"}
"""COG creation options of the class map."""

SCRATCH_READ_OPTIONS = {"GTIFF_DIRECT_IO": "YES"}
"""GDAL options while a COG is made from the uncompressed scratch maps: their blocks are read
straight into GDAL's buffer, not through its block cache (the same bytes, a shorter serial
copy: ``benchmarks/publish_bench.py``)."""


def scratch_bytes(width: int, height: int, classes: int, prob_dtype: str | None) -> int:
    """Bytes a tile's uncompressed scratch maps take: classes, probabilities and overviews.

    Args:
        width: Tile width in pixels.
        height: Tile height in pixels.
        classes: Probability bands.
        prob_dtype: ``uint8`` or ``float32``; ``None``: no probability map.

    Returns:
        The bytes (the COGs made from them come on top, compressed).
    """
    pixels = width * height + width * height // 3  # the class map and its overviews
    if prob_dtype is None:
        return pixels
    probs = width * height * classes * np.dtype(prob_dtype).itemsize
    return pixels + probs + probs // 3


def class_colormap(mapping: ClassMapping) -> dict[int, tuple[int, int, int, int]]:
    """The colour table of a class map: each class's colour; no-data and unused values transparent.

    Args:
        mapping: The class mapping.

    Returns:
        A GDAL colour table ``{value: (r, g, b, a)}`` of all 256 values.
    """
    table = {value: (0, 0, 0, 0) for value in range(256)}
    table.update({i: (*spec.rgb, 255) for i, spec in enumerate(mapping.classes)})
    return table


def finish_strip(strip: EncodedStrip, probs: bool, label: str) -> None:
    """Makes a strip what every map stores: waits for its arrays, sets no-data in place.

    Where the input has no data the class is :data:`CLASS_NODATA` and the probabilities 0.

    Args:
        strip: The encoded strip (its arrays are modified in place).
        probs: Whether the maps hold probabilities (the strip must carry them).
        label: Names the maps in the error.

    Raises:
        ValueError: If the maps hold probabilities and the strip has none.
    """
    strip.wait()  # a GPU's copies to the host, queued behind its work
    if probs and strip.probs is None:
        raise ValueError(f"{label}: a strip without the probabilities this map holds")
    if not strip.valid.all():
        invalid = ~strip.valid
        strip.classes[invalid] = CLASS_NODATA
        if probs and strip.probs is not None:
            strip.probs[:, invalid] = 0


class MapWriter:
    """Writes the class map and the probability map of one tile, strip by strip.

    Args:
        src: The input image dataset (its grid is copied).
        mapping: The class mapping (names, colours).
        scratch: A scratch folder for the uncompressed intermediates.
        prob_dtype: ``uint8`` (probability x 255) or ``float32``; ``None``: the class map
            alone (``--no-probs``), and strips carry no probabilities.
        tags: Extra metadata written into the maps (redacted: :mod:`landcover.redaction`).
        label: Names the maps in error messages (default: the scratch folder).
    """

    def __init__(
        self,
        src: rasterio.io.DatasetReader,
        mapping: ClassMapping,
        scratch: Path,
        prob_dtype: str | None = "uint8",
        tags: dict[str, str] | None = None,
        label: str | None = None,
    ) -> None:
        self.mapping = mapping
        self.label = label or str(scratch)
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
            **redact_tree(tags or {}),  # a source path or option that names a credential
        }
        self.class_path = scratch / "class.tif"
        self.prob_path: Path | None = None if prob_dtype is None else scratch / "prob.tif"
        need = scratch_bytes(src.width, src.height, len(names), prob_dtype)
        free = free_bytes(scratch)
        if free is not None and free < need:
            disk = disk_bytes(scratch)
            if disk is not None and disk < need:  # this tile alone: the others may fit
                raise DataError(
                    f"{self.label}: its scratch maps need about {human_bytes(need)}, more "
                    f"than the whole disk of {scratch} ({human_bytes(disk)}): split the tile, "
                    "or put --out (or TMPDIR for a remote --out) on a larger disk"
                )
            raise output_failure(Path(self.label).parent, errno.ENOSPC, need)
        self.prob: rasterio.io.DatasetWriter | None = None
        self.pyramid: OverviewPyramid | None = None
        with write_errors(self.label):
            self.cls = rasterio.open(
                self.class_path, "w", **base, count=1, dtype="uint8", nodata=CLASS_NODATA
            )
            gcps = ground_control(src)
            if gcps is not None:  # georeferenced by GCPs alone: the maps keep them
                self.cls.gcps = gcps
            self.cls.write_colormap(1, class_colormap(mapping))
            self.cls.update_tags(**meta, **{f"CLASS_{i}": n for i, n in enumerate(names)})
            self.cls.set_band_description(1, "class")
            class_profile = {**base, "count": 1, "dtype": "uint8", "nodata": CLASS_NODATA}
            self.class_pyramid = OverviewPyramid(class_profile, scratch, "class", nearest=True)
            if self.prob_path is not None:
                prob_profile = {
                    **base,
                    "count": len(names),
                    "dtype": np.dtype(prob_dtype).name,
                    "photometric": "MINISBLACK",
                }
                self.prob = rasterio.open(self.prob_path, "w", **prob_profile)
                if gcps is not None:
                    self.prob.gcps = gcps
                stored_255 = np.dtype(prob_dtype) == np.uint8
                self.prob.update_tags(**meta, PROBABILITY_SCALE="255" if stored_255 else "1")
                if stored_255:  # GDAL's band scale: QGIS and rasterio read probabilities
                    self.prob.scales = (PROB_SCALE,) * len(names)
                    self.prob.offsets = (0.0,) * len(names)
                for i, name in enumerate(names, start=1):
                    self.prob.set_band_description(i, name)
                self.pyramid = OverviewPyramid(
                    prob_profile, scratch, "prob", threads=usable_cores()
                )
        self.histogram = np.zeros(256, dtype=np.int64)
        """Pixels written per class-map value (``CLASS_NODATA`` where the input has no data)."""

    def write(self, strip: EncodedStrip) -> None:
        """Writes a strip of rows, with no-data where the input has none, and counts its classes.

        Args:
            strip: The encoded strip (its arrays are modified in place).

        Raises:
            DataError: If GDAL cannot write (a full disk, say).
        """
        finish_strip(strip, self.prob is not None, self.label)
        self.histogram += np.bincount(strip.classes.ravel(), minlength=256)
        self.write_finished(strip)

    def write_finished(self, strip: EncodedStrip) -> None:
        """Writes a strip :func:`finish_strip` has finished (no-data set; not counted here).

        Args:
            strip: The finished strip.

        Raises:
            DataError: If GDAL cannot write (a full disk, say).
        """
        h, w = strip.valid.shape
        window = Window(0, strip.row, w, h)
        probs = strip.probs if self.prob is not None else None
        with write_errors(self.label):
            self.cls.write(strip.classes, 1, window=window)
            self.class_pyramid.add(strip.classes[None], strip.valid)
            if probs is not None and self.prob is not None and self.pyramid is not None:
                self.prob.write(probs, window=window)
                mask = np.where(strip.valid, 255, 0).astype(np.uint8)
                self.prob.write_mask(mask, window=window)
                self.pyramid.add(probs, strip.valid)

    def close(self) -> None:
        """Closes the scratch files (flushing them).

        Raises:
            DataError: If GDAL cannot flush the files.
        """
        with write_errors(self.label):
            self.cls.close()
            self.class_pyramid.close()
            if self.prob is not None:
                self.prob.close()
            if self.pyramid is not None:
                self.pyramid.close()

    def publish(self, class_dst: Path, prob_dst: Path | None, prob_compress: str = "zstd") -> None:
        """Converts the scratch files to COGs and renames them into place.

        Args:
            class_dst: Final path of the class map.
            prob_dst: Final path of the probability map (``None`` without one).
            prob_compress: ``zstd`` or ``deflate`` (see :data:`PROB_COMPRESSION`).

        Raises:
            DataError: If a map cannot be written.
        """
        with write_errors(self.label):  # the last rows of odd heights; copied as they are
            for pyramid in (self.class_pyramid, self.pyramid):
                if pyramid is not None:
                    pyramid.finish()
        self.close()
        with write_errors(self.label):  # VRTs: the maps with the overviews built while writing
            cls = self.class_pyramid.cog_source(self.class_path, CLASS_COMPRESSION)
            prob = None
            if self.prob_path is not None and self.pyramid is not None and prob_dst is not None:
                prob = self.pyramid.cog_source(self.prob_path, PROB_COMPRESSION[prob_compress])
        # in turn: in 2 threads, 7 % faster on 2 cores, but full-disk GDAL errors got mixed up
        publish_cog(cls[0], class_dst, "NEAREST", cls[1])
        with write_errors(str(class_dst), class_dst.parent):  # category names, alpha (pam.py)
            write_class_aux(class_dst, self.mapping, class_colormap(self.mapping))
        if prob is not None and prob_dst is not None:
            publish_cog(prob[0], prob_dst, "AVERAGE", prob[1])


def publish_cog(
    src: Path, dst: Path, resampling: str, options: dict[str, str] | None = None
) -> None:
    """Copies a GeoTIFF to a Cloud Optimized GeoTIFF at ``dst`` atomically.

    Args:
        src: The source GeoTIFF.
        dst: The destination; written under a temporary name in its folder, then renamed.
        resampling: Overview resampling (``NEAREST`` for classes, ``AVERAGE`` for probabilities).
        options: COG creation options: compression (default: DEFLATE), overviews.

    Raises:
        OutputError: If the folder is read-only, not writable or full.
        DataError: If GDAL cannot write the file otherwise.
    """
    tmp = make_temp_beside(dst)
    try:
        with write_errors(str(dst), dst.parent), rasterio.Env(**SCRATCH_READ_OPTIONS):
            rasterio.shutil.copy(
                src,
                tmp,
                driver="COG",
                **(options or CLASS_COMPRESSION),
                BLOCKSIZE="256",
                OVERVIEW_RESAMPLING=resampling,
                BIGTIFF="IF_SAFER",
                NUM_THREADS=gdal_threads(),  # every core (~1.7x on 2) unless GDAL_NUM_THREADS
            )
            check_complete(tmp)
            os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
