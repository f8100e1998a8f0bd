"""What the trainer tells the run's loggers: the callback interface and a list of callbacks.

The trainer (:class:`~landcover.training.trainer.Trainer`) calls each hook of every callback,
in order, at the same points of every run; a logger is a :class:`Callback` that overrides the
hooks it needs (the rest do nothing). The run folder's own loggers (``metrics.jsonl``,
TensorBoard, ``curves.png``, the unlearned-class check, progress lines, MLflow) are built by
:func:`~landcover.training.loggers.run_callbacks`, on rank 0 only, followed by those a plugin
registered (:func:`register_callback`; :mod:`landcover.plugins` loads it in every worker).

Hooks, in the order a run calls them::

    on_train_start(config)              once, before the first epoch to train
      on_epoch_start(epoch, steps)      each epoch: its number (1-based) and optimizer steps
        on_step(step, loss, samples)    after each optimizer step
      on_checkpoint(path, best)         after each checkpoint file is written (rank 0)
      on_epoch_end(record)              each epoch's typed record
    on_train_end(completed)             once, also when training fails

A run with nothing left to train (``--epochs`` already reached) calls none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from landcover.errors import first_line

if TYPE_CHECKING:
    import torch

    from landcover.config import Config
    from landcover.training.records import EpochRecord
    from landcover.training.runfolder import RunFolder

log = logging.getLogger("landcover")

CallbackFactory = Callable[["Config", "RunFolder"], "Callback | None"]
"""Makes a registered callback for a run: a :class:`Callback` subclass, or a function that may
return ``None`` (not for this run)."""

_REGISTERED: dict[str, CallbackFactory] = {}
_F = TypeVar("_F", bound=CallbackFactory)


def register_callback(name: str) -> Callable[[_F], _F]:
    """A decorator that adds a callback to every training run of the process (rank 0).

    The decorated class (or function) is called as ``factory(config, folder)`` with the run's
    effective configuration and :class:`~landcover.training.runfolder.RunFolder` when training
    starts; its callback runs after the run folder's own loggers. Registering a name again
    replaces it.

    Args:
        name: The callback's name (in the log line that lists them).

    Returns:
        The decorator; it returns the factory unchanged.
    """

    def register(factory: _F) -> _F:
        _REGISTERED[name] = factory
        return factory

    return register


def unregister_callback(name: str) -> None:
    """Removes a registered callback (for tests that register one)."""
    _REGISTERED.pop(name, None)


def registered_callbacks(config: Config, folder: RunFolder) -> list[Callback]:
    """The registered callbacks made for a run (those whose factory returns one).

    Args:
        config: The run's effective configuration.
        folder: The run folder.

    Returns:
        The callbacks, in registration order.
    """
    made = ((name, factory(config, folder)) for name, factory in _REGISTERED.items())
    callbacks = [(name, callback) for name, callback in made if callback is not None]
    if callbacks:
        log.info("plugin callbacks: %s", ", ".join(name for name, _ in callbacks))
    return [callback for _, callback in callbacks]


class Callback:
    """A logger of a training run: every hook does nothing unless overridden."""

    def on_train_start(self, config: Config) -> None:
        """Training starts (or resumes).

        Args:
            config: The run's effective configuration (``auto`` values resolved).
        """

    def on_epoch_start(self, epoch: int, steps: int) -> None:
        """An epoch's training steps start.

        Args:
            epoch: The epoch's number (1-based).
            steps: Optimizer steps in the epoch.
        """

    def on_step(self, step: int, loss: torch.Tensor, samples: int) -> None:
        """An optimizer step is done.

        Reading ``loss`` waits for the device: a callback should read it only when it uses it.

        Args:
            step: Steps done in this epoch.
            loss: The step's training loss (a scalar tensor on the worker's device).
            samples: Global samples done in this epoch.
        """

    def on_checkpoint(self, path: str, best: bool) -> None:
        """A checkpoint file was written (on rank 0, which writes them).

        Args:
            path: Where it is (a path, or a URL for a run folder on blob storage): ``last.pt``
                after every epoch, and ``best.pt`` after an epoch with the best mIoU so far.
            best: Whether it is the run's best checkpoint (``best.pt``).
        """

    def on_epoch_end(self, record: EpochRecord) -> None:
        """An epoch is done: trained, validated (when due) and checkpointed.

        Args:
            record: The epoch's record.
        """

    def on_train_end(self, completed: bool) -> None:
        """Training ends.

        Args:
            completed: Whether every epoch was trained (``False`` when training failed).
        """


class CallbackList(Callback):
    """Calls each hook of several callbacks, in their order.

    Args:
        callbacks: The callbacks.
    """

    def __init__(self, callbacks: Sequence[Callback]) -> None:
        self.callbacks = list(callbacks)

    def on_train_start(self, config: Config) -> None:
        """Starts every callback; when one fails, those started before it are ended.

        The trainer ends the callbacks only once all have started, so a callback that fails
        to start (MLflow's, say) would otherwise leave the others' files and runs open.

        Args:
            config: The run's effective configuration.

        Raises:
            Exception: What the failing callback raised (after the others were ended).
        """
        for started, callback in enumerate(self.callbacks):
            try:
                callback.on_train_start(config)
            except Exception:
                CallbackList(self.callbacks[:started]).on_train_end(False)
                raise

    def on_epoch_start(self, epoch: int, steps: int) -> None:  # noqa: D102 - Callback's
        for callback in self.callbacks:
            callback.on_epoch_start(epoch, steps)

    def on_step(self, step: int, loss: torch.Tensor, samples: int) -> None:  # noqa: D102
        for callback in self.callbacks:
            callback.on_step(step, loss, samples)

    def on_checkpoint(self, path: str, best: bool) -> None:  # noqa: D102 - Callback's
        for callback in self.callbacks:
            callback.on_checkpoint(path, best)

    def on_epoch_end(self, record: EpochRecord) -> None:  # noqa: D102 - Callback's
        for callback in self.callbacks:
            callback.on_epoch_end(record)

    def on_train_end(self, completed: bool) -> None:
        """Ends every callback, each even when an earlier one raises.

        Args:
            completed: Whether every epoch was trained.

        Raises:
            Exception: The first error a callback raised, when training completed (after a
                failed training it is logged, and the training's error goes on).
        """
        first: Exception | None = None
        for callback in self.callbacks:
            try:
                callback.on_train_end(completed)
            except Exception as exc:  # the others still close their files
                first = first or exc
        if first is not None and completed:
            raise first
        if first is not None:
            log.warning("a logger failed as training ended: %s", first_line(first, typed=True))
