"""Whether a run's checkpoint can be resumed with the settings asked for (issue 42, item 3).

A run resumes with the settings it started with: its class scheme (the model's outputs and what
each label code means), its bands (the model's inputs), its architecture and encoder (the
weights' shapes) and its optimizer (the saved optimizer state). :func:`check_resume` compares
the checkpoint's configuration with the command's before any worker starts and before any file
of the run folder is written, so a refused resume is one line and leaves the folder as it was.
The trainer checks the checkpoint it loads the same way (:func:`check_fits`), for workers an
external launcher started.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from landcover.checkpoint import load_checkpoint
from landcover.classes import ClassMapping
from landcover.config import Config, config_from_dict
from landcover.errors import CheckpointError, ConfigError
from landcover.redaction import redact
from landcover.training.checkpoint import find_resume_checkpoint
from landcover.training.runfolder import RunFolder

RESUME_SETTINGS = (
    "data.classes",
    "data.bands",
    "model.arch",
    "model.encoder",
    "model.encoder_depth",
    "model.decoder_channels",
    "model.arch_options",
    "optim.optimizer",
)
"""The settings a resumed run keeps (``model.weights`` is not one: the checkpoint's replace
them)."""

DATA_SETTINGS = (
    "data.root",
    "data.manifest",
    "data.val_root",
    "data.val_tiles",
    "data.val_fraction",
)
"""The settings that choose a run's training and validation tiles: a resume may change them
(more tiles, a fine-tune), and is told what that does to ``best.pt``."""

log = logging.getLogger("landcover")


def check_resume(config: Config, folder: RunFolder, warn: bool = True) -> None:
    """Refuses a resume whose checkpoint does not fit the settings, before anything is written.

    The run folder's resume checkpoint (``last.pt``, else the newest ``epoch-NNNN.pt``) is
    looked for without creating the folder or cleaning it (no lock is held yet).

    Args:
        config: The command's configuration.
        folder: The run folder (not yet created nor checked).
        warn: Say a change of data (:func:`warn_other_data`): in one process of the run.

    Raises:
        CheckpointError: If the checkpoint cannot be loaded or was trained with other settings.
    """
    path = find_resume_checkpoint(folder, clean=False)
    if path is not None:
        trained = load_checkpoint(path).config
        check_fits(path, trained, config)
        if warn:
            warn_other_data(path, trained, config)


def warn_other_data(path: str, trained: dict[str, Any], config: Config) -> None:
    """Says, in one warning, that a resume trains or validates on other tiles than before.

    ``best.pt`` is the epoch of best validation mIoU over the whole run, so with other
    validation tiles it compares epochs measured on different sets.

    Args:
        path: The checkpoint resumed.
        trained: Its configuration as plain data.
        config: The settings of the resumed run.
    """
    was_data = trained.get("data") or {}
    changed = []
    for setting in DATA_SETTINGS:
        name = setting.split(".")[1]
        if name not in was_data:  # an older checkpoint's configuration: not compared
            continue
        was, now = was_data[name], getattr(config.data, name)
        if _same_data(was) != _same_data(now):
            changed.append(f"{setting} {was} -> {now}")
    if changed:
        log.warning(
            "%s: resumed with other data (%s): best.pt keeps the best validation mIoU of the "
            "whole run, measured on both; train into a new --out to compare them on one set",
            path,
            ", ".join(changed),
        )


def _same_data(value: Any) -> Any:
    """A data setting as compared: a local path absolute from here, a URL without its last ``/``.

    Redacted, as the checkpoint stores it (a query's secret is not compared); lists are
    compared as tuples.
    """
    if isinstance(value, str):
        value = redact(value)
        return os.path.abspath(value) if "://" not in value else value.rstrip("/")
    if isinstance(value, list):
        return tuple(_same_data(v) for v in value)
    return value


def check_fits(path: str, trained: dict[str, Any], config: Config) -> None:
    """Refuses to resume a checkpoint trained with other settings, in one line naming them.

    Args:
        path: The checkpoint.
        trained: Its configuration as plain data.
        config: The settings of the resumed run.

    Raises:
        CheckpointError: If a setting of :data:`RESUME_SETTINGS` differs.
    """
    changed = resume_mismatches(trained, config, f"{path}: config")
    if not changed:
        return
    names = " and ".join(f"{setting} {_text(was)}" for setting, was, _ in changed)
    asked = " and ".join(_text(now) for _, _, now in changed)
    keep = _text(changed[0][1], short=True) if len(changed) == 1 else "those settings"
    raise CheckpointError(
        f"{path}: trained with {names}, resumed with {asked}; keep {keep} or train into a new --out"
    )


def resume_mismatches(
    trained: dict[str, Any], config: Config, source: str
) -> list[tuple[str, Any, Any]]:
    """The settings a resume would change: ``(setting, trained with, asked for)`` each.

    A setting the checkpoint's configuration does not hold (an older checkpoint) is not
    compared, nor a configuration that no longer validates (loading the state says whether it
    fits).

    Args:
        trained: The checkpoint's configuration as plain data.
        config: The settings of the resumed run.
        source: Where ``trained`` came from, for messages.

    Returns:
        The differing settings and their two values, in :data:`RESUME_SETTINGS` order.
    """
    try:
        previous = config_from_dict(trained, source)
    except ConfigError:
        return []
    changed = []
    for setting in RESUME_SETTINGS:
        section, name = setting.split(".")
        if name not in (trained.get(section) or {}):
            continue
        both_list = previous.model.uses_decoder_channels and config.model.uses_decoder_channels
        if name == "decoder_channels" and not both_list:  # a width list of no use to the arch
            continue
        was, now = _setting(previous, setting), _setting(config, setting)
        if _compared(was) != _compared(now):
            changed.append((setting, was, now))
    return changed


def _setting(config: Config, setting: str) -> Any:
    section, name = setting.split(".")
    return getattr(getattr(config, section), name)


def _compared(value: Any) -> Any:
    """What is compared: a class scheme's classes, names and codes (not its name or colours)."""
    if isinstance(value, ClassMapping):
        return [(c.name, sorted(c.codes)) for c in value.classes]
    return value


def _text(value: Any, short: bool = False) -> str:
    """A setting's value as a message names it: a scheme by its name (and classes)."""
    if isinstance(value, ClassMapping) and short:
        return value.name
    if isinstance(value, ClassMapping):
        return f"{value.name} ({value.num_classes} classes: {', '.join(value.names)})"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)
