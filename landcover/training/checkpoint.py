"""Checkpoints: what they hold, atomic writes by rank 0, and safe loading.

A checkpoint is a dict of tensors and plain data only, so it loads with
``torch.load(..., weights_only=True)``. It holds the model and optimizer state, the schedule's
position, the epoch, RNG states and the resolved configuration (classes, colours, bands,
normalisation, patch size), which is all that ``predict`` needs.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import torch

from landcover.errors import CheckpointError
from landcover.training.runfolder import RunFolder

FORMAT = "landcover-checkpoint"
FORMAT_VERSION = 1


def rng_state() -> dict[str, Any]:
    """Captures the Python and torch RNG states (CPU, and CUDA when present)."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restores RNG states captured by :func:`rng_state`.

    Args:
        state: The captured states.
    """
    random.setstate(_as_tuple(state["python"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuple(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    return value


def checkpoint_state(
    model: torch.nn.Module,
    config: dict[str, Any],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    epoch: int = 0,
    best_miou: float = -1.0,
    workers: int = 1,
    scheduler: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    pixel_size_m: float | None = None,
) -> dict[str, Any]:
    """Assembles a checkpoint dict.

    Args:
        model: The bare model (not a DDP wrapper).
        config: The resolved configuration as plain data.
        optimizer: The optimizer, if training is to resume from this checkpoint.
        epoch: Completed epochs.
        best_miou: Best validation mIoU so far.
        workers: Worker count of the run that wrote it.
        scheduler: The schedule's position.
        metrics: The epoch's metrics record.
        pixel_size_m: The training pixel size in metres (``None``: unknown), under
            ``"pixel_size_m"``; predict resamples to it (older checkpoints lack the key).

    Returns:
        The checkpoint, ready for :func:`serialize`.
    """
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else {},
        "scheduler": scheduler or {},
        "epoch": epoch,
        "best_miou": best_miou,
        "workers": workers,
        "rng": rng_state(),
        "metrics": metrics or {},
        "config": config,
        "pixel_size_m": pixel_size_m,
    }


def serialize(state: dict[str, Any]) -> bytes:
    """Serialises a checkpoint dict with ``torch.save``.

    Args:
        state: The checkpoint.

    Returns:
        Its bytes.
    """
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def write_epoch_checkpoints(
    folder: RunFolder, state: dict[str, Any], epoch: int, is_best: bool, keep_last: int
) -> None:
    """Writes ``epoch-NNNN.pt``, ``last.pt`` and (if best) ``best.pt``, each atomically.

    Older per-epoch files beyond ``keep_last`` are removed after the new ones are in place.

    Args:
        folder: The run folder (local or remote).
        state: The checkpoint.
        epoch: Completed epochs.
        is_best: Whether this is the best validation mIoU so far.
        keep_last: Per-epoch checkpoints to keep.
    """
    data = serialize(state)
    if keep_last > 0:
        folder.write_checkpoint(f"epoch-{epoch:04d}.pt", data)
    folder.write_checkpoint("last.pt", data)
    if is_best:
        folder.write_checkpoint("best.pt", data)
    epochs = [n for n in folder.checkpoint_names() if n.startswith("epoch-")]
    for old in epochs[: max(0, len(epochs) - keep_last)]:
        folder.remove_checkpoint(old)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Loads a landcover checkpoint safely (``weights_only=True``) onto the CPU.

    Args:
        path: The checkpoint: a path or a blob URL.

    Returns:
        The checkpoint dict.

    Raises:
        CheckpointError: If the file is missing, corrupt, or not a landcover checkpoint.
        StorageError: If reading a remote checkpoint fails after bounded retries.
    """
    from landcover import storage

    if not storage.is_file(path):
        raise CheckpointError(f"{path}: checkpoint not found")
    data = storage.read_bytes(path)
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for corrupt or foreign files
        reason = str(exc).splitlines()[0][:120] if str(exc) else exc.__class__.__name__
        raise CheckpointError(f"{path}: not a loadable checkpoint ({reason})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a landcover checkpoint (no '{FORMAT}' marker)")
    if state.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format {state['format_version']} is newer than this "
            f"landcover understands ({FORMAT_VERSION}); upgrade landcover"
        )
    return state


def find_resume_checkpoint(folder: RunFolder) -> str | None:
    """Returns the run's ``last.pt`` if there is one (stale temporaries removed first).

    Args:
        folder: The run folder.

    Returns:
        Its path or URL, or ``None`` for a fresh run.
    """
    return (
        folder.url_of("checkpoints", "last.pt") if "last.pt" in folder.checkpoint_names() else None
    )
