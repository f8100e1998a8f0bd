"""Plugins: modules that register what landcover looks up by name, loaded in every process.

A plugin is a Python module whose import registers things: a loss term
(:func:`~landcover.training.lossregistry.register_loss`), a map writer
(:func:`~landcover.inference.sinks.register_map_writer`), a training callback
(:func:`~landcover.training.callbacks.register_callback`). landcover imports them before a
command runs, in the command's process and in each worker it starts (training, a region job),
from two places, as pytest and GDAL's Python tools find theirs:

- an installed package's entry points in the group ``landcover.plugins`` (in its
  ``pyproject.toml``: ``[project.entry-points."landcover.plugins"] myplugin = "myplugin"``);
- ``LANDCOVER_PLUGINS``: module names separated by commas, importable from ``PYTHONPATH``
  (a script's module, without packaging).

``landcover cluster azureml`` jobs do not carry plugins: their image holds landcover's code
alone (the command warns when plugins are loaded).

A plugin that fails to import stops the command in one line naming it and where it was named.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from importlib.metadata import entry_points

from landcover.errors import ConfigError, first_line

log = logging.getLogger("landcover")

GROUP = "landcover.plugins"
"""The entry-point group of installed plugins."""

ENV = "LANDCOVER_PLUGINS"
"""The environment variable naming plugin modules (comma-separated)."""

_loaded: list[str] | None = None


def _load(name: str, where: str, load: Callable[[], object]) -> None:
    """Imports one plugin; a failure is one line naming it and where it was named."""
    try:
        load()
    except Exception as exc:  # its import may raise anything
        raise ConfigError(
            f"plugin {name} ({where}) failed to load: {first_line(exc, 300, typed=True)}"
        ) from None


def load_plugins() -> list[str]:
    """Imports the installed plugins and those ``LANDCOVER_PLUGINS`` names, once a process.

    Returns:
        The names loaded (entry points' names, then the variable's modules).

    Raises:
        ConfigError: If a plugin fails to import.
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    names: list[str] = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        _load(point.name, f"entry point {point.value}", point.load)
        names.append(point.name)
    for module in (m.strip() for m in os.environ.get(ENV, "").split(",")):
        if module:
            _load(module, ENV, lambda module=module: importlib.import_module(module))
            names.append(module)
    _loaded = names
    if names:
        log.debug("plugins loaded: %s", ", ".join(names))
    return names
