"""What ``landcover data check`` found, and its printed report.

:class:`CheckReport` holds every checked tile's class counts (:class:`TileReport`) and every
problem (:class:`Problem`); :func:`print_report` shows it as a table of tiles with their class
percentages, the totals, and the list of problems, errors first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from landcover.classes import IGNORE_INDEX, ClassMapping

KINDS = ("missing", "partner", "corrupt", "bands", "dtype", "crs", "grid", "codes", "nodata")
"""Problem kinds, in the order they are listed."""


@dataclass(frozen=True)
class Problem:
    """One problem with one file.

    Attributes:
        path: The file.
        kind: One of :data:`KINDS`.
        message: What is wrong (without the path).
        fatal: False for warnings: a label that train/evaluate can reproject, a tile without
            labelled pixels.
    """

    path: str
    kind: str
    message: str
    fatal: bool = True

    def line(self) -> str:
        """The problem as one ``path: message`` line."""
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class LabelShares:
    """What share of a tile's (or the folder's) pixels each class, no-data and unknown codes are.

    Attributes:
        per_class: Each class's share of all pixels (image no-data pixels not counted).
        nodata: Pixels training ignores: label codes the mapping ignores, and pixels where
            the image has no data.
        unknown: Label codes the mapping does not know (a ``codes`` error), image no-data
            or not.
    """

    per_class: list[float]
    nodata: float
    unknown: float


@dataclass
class TileReport:
    """Pixel statistics of one readable pair.

    Attributes:
        name: Tile name.
        width: Image width in pixels.
        height: Image height in pixels.
        counts: ``(256,)`` pixel counts of each label code on the image grid.
        aligned: Whether the label was reprojected onto the image grid to count it.
        masked: ``(256,)`` the part of ``counts`` under image no-data pixels (training ignores
            them), or None when the image has no no-data pixel.
    """

    name: str
    width: int
    height: int
    counts: np.ndarray
    aligned: bool = False
    masked: np.ndarray | None = None

    @property
    def pixels(self) -> int:
        """Pixels of the tile."""
        return self.width * self.height


@dataclass
class CheckReport:
    """The result of :func:`check_folder`.

    Attributes:
        root: The data folder or manifest CSV.
        mapping: The class mapping the label codes were checked against.
        pairs: Number of complete pairs found.
        tiles: Statistics of the pairs whose pixels could be counted.
        problems: Every problem found, errors and warnings.
    """

    root: str
    mapping: ClassMapping
    pairs: int = 0
    tiles: list[TileReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        """The fatal problems."""
        return [p for p in self.problems if p.fatal]

    @property
    def warnings(self) -> list[Problem]:
        """The problems train and evaluate cope with."""
        return [p for p in self.problems if not p.fatal]

    @property
    def ok(self) -> bool:
        """True when no problem is fatal."""
        return not self.errors

    @property
    def bad_files(self) -> list[str]:
        """The files with a fatal problem, sorted."""
        return sorted({p.path for p in self.errors})

    def kinds_of(self, path: str | Path) -> set[str]:
        """The kinds of the problems reported for a file.

        Args:
            path: The file.

        Returns:
            The problem kinds (empty when the file is fine).
        """
        return {p.kind for p in self.problems if p.path == str(path)}

    def fractions(self, counts: np.ndarray, masked: np.ndarray | None = None) -> LabelShares:
        """Splits label-code counts into class, no-data and unknown-code shares.

        Args:
            counts: ``(256,)`` pixel counts per label code.
            masked: ``(256,)`` the part of ``counts`` under image no-data pixels, if any.

        Returns:
            The shares of all pixels; they sum to 1.
        """
        total = max(int(counts.sum()), 1)
        labelled = counts if masked is None else counts - masked
        table = self.mapping.lookup_table()
        per_class = [
            float(labelled[table == k].sum()) / total for k in range(self.mapping.num_classes)
        ]
        known = np.zeros(256, dtype=bool)
        known[sorted(self.mapping.known_codes)] = True
        unknown = int(counts[~known].sum())
        labelled_pixels = int(labelled[table != IGNORE_INDEX].sum())  # (unknown: ignored)
        nodata = int(counts.sum()) - labelled_pixels - unknown
        return LabelShares(per_class, nodata / total, unknown / total)

    def total_masked(self) -> np.ndarray:
        """Label-code counts under image no-data pixels, summed over every counted tile."""
        total = np.zeros(256, dtype=np.int64)
        for tile in self.tiles:
            if tile.masked is not None:
                total += tile.masked
        return total

    def total_counts(self) -> np.ndarray:
        """Label-code counts summed over every counted tile."""
        total = np.zeros(256, dtype=np.int64)
        for tile in self.tiles:
            total += tile.counts
        return total


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f}"


def print_report(report: CheckReport) -> None:
    """Prints the tiles table, the totals and every problem.

    Args:
        report: As returned by :func:`check_folder`.
    """
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=max(console.width, 160))
    names = report.mapping.names
    table = Table(title=f"{report.root}: {len(report.tiles)} of {report.pairs} pairs counted")
    table.add_column("tile")
    table.add_column("size", justify="right")
    totals = report.fractions(report.total_counts(), report.total_masked())
    unknown = totals.unknown > 0  # a column only when some label holds codes of no class

    def cells(shares: LabelShares) -> list[str]:
        extra = [_pct(shares.unknown)] if unknown else []
        return [*(_pct(f) for f in shares.per_class), _pct(shares.nodata), *extra]

    for column in [*names, "no-data", *(["unknown code"] if unknown else [])]:
        table.add_column(f"{column} %", justify="right")
    for tile in report.tiles:
        size = f"{tile.width}x{tile.height}" + (" *" if tile.aligned else "")
        table.add_row(tile.name, size, *cells(report.fractions(tile.counts, tile.masked)))
    mpx = sum(t.pixels for t in report.tiles) / 1e6
    table.add_section()
    table.add_row(f"total: {len(report.tiles)} tiles", f"{mpx:.2f} Mpx", *cells(totals))
    console.print(table)
    if any(t.aligned for t in report.tiles):
        console.print("* label on another grid, counted after reprojection onto the image grid")
    if not report.problems:
        console.print(f"all {report.pairs} pairs are fine")
        return
    errors, warnings = report.errors, report.warnings
    console.print(
        f"{len(errors)} problem(s) in {len(report.bad_files)} file(s), {len(warnings)} warning(s):"
    )
    order = {kind: i for i, kind in enumerate(KINDS)}
    for problem in sorted(
        report.problems, key=lambda p: (not p.fatal, order.get(p.kind, len(KINDS)), p.path)
    ):
        level = "error" if problem.fatal else "warning"
        console.print(
            f"  {level:<7} {problem.kind:<7} {problem.line()}", markup=False, soft_wrap=True
        )
