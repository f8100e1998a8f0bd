"""The tiles of a predict job: from paths, globs, folders, list files and manifests.

Every argument of ``landcover predict`` is one of

- a file (path or blob URL);
- a glob (``"tiles/*.tif"``, ``"az://naip/md/**/*.tif"``; ``**`` spans folders), unless a
  file of that very name exists (``tile[1].tif``); the partners of the images it matches
  (``x_lc.tif`` beside ``x_naip.tif``) are left out, as in a folder;
- a folder or blob prefix: every image in it and below; when some file names end with the
  checkpoint's image suffix (``_naip.tif``), only those (so a folder of training pairs gives
  its images, not its labels), otherwise every ``*.tif``/``*.tiff``; the GeoTIFFs such a
  folder leaves out (other than the images' partners, ``x_lc.tif`` beside ``x_naip.tif``) are
  named in a warning;
- a list file (``@tiles.txt``, or any ``.txt``): one path or URL per line, ``#`` comments;
- a manifest CSV (``.csv``) with an ``image`` column, as ``landcover train`` reads.

Relative paths in a list file or manifest are relative to its folder. Maps landcover wrote
(``*_class.tif``, ``*_prob.tif``) are never taken from globs or folders.

:func:`measure_tiles` then reads each local tile's header (its pixel count, and its bands
against the model's) or each blob's size, and orders the job largest first. A tile a catalogue
search found (``--stac``) carries its STAC item's date from here to the worker that maps it
(:mod:`.acquired`).
"""

from __future__ import annotations

import glob as globlib
import logging
import os
import posixpath
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from landcover import storage
from landcover.data.pairs import entry_folder, manifest_rows, read_text, resolve_entry
from landcover.data.raster import open_raster
from landcover.errors import DataError, LandcoverError
from landcover.mapping.acquired import Acquired
from landcover.storage.urls import protocol

log = logging.getLogger("landcover")

IMAGE_SUFFIXES = (".tif", ".tiff")
OUTPUT_SUFFIXES = ("_class.tif", "_prob.tif")
"""Names of the maps landcover writes: never inputs found by a glob or in a folder."""


@dataclass(frozen=True)
class TileEntry:
    """A tile of the job, measured.

    Attributes:
        path: Path or URL.
        cost: Its size, the key of the largest-first order: pixels (local files, from the
            header) or bytes (blobs, from the listing).
        error: Why it cannot be predicted (unreadable, wrong bands, missing), if so.
        acquired: When its imagery was acquired, as the STAC item a search found it in says
            (``None``: not found by a search; the worker reads its name or tags).
        version: The input as the job found it: its size and version (a file's modification
            time, a blob's ETag); its maps are made again when this changes (``None``: not
            known).
    """

    path: str
    cost: int
    error: str | None = None
    acquired: Acquired | None = None
    version: str | None = None


def output_stem(tile: str) -> str:
    """The stem of a tile's output names (``m_123.tif`` -> ``m_123``)."""
    return storage.name(tile).rsplit(".", 1)[0]


def _ours(name: str) -> bool:
    return name.endswith(OUTPUT_SUFFIXES) or name.startswith(".")


def _from_glob(pattern: str, image_suffix: str) -> list[str]:
    matches = storage.glob(pattern)  # ** spans folders, on disk as in blob storage
    found = sorted(m for m in matches if not _ours(storage.name(m)))
    if not found:
        raise DataError(f"{pattern}: no files match")

    # a pattern over a folder of pairs (data/*.tif) matches the labels too: as a folder
    # argument does, take the images and leave out their partners
    stems = {_pair_key(m) for m in found if storage.name(m).endswith(image_suffix)}
    partners = [
        m for m in found if not storage.name(m).endswith(image_suffix) and _pair_key(m) in stems
    ]
    if partners:
        log.info(
            "%s: %d file(s) beside their *%s images left out (their labels, as %s)",
            pattern,
            len(partners),
            image_suffix,
            storage.name(partners[0]),
        )
        left = set(partners)
        found = [m for m in found if m not in left]
    return found


def _from_folder(folder: str, image_suffix: str) -> list[str]:
    files = [
        storage.join(folder, rel)
        for rel, _ in storage.list_files(folder)
        if not any(part.startswith(".") for part in rel.split("/"))
    ]
    images = [f for f in files if storage.name(f).endswith(image_suffix)]
    if images:
        _warn_left_out(folder, files, images, image_suffix)
    else:
        images = [
            f
            for f in files
            if storage.name(f).lower().endswith(IMAGE_SUFFIXES) and not _ours(storage.name(f))
        ]
    if not images:
        raise DataError(f"{folder}: no *{image_suffix} or *.tif images in this folder")
    return images


def _pair_key(path: str) -> tuple[str, str]:
    """A file's folder and its name without its last ``_suffix.ext``: a pair's shared key.

    A partner lies beside its image (``d/m_1_naip.tif``, ``d/m_1_lc.tif`` -> ``(d, m_1)``).
    """
    name = storage.name(path)
    stem = name.rsplit("_", 1)[0] if "_" in name else name.rsplit(".", 1)[0]
    return posixpath.dirname(path), stem


def _warn_left_out(folder: str, files: list[str], images: list[str], suffix: str) -> None:
    """Names the GeoTIFFs a folder leaves out for not ending in ``suffix``.

    The images' partners (their labels beside them: the same folder and stem, another last
    ``_suffix``) are not named: a folder mixing ``*_naip.tif`` with other names would lose the
    others unsaid.
    """
    stems = {_pair_key(f) for f in images}
    chosen = set(images)
    left = [
        f[len(folder.rstrip("/")) + 1 :] if f.startswith(folder) else storage.name(f)
        for f in files
        if f not in chosen
        and storage.name(f).lower().endswith(IMAGE_SUFFIXES)
        and not _ours(storage.name(f))
        and _pair_key(f) not in stems
    ]
    if left:
        shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        log.warning(
            "%s: %d GeoTIFF(s) left out, their names do not end in %s (%s): name them as "
            "arguments or in a list file (@tiles.txt) to map them",
            folder,
            len(left),
            suffix,
            shown,
        )


def _from_list(path: str) -> list[str]:
    text = read_text(path, "list file")
    folder = entry_folder(path)
    tiles = []
    for line in text.splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            tiles.append(resolve_entry(folder, entry))
    if not tiles:
        raise DataError(f"{path}: lists no tiles")
    return tiles


def _from_manifest(path: str) -> list[str]:
    folder = entry_folder(path)
    return [
        resolve_entry(folder, row["image"])
        for _, row in manifest_rows(path, ("image",), what="tiles")
    ]


def resolve_tiles(args: list[str], image_suffix: str = "_naip.tif") -> list[str]:
    """Turns ``landcover predict``'s arguments into the job's tiles.

    Args:
        args: Files, globs, folders, list files (``@list.txt`` or ``.txt``) and manifests
            (``.csv``); paths or blob URLs.
        image_suffix: The checkpoint's image file-name suffix (preferred in folders).

    Returns:
        The tiles, each once, in the order found.

    Raises:
        DataError: If a glob matches nothing, a folder has no images, a list or manifest is
            missing or empty, or two tiles would write maps of the same name.
        StorageError: If listing a blob prefix fails.
    """
    tiles: list[str] = []
    for arg in args:
        if arg.startswith("@"):
            tiles += _from_list(arg[1:])
        elif not storage.is_remote(arg) and _is_folder(arg):  # also one named x.tif or a.csv
            tiles += _from_folder(arg, image_suffix)
        elif globlib.has_magic(arg) and not storage.is_file(arg):  # tile[1].tif is a file
            tiles += _from_glob(arg, image_suffix)
        elif arg.lower().endswith(".txt"):
            tiles += _from_list(arg)
        elif arg.lower().endswith(".csv"):
            tiles += _from_manifest(arg)
        elif (
            storage.is_remote(arg)
            and not arg.lower().endswith(IMAGE_SUFFIXES)  # one request per tile otherwise
            and _is_folder(arg)
        ):  # a blob prefix (a local folder is taken above)
            tiles += _from_folder(arg, image_suffix)
        else:
            tiles.append(arg)
    tiles = list(dict.fromkeys(_normalised(t) for t in tiles))
    seen: dict[str, str] = {}
    for tile in tiles:
        stem = output_stem(tile)
        if stem in seen:
            raise DataError(
                f"{seen[stem]} and {tile} would both write {stem}_class.tif: give tiles "
                "with distinct file names, or predict them into separate --out folders"
            )
        seen[stem] = tile
    return tiles


def _normalised(path: str) -> str:
    """A path or URL without ``.`` and ``..`` segments (blob storage does not resolve them)."""
    if protocol(path) is None:
        return os.path.normpath(path)
    head, rest = path.split("://", 1)
    return f"{head}://{posixpath.normpath(rest)}" if rest else path


def _is_folder(path: str) -> bool:
    if storage.is_remote(path):
        return storage.exists(path) and not storage.is_file(path)
    return os.path.isdir(storage.parse(path).path)


TileCheck = Callable[[Any, str], None]
"""A further check of an open local tile (``(dataset, path)``); raises a LandcoverError."""


def _measure(tile: str, bands: int, check: TileCheck | None = None) -> TileEntry:
    from landcover.inference.options import check_bands

    try:
        if storage.is_remote(tile):
            try:
                info = storage.stat(tile)
            except storage.StorageNotFoundError:
                return TileEntry(tile, 0, f"{tile}: file not found")
            return TileEntry(tile, info.size, version=f"{info.size}:{info.version}")
        with open_raster(tile) as src:
            check_bands(src, tile, bands)
            if check is not None:
                check(src, tile)
            info = storage.stat(tile)
            return TileEntry(tile, src.width * src.height, version=f"{info.size}:{info.version}")
    except LandcoverError as exc:
        return TileEntry(tile, 0, str(exc))


def measure_tiles(
    tiles: list[str],
    bands: int,
    concurrency: int = 16,
    check: TileCheck | None = None,
    acquired: dict[str, Acquired] | None = None,
) -> list[TileEntry]:
    """Measures every tile and orders them largest first.

    Local files: the header is read (pixel count; band count and dtype checked against the
    model). Blobs: only their size is asked for (a header would mean a download here; the
    worker that predicts a blob checks it).

    Args:
        tiles: The tiles.
        bands: Bands the model expects.
        concurrency: Headers or sizes read at once.
        check: A further check of each local tile's header (``--resolution``'s, say); what
            it raises becomes the tile's error.
        acquired: When the imagery of tiles a catalogue search found was acquired, by tile
            (:attr:`JobOptions.acquired <landcover.mapping.spec.JobOptions.acquired>`).

    Returns:
        One entry per tile, largest first (ties by path); tiles that cannot be predicted
        carry their error and come last; tiles of a catalogue search carry their date.
    """
    if not tiles:
        return []
    with ThreadPoolExecutor(max_workers=min(concurrency, len(tiles))) as pool:
        entries = list(pool.map(lambda t: _measure(t, bands, check), tiles))
    if acquired:
        dates = {_normalised(tile): when for tile, when in acquired.items()}
        entries = [replace(e, acquired=dates.get(e.path)) for e in entries]
    return sorted(entries, key=lambda e: (e.error is not None, -e.cost, e.path))
