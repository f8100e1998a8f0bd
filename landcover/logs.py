"""Logging setup: rank 0 talks on the console, every rank writes its own log file."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from landcover.parallel.env import DistEnv
from landcover.redaction import redact


class RedactingFormatter(logging.Formatter):
    """A formatter whose lines (messages, arguments and tracebacks) carry no credential."""

    def format(self, record: logging.LogRecord) -> str:
        """Formats the record, then redacts it.

        Args:
            record: The log record.

        Returns:
            The line, with every secret replaced by ``***``.
        """
        return redact(super().format(record))


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
    console.setFormatter(RedactingFormatter(f"%(asctime)s {prefix}%(message)s", "%H:%M:%S"))
    logger.addHandler(console)
    if out is not None:
        folder = Path(out) / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(folder / f"rank{env.rank}.log")
        file_handler.setFormatter(
            RedactingFormatter(f"%(asctime)s rank{env.rank} %(levelname)s %(message)s")
        )
        logger.addHandler(file_handler)
