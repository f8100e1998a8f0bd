"""``landcover data check``: every problem of a data folder in one pass, and its class balance.

:func:`check_folder` opens every image/label pair of a folder and keeps going after a problem:
a file without its partner, a wrong band count or dtype, a label in another CRS or on another
grid, an unreadable or truncated file (every block is read), and label codes outside the class
mapping. A manifest CSV (``image,label[,split]``, as training reads it) is checked the same
way, pair by pair, with a file it lists but that does not exist reported as ``missing``.
Pixels where the image has no data (:func:`landcover.data.raster.nodata_mask`, the
policy training, predict and evaluate use) count as no-data in the class balance. It returns a
:class:`~landcover.data.checkreport.CheckReport`;
:func:`~landcover.data.checkreport.print_report` shows it as a table of tiles with their class
percentages, the totals, and the list of problems.

A label that lies on another grid or in another CRS but overlaps its image is a warning, not an
error: train and evaluate bring it onto the image grid (nearest neighbour, see
:mod:`landcover.data.align`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from rasterio.errors import RasterioError
from rasterio.windows import Window

from landcover import storage
from landcover.classes import IGNORE_INDEX, ClassMapping
from landcover.data.align import grids_match, label_on_image_grid, label_window, read_error
from landcover.data.bandview import band_count_problem, image_view
from landcover.data.checkreport import CheckReport, Problem, TileReport, print_report
from landcover.data.pairs import read_manifest
from landcover.data.raster import has_nodata, nodata_mask, open_raster
from landcover.errors import DataError

_CHUNK = 1024
"""Side of the image windows in which a label on another grid is aligned and counted."""


def _without_path(path: str, exc: DataError) -> str:
    """A DataError's message without its leading ``path: ``."""
    text = str(exc)
    return text[len(path) + 2 :] if text.startswith(f"{path}: ") else text


def _blocks(ds: Any) -> Iterator[Window]:
    """The dataset's block windows (band 1's blocks cover every band of a GeoTIFF)."""
    for _, window in ds.block_windows(1):
        yield window


def _image_windows(width: int, height: int) -> Iterator[Window]:
    for row in range(0, height, _CHUNK):
        for col in range(0, width, _CHUNK):
            yield Window(col, row, min(_CHUNK, width - col), min(_CHUNK, height - row))


def _read_every_block(ds: Any, path: str) -> Problem | None:
    """Reads every block of a raster; returns a ``corrupt`` problem at the first failure."""
    try:
        for window in _blocks(ds):
            ds.read(window=window)
    except RasterioError as exc:
        return Problem(path, "corrupt", f"corrupt or truncated GeoTIFF ({read_error(exc)})")
    return None


def _count_codes(ds: Any, path: str) -> tuple[np.ndarray | None, Problem | None]:
    """Counts the label codes of a one-band raster block by block."""
    counts = np.zeros(256, dtype=np.int64)
    try:
        for window in _blocks(ds):
            counts += np.bincount(ds.read(1, window=window).ravel(), minlength=256)[:256]
    except RasterioError as exc:
        return None, Problem(path, "corrupt", f"corrupt or truncated GeoTIFF ({read_error(exc)})")
    return counts, None


def _count_aligned(
    lab: Any, img: Any, label: str, image: str, masked: np.ndarray | None = None
) -> tuple[np.ndarray | None, Problem | None]:
    """Counts the label codes on the image grid, aligning window by window.

    With ``masked`` given, the codes under image no-data pixels are also counted into it.
    """
    counts = np.zeros(256, dtype=np.int64)
    try:
        for window in _image_windows(img.width, img.height):
            codes = label_on_image_grid(lab, img, window, label_name=label, image_name=image)
            counts += np.bincount(codes.ravel(), minlength=256)[:256]
            if masked is not None:
                hidden = codes[nodata_mask(img, window)]
                masked += np.bincount(hidden, minlength=256)[:256]
    except DataError as exc:
        return None, Problem(label, "corrupt", _without_path(label, exc))
    except RasterioError as exc:
        return None, Problem(image, "corrupt", f"corrupt or truncated GeoTIFF ({read_error(exc)})")
    return counts, None


def _grid_problem(img: Any, lab: Any, label: str, image: str) -> Problem | None:
    """Describes how a label's grid differs from its image's (None when they match)."""
    if grids_match(img, lab):
        return None
    if img.crs is None:
        return Problem(image, "crs", f"image has no CRS, so its label {label} cannot be aligned")
    if lab.crs is None:
        return Problem(label, "crs", f"label has no CRS, so it cannot be aligned with {image}")
    if label_window(lab, img) is None:
        return Problem(label, "grid", f"label raster does not overlap its image {image}")
    if lab.crs != img.crs:
        name = lab.crs.to_string() if lab.crs else "none"
        return Problem(
            label,
            "crs",
            f"label CRS {name} differs from the image's {img.crs.to_string()} ({image}); "
            "train/evaluate will reproject it onto the image grid (nearest neighbour)",
            fatal=False,
        )
    return Problem(
        label,
        "grid",
        f"label grid ({lab.width}x{lab.height}, origin {lab.transform.c:.2f},"
        f"{lab.transform.f:.2f}, pixel {lab.transform.a:g} m) differs from the image grid "
        f"({img.width}x{img.height}, origin {img.transform.c:.2f},{img.transform.f:.2f}, pixel "
        f"{img.transform.a:g} m) of {image}; train/evaluate will reproject it (nearest neighbour)",
        fatal=False,
    )


def _image_problems(img: Any, image: str, bands: int) -> list[Problem]:
    """What is wrong with an opened image file itself: band count, dtype, unreadable blocks."""
    problems = []
    band_problem = band_count_problem(img, bands)
    if band_problem is not None:
        problems.append(Problem(image, "bands", band_problem))
    if img.dtypes[0] != "uint8":
        problems.append(
            Problem(image, "dtype", f"has dtype {img.dtypes[0]}, expected uint8 imagery")
        )
    corrupt = _read_every_block(img, image)  # every band of the file, an alpha mask's too
    if corrupt:
        problems.append(corrupt)
    return problems


def _check_open_pair(
    img: Any, lab: Any, label: str, image: str, readable: bool, problems: list[Problem]
) -> tuple[np.ndarray | None, bool, np.ndarray | None]:
    """Checks an opened pair's label against its image, appending what is wrong to ``problems``.

    Args:
        img: The image as the model reads it (:func:`landcover.data.bandview.image_view`).
        lab: The label.
        label: The label's path.
        image: The image's path.
        readable: Whether every block of the image could be read.
        problems: Where problems go.

    Returns:
        The label-code counts on the image grid (None when they cannot be had), whether the
        label was reprojected to count them, and the codes' counts under image no-data pixels
        (None when the image has none).
    """
    label_ok = True
    if lab.count != 1:
        problems.append(Problem(label, "bands", f"label has {lab.count} bands, expected 1"))
        label_ok = False
    if lab.dtypes[0] != "uint8":
        problems.append(Problem(label, "dtype", f"label has dtype {lab.dtypes[0]}, expected uint8"))
        label_ok = False
    if not label_ok:
        return None, False, None
    # image no-data is counted only in a readable image (a corrupt one is reported apart)
    masked = np.zeros(256, dtype=np.int64) if readable and has_nodata(img) else None
    grid = _grid_problem(img, lab, label, image)
    if grid is None and masked is None:
        counts, corrupt = _count_codes(lab, label)
    elif grid is None or not grid.fatal:
        counts, corrupt = _count_aligned(lab, img, label, image, masked)
    else:
        corrupt = _read_every_block(lab, label)
        counts = None
    if grid is not None:
        problems.append(grid)
    if corrupt:
        problems.append(corrupt)
    if masked is not None and not masked.any():
        masked = None
    return counts, grid is not None, masked


def _check_pair(
    name: str, image: str, label: str, mapping: ClassMapping, bands: int
) -> tuple[TileReport | None, list[Problem]]:
    """Checks one pair; returns its statistics (when countable) and its problems."""
    problems: list[Problem] = []
    with ExitStack() as stack:
        opened = []
        for path in (image, label):
            try:
                opened.append(stack.enter_context(open_raster(path)))
            except DataError as exc:
                problems.append(Problem(path, "corrupt", _without_path(path, exc)))
        if problems:
            return None, problems
        img, lab = opened
        image_problems = _image_problems(img, image, bands)
        problems.extend(image_problems)
        kinds = {problem.kind for problem in image_problems}
        if "bands" not in kinds:
            img = stack.enter_context(image_view(img, bands))
        readable = "corrupt" not in kinds
        counts, aligned, masked = _check_open_pair(img, lab, label, image, readable, problems)
        if counts is None:
            return None, problems
        tile = TileReport(name, img.width, img.height, counts, aligned=aligned, masked=masked)
    present = [int(c) for c in np.flatnonzero(counts)]
    unknown = [c for c in present if c not in mapping.known_codes]
    if unknown:
        problems.append(Problem(label, "codes", mapping.unknown_codes_message(unknown)))
    elif masked is not None and masked.sum() == counts.sum():
        problems.append(
            Problem(image, "nodata", "no valid image pixel (the image is all no-data)", fatal=False)
        )
    elif not any(
        mapping.lookup_table()[c] != IGNORE_INDEX
        for c in np.flatnonzero(counts if masked is None else counts - masked)
    ):
        problems.append(Problem(label, "nodata", "no labelled pixel (all no-data)", fatal=False))
    return tile, problems


def check_folder(
    root: str | Path,
    mapping: ClassMapping,
    bands: int = 4,
    image_suffix: str = "_naip.tif",
    label_suffix: str = "_lc.tif",
) -> CheckReport:
    """Checks every image/label pair in a folder or manifest, without stopping at the first problem.

    Args:
        root: The data folder (a path or a blob URL) of ``{name}{image_suffix}`` /
            ``{name}{label_suffix}`` pairs, or a manifest CSV (``.csv``) listing the pairs
            (see :func:`landcover.data.pairs.read_manifest`).
        mapping: The class mapping label codes must belong to.
        bands: Expected number of image bands.
        image_suffix: File-name suffix of the imagery.
        label_suffix: File-name suffix of the labels.

    Returns:
        The report: per-tile statistics and every problem (files missing or without a
        partner, wrong band count or dtype, CRS or grid differences, unreadable blocks, unknown
        label codes).

    Raises:
        DataError: If the folder or manifest does not exist, the manifest is malformed, or
            the folder holds no image or label file at all.
        StorageError: If listing a remote folder fails.
    """
    root = str(root)
    if root.lower().endswith(".csv"):
        return _check_manifest(root, mapping, bands)
    if storage.is_file(root):
        raise DataError(
            f"{root}: not a data folder or a manifest CSV (a .csv with columns image,label)"
        )
    if not storage.exists(root):
        raise DataError(f"{root}: data folder not found")
    entries = {storage.name(url): url for url in storage.listdir(root)}
    images = {n[: -len(image_suffix)]: u for n, u in entries.items() if n.endswith(image_suffix)}
    labels = {n[: -len(label_suffix)]: u for n, u in entries.items() if n.endswith(label_suffix)}
    if not images and not labels:
        raise DataError(
            f"{root}: no tile pairs found (expected *{image_suffix} with matching *{label_suffix})"
        )
    report = CheckReport(root, mapping)
    for name in sorted(set(images) - set(labels)):
        report.problems.append(
            Problem(str(images[name]), "partner", f"no label file {name}{label_suffix} beside it")
        )
    for name in sorted(set(labels) - set(images)):
        report.problems.append(
            Problem(str(labels[name]), "partner", f"no image file {name}{image_suffix} beside it")
        )
    for name in sorted(set(images) & set(labels)):
        report.pairs += 1
        tile, problems = _check_pair(name, str(images[name]), str(labels[name]), mapping, bands)
        if tile is not None:
            report.tiles.append(tile)
        report.problems.extend(problems)
    return report


def _check_manifest(manifest: str, mapping: ClassMapping, bands: int) -> CheckReport:
    """Checks every pair a manifest CSV lists (any split); see :func:`check_folder`."""
    report = CheckReport(manifest, mapping)
    for pair, _ in read_manifest(manifest):
        report.pairs += 1  # every listed pair, counted or not
        missing = [path for path in (pair.image, pair.label) if not storage.is_file(path)]
        for path in missing:
            report.problems.append(Problem(path, "missing", f"listed in {manifest}, not found"))
        if missing:
            continue
        tile, problems = _check_pair(pair.name, pair.image, pair.label, mapping, bands)
        if tile is not None:
            report.tiles.append(tile)
        report.problems.extend(problems)
    return report


def run_check(
    root: str | Path,
    mapping: ClassMapping,
    bands: int = 4,
    image_suffix: str = "_naip.tif",
    label_suffix: str = "_lc.tif",
) -> CheckReport:
    """Runs ``landcover data check``: checks a folder or manifest and prints the report.

    Args:
        root: The data folder or manifest CSV.
        mapping: The class mapping.
        bands: Expected number of image bands.
        image_suffix: File-name suffix of the imagery.
        label_suffix: File-name suffix of the labels.

    Returns:
        The report, when no problem is fatal.

    Raises:
        DataError: After printing, if any file has a fatal problem.
    """
    report = check_folder(root, mapping, bands, image_suffix, label_suffix)
    print_report(report)
    if not report.ok:
        raise DataError(
            f"{root}: {len(report.bad_files)} bad file(s) of {report.pairs} pair(s) (listed above)"
        )
    return report
