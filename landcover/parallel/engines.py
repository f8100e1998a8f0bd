"""The engine implementations by name, and the one a run (or a predict job) uses.

Names and abilities are declared in :mod:`landcover.registry`; this module pairs each with its
implementation.
"""

from __future__ import annotations

from landcover.config import RunConfig
from landcover.parallel.engine import Engine
from landcover.parallel.horovod_engine import HorovodEngine
from landcover.parallel.torch_engine import TorchEngine
from landcover.registry import ENGINES as SPECS
from landcover.registry import REGION_ENGINE

ENGINES: dict[str, Engine] = {engine.name: engine for engine in (TorchEngine(), HorovodEngine())}
"""Every engine, by its ``run.engine`` name."""

if set(ENGINES) != set(SPECS):  # pragma: no cover (a registry entry without an engine)
    raise ImportError(f"engines {sorted(ENGINES)} do not match the registry's {sorted(SPECS)}")


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


def region_engine() -> Engine:
    """The engine a predict job's workers run on (coordination only: a CPU group).

    Returns:
        The engine.
    """
    return ENGINES[REGION_ENGINE]
