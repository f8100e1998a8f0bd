"""Logging setup: rank 0 talks on the console, every rank writes its own log file."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from landcover.parallel.env import DistEnv


def setup_logging(env: DistEnv, out: str | None) -> None:
    """Sends rank 0's INFO lines to the console, other ranks' only from WARNING up.

    Every rank also logs INFO to ``{out}/logs/rank{R}.log``.

    Args:
        env: The worker's place.
        out: The run folder, or ``None`` for console only.
    """
    logger = logging.getLogger("landcover")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.INFO if env.is_main else logging.WARNING)
    prefix = "" if env.world_size == 1 else f"[rank {env.rank}] "
    console.setFormatter(logging.Formatter(f"%(asctime)s {prefix}%(message)s", "%H:%M:%S"))
    logger.addHandler(console)
    if out is not None:
        folder = Path(out) / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(folder / f"rank{env.rank}.log")
        file_handler.setFormatter(
            logging.Formatter(f"%(asctime)s rank{env.rank} %(levelname)s %(message)s")
        )
        logger.addHandler(file_handler)
