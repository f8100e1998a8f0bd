"""The map-writer seam: what a map output format implements, and how it is registered.

``landcover predict`` hands every finished strip of a tile to each map writer it was given
(``--map-writer cog,npy``; :class:`~landcover.inference.options.PredictOptions` ``writers``),
then asks each to publish its files and to say what it wrote. The region job
(:mod:`landcover.mapping`) asks the writers which files a complete tile has (to skip it on a
rerun) and lists what they wrote in its records and STAC items. A new output format is one
module: a :class:`MapSink` subclass under :func:`register_map_writer`.

A writer's life for one tile, in :class:`~landcover.inference.predict.TileMapper`:

1. ``MapSink(target)``: opened for the tile's grid (:class:`MapTarget`), in the device's
   thread; it may make files in ``target.scratch`` (its own folder, removed afterwards);
2. :meth:`MapSink.write` of each strip, in order, in the writer thread: the strip is finished
   (its arrays hold their values, no-data is set: class 255, probabilities 0); the arrays are
   the strip's own and are not written to again, but are shared by the writers: read, do not
   modify them;
3. :meth:`MapSink.publish` in the publisher thread: its files under their final names in
   ``target.out`` (a local folder; files for a remote ``--out`` are uploaded afterwards in
   the order returned), as :class:`~landcover.inference.results.MapFile` records; or
   :meth:`MapSink.close` after a failure.

Memory stays bounded only if a writer does not hold a tile's strips: write them out as they
come (a scratch file, a memory map).

The COG writer (``cog``, :mod:`landcover.inference.cogsink`) is the default, and the region
job needs it: the summary's class counts of a rerun, the VRT mosaics (a VRT needs GeoTIFF
sources) and the previews read its class map.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import rasterio

from landcover import storage
from landcover.classes import ClassMapping
from landcover.inference.encode import EncodedStrip
from landcover.inference.results import Grid, MapFile


@dataclass(frozen=True)
class MapTarget:
    """A tile a map writer writes: its grid, its settings and where its files go.

    Attributes:
        src: The open tile (or the grid it is predicted on): size, CRS, transform, GCPs.
        mapping: The classes (names, colours).
        prob_dtype: ``uint8`` or ``float32`` probabilities; ``None``: strips carry none.
        tags: Metadata every file should carry (the job's fingerprint among them).
        scratch: This writer's own scratch folder for the tile (removed after publishing).
        out: The local folder its files are published into.
        stem: The tile's output stem (``m_3807537_ne_18_060_20181104``).
        label: Names the tile's maps in error messages.
        local_tile: The input image as a local file.
        bands: Bands of the model's input.
        options: The :class:`~landcover.inference.options.PredictOptions`.
    """

    src: Any
    mapping: ClassMapping
    prob_dtype: str | None
    tags: dict[str, str]
    scratch: Path
    out: Path
    stem: str
    label: str
    local_tile: str
    bands: int
    options: Any = field(repr=False)


@dataclass(frozen=True)
class TileCheck:
    """What a previous run's files of a tile must match to count as complete.

    Attributes:
        grid: The input's grid (the maps lie on it).
        tags: Metadata the files must carry (the job's fingerprint: model and options).
        num_classes: Classes of the model (bands of a probability map).
        prob_dtype: The probabilities' data type (``None``: not checked).
    """

    grid: Grid
    tags: dict[str, str]
    num_classes: int
    prob_dtype: str | None = None


class MapSink:
    """A map output format: writes a tile's strips, publishes its files, checks old ones.

    Subclass it, implement the methods below, and register it with
    :func:`register_map_writer`; see the module for the order of the calls.

    Args:
        target: The tile and where its files go.
    """

    name: ClassVar[str] = ""
    """The registered name (``--map-writer``), set by :func:`register_map_writer`."""

    def __init__(self, target: MapTarget) -> None:
        self.target = target

    def write(self, strip: EncodedStrip) -> None:
        """Writes a finished strip (rows ``strip.row`` to ``strip.row + h``); read-only arrays."""
        raise NotImplementedError

    def close(self) -> None:
        """Closes what is open after a failure (the scratch folder is removed afterwards)."""

    def publish(self) -> list[MapFile]:
        """Closes the tile's files and puts them under their final names in ``target.out``.

        Returns:
            The files, in the order a remote output folder gets them (a sidecar before its
            map: a map that is there is complete).
        """
        raise NotImplementedError

    @classmethod
    def expected(cls, stem: str, options: Any) -> list[MapFile]:
        """The files a tile has once this writer has published it (names, no folder).

        Args:
            stem: The tile's output stem.
            options: The job's :class:`~landcover.inference.options.PredictOptions`.

        Returns:
            The files, as :meth:`publish` returns them.
        """
        raise NotImplementedError

    @classmethod
    def problem(cls, files: list[MapFile], check: TileCheck) -> str | None:
        """Why a previous run's files of a tile are not complete, or ``None`` when they are.

        Args:
            files: :meth:`expected`'s files, in the output folder (paths or URLs).
            check: What they must match.

        Returns:
            ``None``, or a short reason naming the file (``class map: missing``).
        """
        raise NotImplementedError


Sink = TypeVar("Sink", bound=type[MapSink])

REGISTERED: dict[str, type[MapSink]] = {}
"""Every registered map writer, by name (:mod:`landcover.inference.mapwriters` looks them up)."""


def register_map_writer(name: str) -> Callable[[Sink], Sink]:
    """Registers a map writer under a name (a class decorator).

    Args:
        name: Its ``--map-writer`` name: lower case letters, digits, ``-`` and ``_``.

    Returns:
        The decorator; it sets the class's :attr:`MapSink.name`.

    Raises:
        ValueError: If the name is not plain or another writer has it.
    """
    if not name or not all(c.isascii() and (c.isalnum() or c in "-_") for c in name):
        raise ValueError(f"map writer name {name!r}: use letters, digits, - and _")

    def register(cls: Sink) -> Sink:
        known = REGISTERED.get(name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise ValueError(f"map writer {name!r} is registered already ({known.__qualname__})")
        cls.name = name
        REGISTERED[name] = cls
        return cls

    return register


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


def local_file(url: str) -> str | None:
    """The local path of an output, or ``None`` for a blob URL."""
    return None if storage.is_remote(url) else storage.parse(url).path
