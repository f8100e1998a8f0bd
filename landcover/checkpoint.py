"""The checkpoint format: a typed record, written and read by training and inference alike.

A checkpoint holds tensors and plain data only, so it loads with
``torch.load(..., weights_only=True)``. It holds the model and optimizer state, the gradient
scaler's state (fp16 training), the schedule's position, the epoch, each rank's RNG states and
the resolved configuration (classes, colours, bands, normalisation, patch size), which is all
that ``predict`` needs.
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from landcover.errors import CheckpointError
from landcover.redaction import redact_tree

FORMAT = "landcover-checkpoint"
FORMAT_VERSION = 2
"""2: ``rng`` is a list with one entry per rank (1: one dict, rank 0's)."""


@dataclass
class Checkpoint:
    """One checkpoint.

    Attributes:
        model: The bare model's state dict: the weights predict and evaluate use (the moving
            average of the weights when the run keeps one, ``optim.ema_decay``).
        config: The resolved configuration as plain data.
        optimizer: The optimizer's state dict (empty when training cannot resume from it).
        grad_scaler: The fp16 gradient scaler's state dict (empty without one).
        scheduler: The schedule's position (``progress_epochs``, ``global_batch``).
        epoch: Completed epochs.
        best_miou: Best validation mIoU so far (-1 before any validation).
        workers: Worker count of the run that wrote it.
        rng: Each rank's RNG states, by rank (see :mod:`landcover.training.checkpoint`).
        metrics: The last epoch's metrics record.
        pixel_size_m: The pixel size in metres the model was trained at (``None``: unknown,
            as in checkpoints older than the field); predict resamples to it.
        train_model: The raw (not averaged) weights training resumes from, when ``model`` is
            a moving average; empty when ``model`` is the raw weights.
        ema_updates: Optimizer steps the moving average in ``model`` includes (0: none).
        format_version: The format version it was written in.
    """

    model: dict[str, torch.Tensor]
    config: dict[str, Any]
    optimizer: dict[str, Any] = field(default_factory=dict)
    grad_scaler: dict[str, Any] = field(default_factory=dict)
    scheduler: dict[str, Any] = field(default_factory=dict)
    epoch: int = 0
    best_miou: float = -1.0
    workers: int = 1
    rng: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    pixel_size_m: float | None = None
    train_model: dict[str, torch.Tensor] = field(default_factory=dict)
    ema_updates: int = 0
    format_version: int = FORMAT_VERSION

    def to_state(self) -> dict[str, Any]:
        """The checkpoint as the plain dict that is saved (with the format marker).

        Returns:
            The dict.
        """
        # the fields as they are: asdict would deep-copy every tensor, and a tensor that is a
        # view into a larger buffer (the moving average's) with the whole buffer each time
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        # no secret in a checkpoint: the configuration may name a data or output URL
        state["config"] = redact_tree(state["config"])
        state["metrics"] = redact_tree(state["metrics"])
        state["format"] = FORMAT
        state["format_version"] = FORMAT_VERSION
        return state

    def serialize(self) -> bytes:
        """Serialises the checkpoint with ``torch.save``.

        Returns:
            Its bytes.
        """
        buffer = io.BytesIO()
        torch.save(self.to_state(), buffer)
        return buffer.getvalue()

    @classmethod
    def from_state(cls, state: Any, source: str) -> Checkpoint:
        """Reads a loaded checkpoint dict, checking its marker and version.

        Format 1 checkpoints (one RNG dict) are read as a list of one.

        Args:
            state: What ``torch.load`` returned.
            source: Where it came from, for messages.

        Returns:
            The checkpoint.

        Raises:
            CheckpointError: If it is not a landcover checkpoint or is newer than this code.
        """
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise CheckpointError(f"{source}: not a landcover checkpoint (no '{FORMAT}' marker)")
        version = int(state.get("format_version", 0))
        if version > FORMAT_VERSION:
            raise CheckpointError(
                f"{source}: checkpoint format {version} is newer than this landcover "
                f"understands ({FORMAT_VERSION}); upgrade landcover"
            )
        if "model" not in state or "config" not in state:
            raise CheckpointError(f"{source}: checkpoint lacks its model or config")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in state.items() if k in known}
        rng = values.get("rng", [])
        values["rng"] = [rng] if isinstance(rng, dict) else list(rng)
        values["format_version"] = version
        return cls(**values)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Loads a landcover checkpoint safely (``weights_only=True``) onto the CPU.

    Args:
        path: The checkpoint: a path or a blob URL.

    Returns:
        The checkpoint.

    Raises:
        CheckpointError: If the file is missing, corrupt, or not a landcover checkpoint.
        StorageError: If reading a remote checkpoint fails after bounded retries.
    """
    from landcover import storage

    if not storage.is_file(path):
        raise CheckpointError(f"{path}: checkpoint not found{_alternative(str(path))}")
    data = storage.read_bytes(path)
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for corrupt or foreign files
        reason = unloadable_reason(data, exc)
        raise CheckpointError(f"{path}: not a loadable checkpoint: {reason}") from None
    return Checkpoint.from_state(state, str(path))


def _alternative(path: str) -> str:
    """What to use instead of a missing ``best.pt``: the run's ``last.pt`` (issue 42, item 10).

    A run writes ``best.pt`` only after an epoch that validated; without validation tiles it
    has ``last.pt`` alone.

    Args:
        path: The missing checkpoint, a path or URL.

    Returns:
        ``"; this run has no best.pt ...: use .../last.pt"`` when ``path`` is a ``best.pt``
        (``last.pt`` named beside it where that exists), else an empty string.
    """
    from landcover import storage

    folder, _, name = path.rpartition("/") if "/" in path else ("", "", path)
    if name != "best.pt":
        return ""
    why = "best.pt is written only by a run with validation tiles"
    last = f"{folder}/last.pt" if folder else "last.pt"
    if storage.is_file(last):
        return f"; {why}: use this run's last checkpoint, {last}"
    return f"; {why}: a run without validation has only last.pt"


_ZIP_MAGIC = b"PK\x03\x04"
"""How a file written by ``torch.save`` (a zip archive) starts."""


def unloadable_reason(data: bytes, exc: Exception) -> str:
    """Says, as a complete clause, why ``torch.load`` could not read a file.

    torch's own messages are long, multi-line or meaningless for a foreign file (a text file
    gives ``KeyError: '101'``), so the reason is read from the file's first bytes instead.

    Args:
        data: The file's content.
        exc: What ``torch.load`` raised.

    Returns:
        The reason, e.g. ``the file is text, not a PyTorch checkpoint``.
    """
    if not data:
        return "the file is empty (0 bytes)"
    # torch's wordings: "Unsupported global: GLOBAL x.y", and for a blocked module (os.system,
    # say) "unsupported GLOBAL posix.system whose module posix is blocked"
    unsafe = re.search(r"unsupported (?:global: )?GLOBAL ([\w.]+)", str(exc), re.I)
    if isinstance(exc, pickle.UnpicklingError) and unsafe:
        return (
            f"the file holds a Python object ({unsafe.group(1)}) besides tensors and plain "
            "data, which landcover does not load (it loads checkpoints with weights_only=True)"
        )
    if data.startswith(_ZIP_MAGIC):
        return (
            f"the file is a zip archive ({len(data)} bytes) but not a complete PyTorch "
            "checkpoint; it may be truncated or damaged"
        )
    if data[:1] == b"\x80":  # a pickle (torch's legacy format)
        return "the file is a pickle that torch cannot read as a checkpoint"
    try:
        data[:4096].decode("utf-8")
    except UnicodeDecodeError:
        return "the file is not a PyTorch checkpoint (neither torch.save's zip format nor a pickle)"
    return "the file is text, not a PyTorch checkpoint"
