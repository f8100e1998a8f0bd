"""The map writers by name, and a tile's writers together (:class:`TileSinks`).

Importing this module registers the built-in writers (``cog``); a writer of another module
is registered when that module is imported (:func:`~landcover.inference.sinks.register_map_writer`),
in the process that maps the tiles: a worker spawned for ``--workers N`` imports only the
package, so a writer of its own module must be imported by the package (listed here).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from landcover.errors import DataError
from landcover.inference.cogsink import CogSink
from landcover.inference.encode import EncodedStrip
from landcover.inference.results import MapFile
from landcover.inference.sinks import REGISTERED, MapSink, MapTarget
from landcover.inference.writers import finish_strip

BUILT_IN = (CogSink,)
"""The writers of the package (registered on import)."""
DEFAULT_WRITERS = (CogSink.name,)
"""The writers of a job that names none."""
REQUIRED = CogSink.name
"""The writer every job has: the summary, the mosaics and the previews read its class map."""


def map_writer_names() -> tuple[str, ...]:
    """Every registered map writer's name, the built-in ones first."""
    return tuple(REGISTERED)


def map_writers(names: tuple[str, ...] | list[str]) -> list[type[MapSink]]:
    """The writers of these names, checked.

    Args:
        names: ``--map-writer`` names.

    Returns:
        Their classes, in the order given (a name given twice counts once).

    Raises:
        DataError: If a name is not registered, or the ``cog`` writer is not among them.
    """
    unknown = [n for n in names if n not in REGISTERED]
    if unknown:
        raise DataError(
            f"unknown map writer {unknown[0]!r}; choose from {', '.join(map_writer_names())}"
        )
    if REQUIRED not in names:
        raise DataError(
            f"--map-writer needs {REQUIRED} among the writers: the summary, the mosaics "
            "and the previews read its class map"
        )
    return [REGISTERED[n] for n in dict.fromkeys(names)]


def parse_writers(text: str) -> tuple[str, ...]:
    """``cog,npy`` as a tuple of names (spaces and empty items dropped), checked.

    Raises:
        DataError: As :func:`map_writers`.
    """
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    map_writers(names)
    return names


class TileSinks:
    """A tile's map writers together: each finished strip to each writer, then their files.

    The strip is finished once here (its arrays waited for, no-data set) and its classes
    counted, however many writers take it.

    Args:
        sinks: The open writers.
        probs: Whether the strips carry probabilities.
        label: Names the tile in errors.
    """

    def __init__(self, sinks: list[MapSink], probs: bool, label: str) -> None:
        self.sinks = sinks
        self.probs = probs
        self.label = label
        self.histogram = np.zeros(256, dtype=np.int64)
        """Pixels written per class-map value (255 where the input has no data)."""

    @classmethod
    def open(cls, writers: list[type[MapSink]], target: MapTarget) -> TileSinks:
        """Opens each writer for a tile, each in its own scratch folder under ``target``'s.

        Raises:
            DataError: If a writer cannot be opened (those opened are closed).
        """
        sinks: list[MapSink] = []
        try:
            for writer in writers:
                scratch = target.scratch / writer.name
                scratch.mkdir()
                sinks.append(writer(replace(target, scratch=scratch)))
        except BaseException:
            cls(sinks, False, target.label).close()
            raise
        return cls(sinks, target.prob_dtype is not None, target.label)

    def write(self, strip: EncodedStrip) -> None:
        """Finishes a strip, counts its classes and hands it to every writer."""
        finish_strip(strip, self.probs, self.label)
        self.histogram += np.bincount(strip.classes.ravel(), minlength=256)
        for sink in self.sinks:
            sink.write(strip)

    def close(self) -> None:
        """Closes every writer after a failure; raises the first writer's error."""
        errors = []
        for sink in self.sinks:
            try:
                sink.close()
            except DataError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def publish(self) -> list[MapFile]:
        """Publishes every writer's files; returns them, each writer's in its order."""
        return [file for sink in self.sinks for file in sink.publish()]
