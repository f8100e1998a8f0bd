"""The built-in sample dataset: synthetic NAIP-like tiles, generated once and cached.

``train`` without ``--data`` uses it, so the main job needs no input. It lives in
``$LANDCOVER_CACHE/sample-v1`` (default ``~/.cache/landcover``); a file lock makes concurrent
workers or runs generate it once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

SAMPLE_VERSION = "v1"
SAMPLE_TILES = 12
SAMPLE_SIZE = 512
SAMPLE_SEED = 0
_DONE = ".complete"


def cache_root() -> Path:
    """The landcover cache folder (``$LANDCOVER_CACHE`` or ``~/.cache/landcover``)."""
    env = os.environ.get("LANDCOVER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "landcover"


def ensure_sample() -> Path:
    """Returns the sample dataset's folder, generating it on first use.

    Returns:
        A folder of ``{name}_naip.tif`` / ``{name}_lc.tif`` pairs.
    """
    from landcover.synthetic.synthetic import write_synthetic_dataset

    folder = cache_root() / f"sample-{SAMPLE_VERSION}"
    if (folder / _DONE).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".sample-{SAMPLE_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / _DONE).is_file():
            staging = folder.parent / f".sample-{SAMPLE_VERSION}.partial"
            shutil.rmtree(staging, ignore_errors=True)
            write_synthetic_dataset(
                staging, SAMPLE_TILES, SAMPLE_SIZE, SAMPLE_SEED, prefix="sample"
            )
            (staging / _DONE).write_text("ok\n")
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(staging, folder)
    return folder


def data_root(root: str | None) -> str:
    """Resolves the training data folder: the configured one or the built-in sample.

    Args:
        root: ``data.root`` from the config.

    Returns:
        The folder to read pairs from.
    """
    return root if root is not None else str(ensure_sample())
