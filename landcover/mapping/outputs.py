"""A tile's outputs: their names, the fingerprint they carry, and whether they are complete.

A predict job is resumable because each map records what made it: a fingerprint of the model
(a sha256 of its weights, with the bands, normalisation and classes the checkpoint applies)
and of the options that change pixels (window, overlap, probability dtype, and test-time
augmentation and resolution where predict offers them), written into every map's metadata
(``LANDCOVER_FINGERPRINT``). A tile is complete, and skipped on a rerun, when every map
writer of the job (``--map-writer``, :mod:`landcover.inference.sinks`) finds its files of the
tile complete for the input's grid and this fingerprint. For the ``cog`` writer
(:mod:`landcover.inference.cogsink`) that is when

- its class and probability maps (the class map alone with ``--no-probs``) open, are Cloud
  Optimized GeoTIFFs as GDAL's COG driver writes them (``LAYOUT=COG`` as GDAL reports it,
  256 px blocks, internal overviews when larger than one block) whose last block can be read
  (a truncated copy cannot);
- they lie on exactly the input's grid (CRS, transform, size) with the right bands and data
  type;
- they carry this job's fingerprint; and
- the preview exists, when the job writes previews;

and, whatever the writers, the input is the one the maps were made from: its size and version
(a file's modification time, a blob's ETag) as ``{stem}_stats.json`` records them (maps whose
stats file does not record it, an older landcover's, are taken as they are).

The COG check reads headers and one block per map, so it costs milliseconds per tile (a few
range requests for blobs), against seconds to minutes for predicting it. ``{stem}_stats.json`` keeps
a tile's class counts, so a skipped tile's summary row needs no pass over its map (when it is
missing or stale the class map is counted again).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from landcover import storage
from landcover.inference.cogsink import CLASS, PREVIEW, PROBABILITIES, CogSink
from landcover.inference.mapwriters import map_writers
from landcover.inference.results import ClassCounts, Grid, MapFile
from landcover.inference.sinks import TileCheck, open_dataset
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


def output_paths(tile: str, options: Any) -> TileOutputs:
    """Where a tile's outputs go, as its map writers name them (``MapSink.expected``).

    Args:
        tile: The input image.
        options: The job's :class:`~landcover.inference.options.PredictOptions` (its output
            folder, path or URL, and its writers).

    Returns:
        The paths (URLs for a blob folder).
    """
    stem, out = output_stem(tile), str(options.out)
    files = [
        file.moved(storage.join(out, file.path))
        for writer in map_writers(options.writers)
        for file in writer.expected(stem, options)
    ]
    return tile_outputs(files, storage.join(out, f"{stem}_stats.json"))


def tile_outputs(files: list[MapFile], stats: str) -> TileOutputs:
    """A tile's outputs from its map writers' files (what they wrote, or what it should have).

    Args:
        files: Every writer's files (paths or URLs), the ``cog`` writer's among them.
        stats: ``{stem}_stats.json``.

    Returns:
        The outputs.
    """
    cog = {f.key: f.path for f in files if f.writer == CogSink.name}
    return TileOutputs(cog[CLASS], cog.get(PROBABILITIES), cog.get(PREVIEW), stats, tuple(files))


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
        model_sha256: sha256 of the model's weights as loaded: a checkpoint's weights, or an
            exported model's file (through its runner's state), so the two runtimes' maps
            have other digests.
        model: The preprocessing the checkpoint applies (bands, normalisation, classes).
        options: The pixel-changing prediction options, resolved.
        exported_from: An exported model's card's ``weights_sha256``: what the maps name as
            their weights (``MODEL_SHA256``, the STAC items); not in the digest, so jobs
            mapped before it was recorded stay complete.
    """

    model_sha256: str
    model: dict[str, Any]
    options: dict[str, Any]
    exported_from: str | None = None

    @property
    def digest(self) -> str:
        """A sha256 of the weights, preprocessing and options (hex, 32 characters)."""
        record = {"model_sha256": self.model_sha256, "model": self.model, "options": self.options}
        text = json.dumps(record, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def weights_sha256(self) -> str:
        """The weights the maps name: the checkpoint's, also for an export of it."""
        return self.exported_from or self.model_sha256

    def check(self, grid: Grid, num_classes: int, prob_dtype: str | None) -> TileCheck:
        """What a tile's files must match to be complete for this fingerprint.

        Args:
            grid: The input's grid.
            num_classes: Classes of the model.
            prob_dtype: The probabilities' data type.

        Returns:
            The check the map writers apply (``MapSink.problem``).
        """
        return TileCheck(grid, {FINGERPRINT_TAG: self.digest}, num_classes, prob_dtype)

    def tags(self) -> dict[str, str]:
        """The metadata tags written into the maps."""
        return {
            FINGERPRINT_TAG: self.digest,
            MODEL_TAG: self.weights_sha256,
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
    exported = getattr(im, "exported_from", None)
    return Fingerprint(weights_sha256(im.model), model, pixel_options, exported)


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


def incomplete_reason(outputs: TileOutputs, check: TileCheck, writers: Any) -> str | None:
    """Why a tile's outputs are not complete, or ``None`` when they are (see the module).

    Each map writer judges its own files (``MapSink.problem``).

    Args:
        outputs: Where its outputs are (:func:`output_paths`).
        check: What they must match: the input's grid, this job's fingerprint tags, the
            classes and the probabilities' data type.
        writers: The job's map writer names.

    Returns:
        ``None`` when complete, else a short reason (``class map: missing``, ...).
    """
    for writer in map_writers(writers):
        files = [f for f in outputs.files if f.writer == writer.name]
        problem = writer.problem(files, check)
        if problem:
            return problem if writer.name == CogSink.name else f"{writer.name}: {problem}"
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


def write_stats(
    url: str,
    tile: str,
    fingerprint: str,
    grid: Grid,
    counts: ClassCounts,
    input_version: str | None = None,
) -> None:
    """Writes ``{stem}_stats.json``: a tile's class counts, for the summary of later runs.

    Args:
        url: Where (path or URL).
        tile: The input image.
        fingerprint: The maps' fingerprint digest.
        grid: The maps' grid.
        counts: Pixels per class.
        input_version: The input's size and version the maps were made from
            (:attr:`~landcover.mapping.tiles.TileEntry.version`).
    """
    record = {
        "tile": tile,
        "input_version": input_version,
        "fingerprint": fingerprint,
        "grid": asdict(grid),
        "class_pixels": counts.pixels,
        "nodata_pixels": counts.nodata,
    }
    storage.write_text(url, json.dumps(record, indent=1))


@dataclass(frozen=True)
class StoredStats:
    """What a tile's ``{stem}_stats.json`` says of its maps (:func:`read_stats`).

    Attributes:
        counts: The class counts, when the file describes these maps (else ``None``: missing,
            unreadable or stale).
        input_version: The input version the maps were made from (:func:`write_stats`), or
            ``None`` when the file or the record is missing (maps of an older landcover).
    """

    counts: ClassCounts | None
    input_version: str | None


def read_stats(url: str, fingerprint: str, grid: Grid, num_classes: int) -> StoredStats:
    """Reads ``{stem}_stats.json`` once: its counts if they fit these maps, and their input.

    Args:
        url: The stats file (path or URL).
        fingerprint: The maps' fingerprint digest.
        grid: The maps' grid.
        num_classes: Classes of the model.

    Returns:
        What the file says (both ``None`` when it is missing or unreadable).
    """
    try:
        record = json.loads(storage.read_bytes(url))
    except (storage.StorageError, ValueError):
        return StoredStats(None, None)
    if not isinstance(record, dict):
        return StoredStats(None, None)
    version = record.get("input_version")
    version = version if isinstance(version, str) else None
    try:
        fits = (
            record["fingerprint"] == fingerprint
            and Grid(**{**record["grid"], "transform": tuple(record["grid"]["transform"])}) == grid
            and len(record["class_pixels"]) == num_classes
        )
        if fits:
            pixels = [int(n) for n in record["class_pixels"]]
            if sum(pixels) + int(record["nodata_pixels"]) == grid.width * grid.height:
                return StoredStats(ClassCounts(pixels, int(record["nodata_pixels"])), version)
    except (ValueError, KeyError, TypeError):
        pass
    return StoredStats(None, version)
