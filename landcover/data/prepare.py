"""``landcover data prepare``: cut large NAIP rasters into training tiles with aligned labels.

Each image is cut into windows of ``tile_size`` pixels (edge tiles may be smaller). For each
window, the label rasters that overlap it are brought onto the window's exact grid with
:func:`~landcover.data.align.label_on_image_grid` (nearest neighbour; labels in another CRS such
as the Bay-wide Albers files are reprojected); where several overlap, each fills the pixels the
ones before it left without a class. Tiles whose labelled fraction is below ``min_valid`` are
dropped; the others are written as ``{name}_naip.tif`` / ``{name}_lc.tif`` pairs with a
``manifest.csv``. Everything is read window by window, so memory stays bounded by the tile size.
"""

from __future__ import annotations

import csv
import glob
import io
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rasterio.errors import RasterioError
from rasterio.windows import Window

from landcover import storage
from landcover.classes import IGNORE_INDEX, ClassMapping
from landcover.data.align import (
    LABEL_NODATA,
    label_nodata,
    label_on_image_grid,
    label_window,
    read_error,
)
from landcover.data.bandview import band_count_problem, image_view
from landcover.data.raster import has_dataset_mask, has_nodata, nodata_mask, open_raster
from landcover.data.staging import staged_folder
from landcover.data.tilefiles import tile_profile, tile_windows, write_tile
from landcover.errors import DataError
from landcover.fileio import atomic_write_text, remove_stale_temporaries


@dataclass
class PrepareSummary:
    """What :func:`prepare_tiles` did.

    Attributes:
        out: The output folder.
        written: ``(image, label)`` paths of the pairs written.
        dropped: Names of the tiles dropped for too few labelled pixels.
        manifest: The manifest CSV.
    """

    out: Path
    written: list[tuple[Path, Path]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    manifest: Path | None = None

    def line(self, min_valid: float) -> str:
        """A one-line summary.

        Args:
            min_valid: The threshold used, for the message.

        Returns:
            The summary.
        """
        total = len(self.written) + len(self.dropped)
        return (
            f"wrote {len(self.written)} tile pairs to {self.out}; dropped {len(self.dropped)} "
            f"of {total} tiles with under {min_valid:.0%} labelled pixels; "
            f"manifest {self.manifest}"
        )


def expand_paths(values: Sequence[str], what: str) -> list[str]:
    """Expands glob patterns among file arguments, keeping plain paths as given.

    Args:
        values: Paths, URLs or glob patterns (``*``, ``?``, ``[``; ``**`` spans folders).
        what: What the files are, for the message.

    Returns:
        The paths, patterns replaced by their sorted matches.

    Raises:
        DataError: If a pattern matches no file.
    """
    paths: list[str] = []
    for value in values:
        if glob.has_magic(value):
            matches = storage.glob(value)  # sorted; ** recursive, as for blob URLs
            if not matches:
                raise DataError(f"{value}: no {what} matches this pattern")
            paths.extend(matches)
        else:
            paths.append(value)
    return paths


@dataclass
class _Raster:
    """An open raster and the path or URL it came from (for messages)."""

    path: str
    ds: Any


def _check_label(path: str, ds: Any) -> None:
    if ds.count != 1 or ds.dtypes[0] != "uint8":
        raise DataError(
            f"{path}: label raster must have 1 uint8 band, has {ds.count} {ds.dtypes[0]}"
        )
    if ds.crs is None:
        raise DataError(f"{path}: label raster has no CRS, so it cannot be aligned with imagery")


def _check_image(path: str, ds: Any, bands: int | None) -> None:
    problem = None if bands is None else band_count_problem(ds, bands, "expected")
    if problem is not None:
        raise DataError(
            f"{path}: {problem} (--bands; data.bands of the config that will train on the tiles)"
        )
    if ds.dtypes[0] != "uint8":
        raise DataError(f"{path}: has dtype {ds.dtypes[0]}, expected uint8 imagery")
    if ds.crs is None:
        raise DataError(f"{path}: image has no CRS, so labels cannot be aligned with it")


def _tile_labels(
    labels: list[_Raster],
    img: _Raster,
    window: Window,
    table: np.ndarray,
    mapping: ClassMapping,
) -> np.ndarray:
    """The label codes of one tile, filled from each overlapping label raster in turn."""
    codes = np.full((int(window.height), int(window.width)), LABEL_NODATA, dtype=np.uint8)
    for lab in labels:
        if label_window(lab.ds, img.ds, window) is None:
            continue
        part = label_on_image_grid(lab.ds, img.ds, window, label_name=lab.path, image_name=img.path)
        nodata = label_nodata(lab.ds)
        unknown = [code for code in mapping.unknown_codes(part) if code != nodata]
        if unknown:
            raise DataError(f"{lab.path}: {mapping.unknown_codes_message(unknown)}")
        part[part == nodata] = LABEL_NODATA
        fill = (table[codes] == IGNORE_INDEX) & (table[part] != IGNORE_INDEX)
        codes[fill] = part[fill]
        if not (table[codes] == IGNORE_INDEX).any():
            break
    codes[table[codes] == IGNORE_INDEX] = LABEL_NODATA
    return codes


def _open_labels(stack: ExitStack, labels: Sequence[str]) -> list[_Raster]:
    """Opens and checks every label raster; they stay open in ``stack``."""
    opened = []
    for path in labels:
        ds = stack.enter_context(open_raster(path))
        _check_label(path, ds)
        opened.append(_Raster(path, ds))
    return opened


def _check_images(images: Sequence[str], labels: list[_Raster], bands: int | None) -> None:
    """Checks every image (one open at a time) before anything is written."""
    stems: dict[str, str] = {}
    for path in images:
        stem = _stem(path)
        if stem in stems:
            raise DataError(f"{path}: same file name as {stems[stem]}; tile names would collide")
        stems[stem] = path
        with open_raster(path) as ds:
            _check_image(path, ds, bands)
            if not any(label_window(lab.ds, ds) is not None for lab in labels):
                raise DataError(f"{path}: none of the {len(labels)} label raster(s) overlaps it")


def _stem(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]


def prepare_tiles(
    images: Sequence[str],
    labels: Sequence[str],
    out: str | Path,
    mapping: ClassMapping,
    tile_size: int = 2048,
    min_valid: float = 0.5,
    echo: Callable[[str], None] | None = None,
    bands: int | None = None,
    overwrite: bool = False,
) -> PrepareSummary:
    """Cuts images into tiles with labels on each tile's exact grid, and writes a manifest.

    Args:
        images: Image GeoTIFFs (uint8, any number of bands, georeferenced) or glob patterns.
        labels: Label rasters (one uint8 band of Chesapeake codes, any CRS and grid) or glob
            patterns.
        out: Output folder (created if missing). It is whole or refused by every reader:
            a new or empty folder is written beside it and renamed onto it at the end; into
            a folder holding files the tiles are moved from a hidden scratch folder inside it
            (:mod:`landcover.data.staging`).
        mapping: Class mapping; a pixel is labelled when its code maps to a class.
        tile_size: Tile side in pixels; edge tiles are smaller.
        min_valid: Tiles with a smaller fraction of labelled pixels (also excluding image
            no-data) are dropped.
        echo: Called with a progress line after each image.
        bands: Bands every image must have (None: any count); one more, tagged alpha, is
            the image's mask, which its tiles keep as their internal mask.
        overwrite: Replace the tile pairs and manifest of a finished earlier prepare in
            ``out`` (refused otherwise), once the new set is whole.

    Returns:
        What was written and dropped.

    Raises:
        DataError: If an input is missing, unreadable or not georeferenced, an image has
            other than ``bands`` bands, an image overlaps
            no label raster, two images share a file name, or a label holds codes outside
            the mapping, or ``out`` holds an earlier prepare's pairs and ``overwrite`` is off.
    """
    if tile_size < 16:
        raise DataError(f"data prepare: --tile-size must be at least 16, not {tile_size}")
    if not 0.0 <= min_valid <= 1.0:
        raise DataError(f"data prepare: --min-valid must be within 0..1, not {min_valid}")
    images = expand_paths(images, "image")
    labels = expand_paths(labels, "label raster")
    if not images:
        raise DataError("data prepare: no image given (--images)")
    if not labels:
        raise DataError("data prepare: no label raster given (--labels)")
    out = Path(out)
    table = mapping.lookup_table()
    remove_stale_temporaries(out)  # a killed run's half-written tiles
    with ExitStack() as stack:
        opened_labels = _open_labels(stack, labels)
        _check_images(images, opened_labels, bands)
        folder = stack.enter_context(staged_folder(out, overwrite))  # whole, or refused
        summary = _prepare_all(
            images, opened_labels, folder, table, mapping, tile_size, min_valid, echo, bands
        )
    summary.out = out
    summary.written = [(out / image.name, out / label.name) for image, label in summary.written]
    summary.manifest = out / "manifest.csv"
    return summary


def _prepare_all(
    images: Sequence[str],
    opened_labels: list[_Raster],
    out: Path,
    table: np.ndarray,
    mapping: ClassMapping,
    tile_size: int,
    min_valid: float,
    echo: Callable[[str], None] | None,
    bands: int | None,
) -> PrepareSummary:
    """Writes every image's tile pairs and the manifest into ``out`` (see prepare_tiles)."""
    summary = PrepareSummary(out)
    for path in images:
        start = time.perf_counter()
        before = (len(summary.written), len(summary.dropped))
        with (  # an extra alpha band is the mask: the tiles get an internal mask
            open_raster(path) as file,
            image_view(file, bands) as ds,
        ):
            img = _Raster(path, ds)
            _prepare_image(img, opened_labels, out, table, mapping, tile_size, min_valid, summary)
        if echo is not None:
            echo(
                f"{path}: {len(summary.written) - before[0]} tiles written, "
                f"{len(summary.dropped) - before[1]} dropped "
                f"({time.perf_counter() - start:.1f} s)"
            )
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["image", "label", "split"])
    for image_path, label_path in summary.written:
        writer.writerow([image_path.name, label_path.name, ""])
    summary.manifest = out / "manifest.csv"
    atomic_write_text(summary.manifest, buffer.getvalue())
    return summary


def _prepare_image(
    img: _Raster,
    labels: list[_Raster],
    out: Path,
    table: np.ndarray,
    mapping: ClassMapping,
    tile_size: int,
    min_valid: float,
    summary: PrepareSummary,
) -> None:
    """Cuts one image into tiles and writes the pairs with enough labelled pixels."""
    ds = img.ds
    stem = _stem(img.path)
    overlapping = [lab for lab in labels if label_window(lab.ds, ds) is not None]
    for r, c, window in tile_windows(ds.width, ds.height, tile_size):
        name = f"{stem}_r{r:03d}_c{c:03d}"
        codes = _tile_labels(overlapping, img, window, table, mapping)
        valid = table[codes] != IGNORE_INDEX
        if valid.mean() < min_valid:
            summary.dropped.append(name)
            continue
        try:
            pixels = ds.read(window=window)
            nodata = None
            if has_nodata(ds):
                nodata = nodata_mask(ds, window, pixels=np.moveaxis(pixels, 0, -1))
        except RasterioError as exc:
            raise DataError(
                f"{img.path}: corrupt or truncated GeoTIFF ({read_error(exc)})"
            ) from None
        if nodata is not None:
            valid &= ~nodata
            if valid.mean() < min_valid:
                summary.dropped.append(name)
                continue
        # a per-dataset mask travels with the tile (as its internal mask), a nodata value too
        mask = nodata if nodata is not None and nodata.any() and has_dataset_mask(ds) else None
        image_path = out / f"{name}_naip.tif"
        label_path = out / f"{name}_lc.tif"
        image_profile = tile_profile(ds, window, ds.count, ds.nodata)
        if ds.count >= 3:
            image_profile["photometric"] = "RGB"
        write_tile(image_path, pixels, image_profile, src=ds, nodata=mask)
        write_tile(label_path, codes[None], tile_profile(ds, window, 1, LABEL_NODATA))
        summary.written.append((image_path, label_path))
