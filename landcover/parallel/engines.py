"""The engines by name, and the one a run uses."""

from __future__ import annotations

from landcover.config import RunConfig
from landcover.parallel.engine import Engine
from landcover.parallel.horovod_engine import HorovodEngine
from landcover.parallel.torch_engine import TorchEngine

ENGINES: dict[str, Engine] = {engine.name: engine for engine in (TorchEngine(), HorovodEngine())}
"""Every engine, by its ``run.engine`` name."""

DEFAULT_ENGINE = "torch"


def engine_for(run: RunConfig) -> Engine:
    """The engine a run uses, after checking that it can honour the run's options.

    Args:
        run: The run settings.

    Returns:
        The engine.

    Raises:
        ConfigError: If an option does not fit the engine.
    """
    engine = ENGINES[run.engine]
    engine.check(run)
    return engine
