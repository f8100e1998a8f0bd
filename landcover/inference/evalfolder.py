"""An evaluation's output folder: another model's or other tiles' metrics are not replaced unasked.

``landcover evaluate`` run again with the same model on the same tiles replaces its metrics (a
retrained checkpoint at the same path is scored again); pointed at a folder that holds the
metrics of another model, or of other tiles, it stops before any work unless ``--overwrite``.
"""

from __future__ import annotations

import json
import logging
import os

from landcover import storage
from landcover.errors import OutputError
from landcover.redaction import redact
from landcover.wording import counted

log = logging.getLogger("landcover")

METRICS = "metrics.json"
"""The file whose ``checkpoint`` and ``tiles`` say what the folder scored."""


def _scored(out: str) -> tuple[str, list[str]] | None:
    """The model and the tile names the folder's metrics are of; None without (readable) ones."""
    path = storage.join(out, METRICS)
    if not storage.exists(path):
        return None
    try:
        earlier = json.loads(storage.read_bytes(path))
        return str(earlier["checkpoint"]), sorted(str(t["tile"]) for t in earlier["tiles"])
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("%s: not an evaluation's metrics (%s): it is replaced", redact(str(path)), exc)
        return None


def _same_model(earlier: str, now: str) -> bool:
    """Whether two spellings of a model's path name one file (``ckpt/last.pt``, ``./ckpt/last.pt``)."""
    if earlier == now:
        return True
    if storage.is_remote(earlier) or storage.is_remote(now):
        return False
    return os.path.realpath(earlier) == os.path.realpath(now)


def check_evaluation_folder(out: str, checkpoint: str, tiles: list[str], overwrite: bool) -> None:
    """Refuses a folder that holds the metrics of another model or of other tiles.

    Args:
        out: The output folder: a path or a blob URL.
        checkpoint: The model scored now (as its metrics will name it).
        tiles: The names of the tiles scored now.
        overwrite: Replace any earlier metrics.

    Raises:
        OutputError: If the folder's metrics are another model's or other tiles' and
            ``overwrite`` is false.
    """
    earlier = _scored(out)
    if earlier is None or overwrite:
        return
    model, scored = earlier
    same = _same_model(model, redact(checkpoint))
    if same and scored == sorted(tiles):
        log.info("%s: replacing the metrics of the same model on the same tiles", redact(out))
        return
    what = (
        f"this model on other tiles ({counted(len(scored), 'tile')})" if same else f"model {model}"
    )
    raise OutputError(
        f"{redact(out)} holds the metrics of {what}: pass another --out, or --overwrite to "
        "replace them"
    )
