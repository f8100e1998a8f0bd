"""Finding image/label tile pairs and splitting them into training and validation sets."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from landcover import storage
from landcover.config import DataConfig
from landcover.data.staging import INCOMPLETE_MARKER, incomplete_message
from landcover.errors import DataError


@dataclass(frozen=True)
class TilePair:
    """One NAIP tile and its land-cover label raster.

    Attributes:
        name: Tile name (the file name without the pair suffix).
        image: Path of the imagery GeoTIFF.
        label: Path of the label GeoTIFF.
    """

    name: str
    image: str
    label: str


SplitPairs = tuple[list[TilePair], list[TilePair]]
"""``(train, val)`` pairs of a data configuration (:func:`split_pairs`)."""


def discover_pairs(root: str, image_suffix: str, label_suffix: str) -> list[TilePair]:
    """Finds ``{name}{image_suffix}`` / ``{name}{label_suffix}`` pairs in a folder or prefix.

    Args:
        root: A folder (local disk or NFS mount) or a blob URL (``az://container/prefix``).
        image_suffix: File-name suffix of the imagery, e.g. ``_naip.tif``.
        label_suffix: File-name suffix of the labels, e.g. ``_lc.tif``.

    Returns:
        The pairs, sorted by name; paths keep the form of ``root``.

    Raises:
        DataError: If the folder is missing or unfinished (``data prepare`` did not finish
            writing it), a file has no partner, or there are no pairs.
        StorageError: If listing a remote folder fails.
    """
    if storage.is_file(root):
        hint = (
            ": a manifest, which training reads as data.manifest (--set data.manifest=FILE)"
            if root.lower().endswith(".csv")
            else ""
        )
        raise DataError(
            f"{root}: a file, not a folder of {{name}}{image_suffix} / {{name}}{label_suffix} "
            f"pairs{hint}"
        )
    if not storage.exists(root):
        raise DataError(f"{root}: data folder not found")
    entries = {storage.name(url): url for url in storage.listdir(root)}
    if INCOMPLETE_MARKER in entries:  # a data prepare that failed or is running
        raise DataError(incomplete_message(root))
    images = {n[: -len(image_suffix)]: u for n, u in entries.items() if n.endswith(image_suffix)}
    labels = {n[: -len(label_suffix)]: u for n, u in entries.items() if n.endswith(label_suffix)}
    for name in sorted(set(images) - set(labels)):
        raise DataError(f"{images[name]}: no label file {name}{label_suffix} beside it")
    for name in sorted(set(labels) - set(images)):
        raise DataError(f"{labels[name]}: no image file {name}{image_suffix} beside it")
    if not images:
        raise DataError(
            f"{root}: no tile pairs found (expected *{image_suffix} with matching *{label_suffix})"
        )
    return [TilePair(n, images[n], labels[n]) for n in sorted(images)]


def read_manifest(path: str) -> list[tuple[TilePair, str | None]]:
    """Reads a CSV manifest with columns ``image,label`` and an optional ``split``.

    Args:
        path: The manifest; relative paths in it are relative to its folder.

    Returns:
        ``(pair, split)`` tuples; ``split`` is ``train``, ``val``, ``test`` or ``None``.

    Raises:
        DataError: If the manifest is missing, malformed, lists no pairs, or is in a folder
            ``data prepare`` did not finish writing.
    """
    folder = entry_folder(path)
    if storage.exists(resolve_entry(folder, INCOMPLETE_MARKER)):
        raise DataError(incomplete_message(folder))
    rows: list[tuple[TilePair, str | None]] = []
    for line, row in manifest_rows(path, ("image", "label"), ("split",), "pairs"):
        split = row.get("split") or None
        if split not in (None, "train", "val", "test"):
            raise DataError(f"{path}: line {line}: split must be train, val or test, not {split!r}")
        image, label = row["image"], row["label"]
        name = Path(image).name.rsplit(".", 1)[0]
        pair = TilePair(name, resolve_entry(folder, image), resolve_entry(folder, label))
        rows.append((pair, split))
    return rows


def manifest_rows(
    path: str, required: tuple[str, ...], optional: tuple[str, ...] = (), what: str = "rows"
) -> list[tuple[int, dict[str, str]]]:
    """The rows of a CSV manifest (training's pairs, predict's tiles), values stripped.

    Args:
        path: The manifest (local path or URL).
        required: Columns every row must fill.
        optional: Columns it may have (named in the message of a missing column).
        what: What the rows are, for the message of an empty manifest.

    Returns:
        ``(line, row)`` for each row, ``line`` its line number in the file.

    Raises:
        DataError: If the manifest is missing or not UTF-8, lacks a required column, has a
            row with an empty required value, or has no rows.
    """
    text = read_text(path, "manifest")
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not set(required) <= set(reader.fieldnames):
        columns = ",".join(required) + "".join(f"[,{name}]" for name in optional)
        plural = "s" if len(required) + len(optional) > 1 else ""
        raise DataError(f"{path}: manifest needs the column{plural} {columns}")
    rows = []
    for line, row in enumerate(reader, start=2):
        values = {key: (value or "").strip() for key, value in row.items() if key is not None}
        if not all(values.get(name) for name in required):
            raise DataError(f"{path}: line {line} has an empty {' or '.join(required)}")
        rows.append((line, values))
    if not rows:
        raise DataError(f"{path}: manifest lists no {what}")
    return rows


def entry_folder(path: str) -> str:
    """The folder a list file's or manifest's relative entries are relative to.

    Args:
        path: The list file or manifest (local path or URL).

    Returns:
        Its folder (``.`` for a bare file name).
    """
    return path.rsplit("/", 1)[0] if "/" in path else "."


def read_text(path: str, what: str) -> str:
    """A list file or manifest's text (UTF-8, a byte-order mark allowed).

    Args:
        path: The file (local path or URL).
        what: What it is, for the message (``manifest``, ``list file``).

    Returns:
        Its text.

    Raises:
        DataError: If it is missing or not UTF-8 text.
    """
    if not storage.is_file(path):
        raise DataError(f"{path}: {what} not found")
    try:
        return storage.read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None


def resolve_entry(folder: str, path: str) -> str:
    """A manifest entry: absolute paths and URLs as they are, others relative to the manifest."""
    if storage.is_remote(path) or Path(path).is_absolute():
        return path
    return storage.join(folder, path)


def data_source(data: DataConfig, root: str) -> str:
    """What a run's pairs are read from, as its log names it.

    Args:
        data: The data configuration.
        root: The data folder (``data.root`` or the built-in sample's folder).

    Returns:
        The manifest (``data.manifest``, which overrides the folder) when set, else ``root``.
    """
    return f"manifest {data.manifest}" if data.manifest else root


def split_pairs(data: DataConfig, root: str) -> SplitPairs:
    """Resolves the training and validation pairs of a data configuration.

    The validation set is, in order of precedence: the manifest's ``split`` column,
    ``val_root``, the tiles named in ``val_tiles``, or the last ``val_fraction`` of the tiles
    by name (at least one tile when there are two or more). A manifest's ``test`` rows are
    neither trained nor validated on (they are for ``evaluate``).

    Args:
        data: The data configuration.
        root: The data folder (``data.root`` or the built-in sample's folder).

    Returns:
        ``(train, val)`` lists of pairs; ``val`` may be empty.

    Raises:
        DataError: If no training pairs remain or a named validation tile does not exist.
    """
    if data.manifest:
        rows = read_manifest(data.manifest)
        pairs = [p for p, s in rows if s != "test"]
        if any(split is not None for _, split in rows):
            train = [p for p, s in rows if s in (None, "train")]
            val = [p for p, s in rows if s == "val"]
            return _non_empty(train, data.manifest), val
    else:
        pairs = discover_pairs(root, data.image_suffix, data.label_suffix)
    if data.val_root:
        val = discover_pairs(data.val_root, data.image_suffix, data.label_suffix)
        return pairs, val
    if data.val_tiles:
        names = {p.name for p in pairs}
        missing = [n for n in data.val_tiles if n not in names]
        if missing:
            raise DataError(f"{root}: validation tiles not found: {', '.join(missing)}")
        val = [p for p in pairs if p.name in data.val_tiles]
        train = [p for p in pairs if p.name not in data.val_tiles]
        return _non_empty(train, root), val
    n_val = round(len(pairs) * data.val_fraction)
    if data.val_fraction > 0 and len(pairs) >= 2:
        n_val = max(1, n_val)
    n_val = min(n_val, len(pairs) - 1)
    return pairs[: len(pairs) - n_val], pairs[len(pairs) - n_val :]


def _non_empty(train: list[TilePair], where: str) -> list[TilePair]:
    if not train:
        raise DataError(f"{where}: no training tiles left after holding out validation tiles")
    return train
