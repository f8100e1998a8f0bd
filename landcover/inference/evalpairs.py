"""The labelled tiles ``landcover evaluate`` scores: a folder's pairs, or a manifest's test rows.

A manifest that names splits (``data prepare`` writes ``train``, ``val`` and ``test``) is scored
on its ``test`` rows unless ``--split`` names another (``all``: every row): scoring the rows the
model trained on would inflate the metrics unsaid.
"""

from __future__ import annotations

import logging

from landcover.data.pairs import TilePair, discover_pairs, read_manifest
from landcover.errors import ConfigError, DataError
from landcover.redaction import redact
from landcover.wording import counted

log = logging.getLogger("landcover")

SPLITS = ("test", "val", "train", "all")
"""What ``--split`` may name."""


def evaluation_pairs(
    data: str, image_suffix: str, label_suffix: str, split: str | None = None
) -> list[TilePair]:
    """The pairs to score.

    Args:
        data: A folder of pairs (named with the suffixes) or a manifest CSV.
        image_suffix: The model's image suffix (a folder's pairs).
        label_suffix: The model's label suffix.
        split: A manifest's rows to score: ``test``, ``val``, ``train`` or ``all``;
            ``None``: ``test`` when the manifest names splits, else every row.

    Returns:
        The pairs.

    Raises:
        ConfigError: If ``split`` is given with a folder, or names no split.
        DataError: If the manifest has no row of the split (``None``: no test row while it
            names splits), or the data cannot be read.
    """
    if split is not None and split not in SPLITS:
        raise ConfigError(f"--split must be one of {', '.join(SPLITS)}, not {split!r}")
    if not data.endswith(".csv"):
        if split is not None:
            raise ConfigError(f"--split picks a manifest's rows; {redact(data)} is a folder")
        return discover_pairs(data, image_suffix, label_suffix)
    rows = read_manifest(data)
    named = any(row_split for _, row_split in rows)
    if split == "all" or (split is None and not named):
        return [pair for pair, _ in rows]
    wanted = split or "test"
    pairs = [pair for pair, row_split in rows if row_split == wanted]
    if not pairs:
        how = "pass --split val, train or all" if split is None else "pass another --split"
        raise DataError(
            f"{redact(data)}: no {wanted} row among its {counted(len(rows), 'row')}: {how}"
        )
    log.info(
        "scoring the %s of %s (--split all: every row)",
        counted(len(pairs), f"{wanted} row"),
        redact(data),
    )
    return pairs
