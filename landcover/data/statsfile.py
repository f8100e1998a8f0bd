"""``landcover data stats``: measure a dataset's band statistics and class frequencies.

:func:`run_stats` finds the pairs of a data folder or manifest (local or blob), measures them
with :func:`landcover.data.measure.measure_pairs` (windowed reads, bounded memory), prints a
table and writes a YAML file that a config can ``include:``::

    # measured by landcover data stats DATA on DATE: N tiles, M valid pixels
    data:
      mean: [...]
      std: [...]
      class_frequencies: {water: 0.041, ...}
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from landcover import storage
from landcover.classes import ClassMapping
from landcover.data.measure import measure_pairs
from landcover.data.pairs import TilePair, discover_pairs, read_manifest
from landcover.data.stats import DataStats
from landcover.diskerrors import check_output_folder

PROGRESS_EVERY_S = 10.0
"""Seconds between progress lines while measuring."""


@dataclass
class StatsResult:
    """What ``landcover data stats`` measured and wrote.

    Attributes:
        data: The data folder or manifest.
        stats: The measured statistics.
        mapping: The class mapping the labels were read with.
        out: The YAML file written.
        tiles: Number of tiles measured.
        pixels: Image pixels read.
    """

    data: str
    stats: DataStats
    mapping: ClassMapping
    out: str
    tiles: int
    pixels: int


def pairs_of(data: str, image_suffix: str, label_suffix: str) -> list[TilePair]:
    """The pairs of a data folder, or every pair a manifest CSV lists (any split).

    Args:
        data: A folder or a ``.csv`` manifest, local or remote.
        image_suffix: File-name suffix of the imagery (folders).
        label_suffix: File-name suffix of the labels (folders).

    Returns:
        The pairs.

    Raises:
        DataError: If the folder or manifest is missing or lists no pairs.
    """
    if data.lower().endswith(".csv"):
        return [pair for pair, _ in read_manifest(data)]
    return discover_pairs(data, image_suffix, label_suffix)


def default_out(data: str) -> str:
    """The default output file: ``{folder or manifest name}_stats.yaml`` in the current folder.

    Args:
        data: The data folder or manifest.

    Returns:
        The file name.
    """
    stem = storage.name(data) or "data"
    if stem.lower().endswith(".csv"):
        stem = stem[:-4]
    return f"{stem}_stats.yaml"


def stats_yaml(data: str, stats: DataStats, mapping: ClassMapping, when: datetime) -> str:
    """The statistics as a YAML config fragment with a comment saying where they came from.

    Args:
        data: The data folder or manifest measured.
        stats: The statistics.
        mapping: The class mapping (its class names key the frequencies).
        when: When they were measured.

    Returns:
        The YAML text.
    """
    frequencies = dict(zip(mapping.names, stats.frequencies(), strict=True))
    tree = {"data": {"mean": stats.mean(), "std": stats.std(), "class_frequencies": frequencies}}
    counts = ", ".join(
        f"{n} {int(c)}" for n, c in zip(mapping.names, stats.class_counts, strict=True)
    )
    header = (
        f"# measured by landcover data stats {data} on {when.date().isoformat()}: "
        f"{stats.tiles} tiles, {stats.valid_pixels} valid pixels\n"
        f"# classes {mapping.name}, labelled pixels: {counts}\n"
    )
    return header + yaml.safe_dump(tree, sort_keys=False, default_flow_style=None, width=1000)


def print_stats(result: StatsResult) -> None:
    """Prints the band and class tables.

    Args:
        result: What was measured.
    """
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    stats = result.stats
    bands = Table(
        title=f"{result.data}: {result.tiles} tiles, {result.pixels / 1e6:.2f} Mpx, "
        f"{stats.valid_pixels / 1e6:.2f} Mpx valid"
    )
    for column in ("band", "mean", "std", "mean x 255", "std x 255"):
        bands.add_column(column, justify="right")
    for i, (mean, std) in enumerate(zip(stats.mean(), stats.std(), strict=True)):
        bands.add_row(
            str(i + 1), f"{mean:.4f}", f"{std:.4f}", f"{mean * 255:.2f}", f"{std * 255:.2f}"
        )
    console.print(bands)
    classes = Table(title=f"classes ({result.mapping.name})")
    for column in ("class", "pixels", "frequency"):
        classes.add_column(column, justify="right")
    for name, count, freq in zip(
        result.mapping.names, stats.class_counts, stats.frequencies(), strict=True
    ):
        classes.add_row(name, str(int(count)), f"{freq:.4f}")
    console.print(classes)
    console.print(f"wrote {result.out}")


def run_stats(
    data: str,
    mapping: ClassMapping,
    bands: int = 4,
    image_suffix: str = "_naip.tif",
    label_suffix: str = "_lc.tif",
    out: str | None = None,
) -> StatsResult:
    """Runs ``landcover data stats``: measures a dataset, prints and writes the statistics.

    Args:
        data: A folder of pairs or a manifest CSV, local or blob.
        mapping: The class mapping of the labels.
        bands: Expected number of image bands.
        image_suffix: File-name suffix of the imagery.
        label_suffix: File-name suffix of the labels.
        out: Output YAML file (a path or blob URL; default :func:`default_out`), written
            atomically.

    Returns:
        What was measured and where it was written.

    Raises:
        DataError: If the data cannot be read (see :func:`measure_pairs`).
        StorageError: If reading remote data or writing the output fails.
    """
    pairs = pairs_of(data, image_suffix, label_suffix)
    start = last = time.monotonic()

    def progress(index: int, name: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY_S or index + 1 == len(pairs):
            last = now
            print(
                f"measured {index + 1}/{len(pairs)} tiles ({name}) in {now - start:.1f} s",
                file=sys.stderr,
            )

    target = out or default_out(data)
    if not storage.is_remote(target):  # a read-only or full folder: one line, before the work
        check_output_folder(Path(target).absolute().parent)
    measured = measure_pairs(pairs, mapping, bands, on_tile=progress)
    text = stats_yaml(data, measured.stats, mapping, datetime.now(timezone.utc))
    storage.write_text(target, text)
    result = StatsResult(
        data, measured.stats, mapping, target, len(measured.tiles), measured.pixels
    )
    print_stats(result)
    return result
