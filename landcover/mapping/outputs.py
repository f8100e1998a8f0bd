"""A tile's outputs: their names, the fingerprint they carry, and whether they are complete.

A predict job is resumable because each map records what made it: a fingerprint of the model
(a sha256 of its weights, with the bands, normalisation and classes the checkpoint applies)
and of the options that change pixels (window, overlap, probability dtype, and test-time
augmentation and resolution where predict offers them), written into every map's metadata
(``LANDCOVER_FINGERPRINT``). A tile is complete, and skipped on a rerun, when

- its class and probability maps (the class map alone with ``--no-probs``) open, are Cloud
  Optimized GeoTIFFs as GDAL's COG driver writes them (``LAYOUT=COG`` as GDAL reports it,
  256 px blocks, internal overviews when larger than one block) whose last block can be read
  (a truncated copy cannot);
- they lie on exactly the input's grid (CRS, transform, size) with the right bands and data
  type;
- they carry this job's fingerprint; and
- the preview exists, when the job writes previews.

The check reads headers and one block per map, so it costs milliseconds per tile (a few range
requests for blobs), against seconds to minutes for predicting it. ``{stem}_stats.json`` keeps
a tile's class counts, so a skipped tile's summary row needs no pass over its map (when it is
missing or stale the class map is counted again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import rasterio
import torch

from landcover import storage
from landcover.errors import first_line
from landcover.inference.results import ClassCounts, Grid
from landcover.mapping.acquired import DATE_TAGS, Acquired, from_name, from_tags
from landcover.mapping.records import TileOutputs
from landcover.mapping.tiles import output_stem

log = logging.getLogger("landcover")

FINGERPRINT_TAG = "LANDCOVER_FINGERPRINT"
MODEL_TAG = "MODEL_SHA256"
OPTIONS_TAG = "PREDICT_OPTIONS"
PIXEL_OPTIONS = ("window", "overlap", "prob_dtype", "tta", "resolution")
"""The :class:`~landcover.inference.predict.PredictOptions` fields that change the maps'
pixels (those predict has); a new option that changes pixels belongs here."""
COG_BLOCK = 256
"""Block size of the maps (``writers.publish_cog``): larger maps have overviews."""


def output_paths(tile: str, out: str, preview: bool, probs: bool = True) -> TileOutputs:
    """Where a tile's outputs go.

    Args:
        tile: The input image.
        out: The output folder (path or URL).
        preview: Whether the job writes previews.
        probs: Whether the job writes probability maps.

    Returns:
        The paths (URLs for a blob folder).
    """
    stem = output_stem(tile)
    return TileOutputs(
        class_map=storage.join(out, f"{stem}_class.tif"),
        prob_map=storage.join(out, f"{stem}_prob.tif") if probs else None,
        preview=storage.join(out, f"{stem}_preview.png") if preview else None,
        stats=storage.join(out, f"{stem}_stats.json"),
    )


def weights_sha256(model: torch.nn.Module) -> str:
    """A sha256 of a model's weights: every state-dict entry's name, dtype, shape and bytes.

    Args:
        model: The model (on any device, in any memory format).

    Returns:
        The hex digest.
    """
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}|{t.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Fingerprint:
    """What makes a tile's maps what they are.

    Attributes:
        model_sha256: sha256 of the model's weights.
        model: The preprocessing the checkpoint applies (bands, normalisation, classes).
        options: The pixel-changing prediction options, resolved.
    """

    model_sha256: str
    model: dict[str, Any]
    options: dict[str, Any]

    @property
    def digest(self) -> str:
        """A sha256 of all of it (hex, 32 characters)."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def tags(self) -> dict[str, str]:
        """The metadata tags written into the maps."""
        return {
            FINGERPRINT_TAG: self.digest,
            MODEL_TAG: self.model_sha256,
            OPTIONS_TAG: json.dumps(self.options, sort_keys=True),
        }


def make_fingerprint(im: Any, options: Any) -> Fingerprint:
    """The fingerprint of a loaded model and a job's options.

    Args:
        im: The :class:`~landcover.inference.loader.InferenceModel`.
        options: The job's :class:`~landcover.inference.predict.PredictOptions`.

    Returns:
        The fingerprint.
    """
    from landcover.inference.resolution import resolve_resolution
    from landcover.inference.sliding import resolve_geometry

    data = im.config.data
    window, overlap, _ = resolve_geometry(data.patch_size, options.window, options.overlap)
    resolved: dict[str, Any] = {"window": window, "overlap": overlap}
    if hasattr(options, "resolution"):  # train: the checkpoint's metres (or native)
        resolved["resolution"] = resolve_resolution(
            options.resolution, getattr(im, "pixel_size_m", None), im.checkpoint, quiet=True
        ).fingerprint
    pixel_options = {
        name: resolved.get(name, getattr(options, name))
        for name in PIXEL_OPTIONS
        if hasattr(options, name)
    }
    model = {
        "bands": list(data.bands),
        "mean": list(data.mean),
        "std": list(data.std),
        "classes": data.classes.names,
    }
    return Fingerprint(weights_sha256(im.model), model, pixel_options)


@contextmanager
def open_dataset(url: str) -> Iterator[rasterio.io.DatasetReader]:
    """Opens a raster's header, locally or on blob storage (range reads, no download).

    Args:
        url: A path or URL.

    Yields:
        The open dataset.

    Raises:
        RasterioError, OSError, StorageError: If it cannot be opened.
    """
    if storage.is_remote(url):
        fs, path = storage.filesystem(url)
        with rasterio.open(path, opener=fs.open) as ds:
            yield ds
    else:
        with rasterio.open(storage.parse(url).path) as ds:
            yield ds


def _map_problem(
    ds: rasterio.io.DatasetReader, grid: Grid, bands: int, fingerprint: str, dtype: str | None
) -> str | None:
    """Why an open map is not a complete output for this grid and fingerprint, if it is not.

    Everything is read from the file as GDAL reports it: the layout (``LAYOUT=COG``), the
    block shapes, the overviews, the grid, bands and data type. (rasterio's
    ``profile['tiled']`` is no guide: it is ``False`` for a tiled map exactly one block wide.)
    """
    if ds.driver != "GTiff" or ds.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") != "COG":
        return "not a Cloud Optimized GeoTIFF"
    if any(shape != (COG_BLOCK, COG_BLOCK) for shape in ds.block_shapes):
        return f"not in {COG_BLOCK} x {COG_BLOCK} px blocks"
    if max(ds.width, ds.height) > COG_BLOCK and not ds.overviews(1):
        return "has no overviews"
    if Grid.of(ds) != grid:
        return "not on the input's grid"
    if ds.count != bands:
        return f"has {ds.count} bands, not {bands}"
    if dtype is not None and any(d != dtype for d in ds.dtypes):
        return f"is {ds.dtypes[0]}, not {dtype}"
    if ds.tags().get(FINGERPRINT_TAG) != fingerprint:
        return "made by another model or with other options"
    height, width = ds.block_shapes[0]
    row = (ds.height - 1) // height * height
    col = (ds.width - 1) // width * width
    window = rasterio.windows.Window(col, row, ds.width - col, ds.height - row)
    ds.read(1, window=window)  # the last block: a truncated file fails here
    return None


def acquisition(tile: str) -> Acquired | None:
    """When a tile's imagery was acquired: from its NAIP name, else its tags (:mod:`.acquired`).

    Args:
        tile: The input image (path or URL).

    Returns:
        The time, or ``None`` when unknown (or the file cannot be read).
    """
    found = from_name(tile)
    if found is not None:
        return found
    try:
        with open_dataset(tile) as ds:
            tags = {domain: ds.tags(ns=domain or None) for domain in {d for d, _ in DATE_TAGS}}
    except Exception:  # unreadable: its prediction says why; the date is unknown
        return None
    return from_tags(tags)


def read_grid(tile: str) -> Grid:
    """The grid of an input image (its header only).

    Raises:
        RasterioError, OSError, StorageError: If it cannot be opened.
    """
    with open_dataset(tile) as ds:
        return Grid.of(ds)


def incomplete_reason(
    grid: Grid,
    outputs: TileOutputs,
    fingerprint: str,
    num_classes: int,
    prob_dtype: str | None = None,
) -> str | None:
    """Why a tile's outputs are not complete, or ``None`` when they are (see the module).

    Args:
        grid: The input's grid.
        outputs: Where its outputs are.
        fingerprint: This job's fingerprint digest.
        num_classes: Bands of the probability map.
        prob_dtype: Data type of the probability map (``None``: not checked).

    Returns:
        ``None`` when complete, else a short reason (``class map: missing``, ...).
    """
    for what, url, bands, dtype in (
        ("class map", outputs.class_map, 1, "uint8"),
        ("probability map", outputs.prob_map, num_classes, prob_dtype),
    ):
        if url is None:  # --no-probs
            continue
        if not storage.is_remote(url) and not os.path.isfile(storage.parse(url).path):
            return f"{what}: missing"
        try:
            with open_dataset(url) as ds:
                problem = _map_problem(ds, grid, bands, fingerprint, dtype)
        except FileNotFoundError:
            problem = "missing"
        except Exception as exc:  # any failure to open or read means: not complete
            problem = f"unreadable ({first_line(exc, 200)})"
        if problem:
            return f"{what}: {problem}"
    if outputs.preview is not None and not storage.is_file(outputs.preview):
        return "preview: missing"
    return None


def count_classes(class_map: str, num_classes: int) -> ClassCounts:
    """Pixels per class of a class map, block by block (bounded memory).

    Args:
        class_map: The map (path or URL).
        num_classes: Classes of the model.

    Returns:
        The counts (no-data pixels apart).
    """
    from landcover.inference.writers import CLASS_NODATA

    histogram = np.zeros(256, dtype=np.int64)
    with open_dataset(class_map) as ds:
        for _, window in ds.block_windows(1):
            histogram += np.bincount(ds.read(1, window=window).ravel(), minlength=256)
    return ClassCounts([int(n) for n in histogram[:num_classes]], int(histogram[CLASS_NODATA]))


def write_stats(url: str, tile: str, fingerprint: str, grid: Grid, counts: ClassCounts) -> None:
    """Writes ``{stem}_stats.json``: a tile's class counts, for the summary of later runs.

    Args:
        url: Where (path or URL).
        tile: The input image.
        fingerprint: The maps' fingerprint digest.
        grid: The maps' grid.
        counts: Pixels per class.
    """
    record = {
        "tile": tile,
        "fingerprint": fingerprint,
        "grid": asdict(grid),
        "class_pixels": counts.pixels,
        "nodata_pixels": counts.nodata,
    }
    storage.write_text(url, json.dumps(record, indent=1))


def read_stats(url: str, fingerprint: str, grid: Grid, num_classes: int) -> ClassCounts | None:
    """The class counts in ``{stem}_stats.json``, if it is there and describes these maps.

    Args:
        url: The stats file (path or URL).
        fingerprint: The maps' fingerprint digest.
        grid: The maps' grid.
        num_classes: Classes of the model.

    Returns:
        The counts, or ``None`` when the file is missing, unreadable or stale.
    """
    try:
        record = json.loads(storage.read_bytes(url))
        fits = (
            record["fingerprint"] == fingerprint
            and Grid(**{**record["grid"], "transform": tuple(record["grid"]["transform"])}) == grid
            and len(record["class_pixels"]) == num_classes
        )
        if fits:
            pixels = [int(n) for n in record["class_pixels"]]
            if sum(pixels) + int(record["nodata_pixels"]) == grid.width * grid.height:
                return ClassCounts(pixels, int(record["nodata_pixels"]))
    except (storage.StorageError, ValueError, KeyError, TypeError):
        pass
    return None
