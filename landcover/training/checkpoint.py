"""Checkpoints in training: each rank's RNG state, atomic writes by rank 0, finding the resume.

The format itself (the typed :class:`~landcover.checkpoint.Checkpoint` record, saving and safe
loading) is :mod:`landcover.checkpoint`, shared with inference.

RNG states are kept per rank: rank r restores the state rank r saved, so a resumed run draws
what it would have drawn. A rank that did not exist when the checkpoint was written (the run
resumes on more workers) keeps its fresh seeded state. On CUDA each rank saves and restores
only its own device's generator, so a checkpoint written on an 8-GPU node resumes on a node
with fewer GPUs (or none).
"""

from __future__ import annotations

import logging
import random
from typing import Any

import torch

from landcover import storage
from landcover.checkpoint import Checkpoint
from landcover.parallel.engine import Engine
from landcover.training.runfolder import RunFolder

log = logging.getLogger("landcover")


def rng_state(device: torch.device | None = None) -> dict[str, Any]:
    """Captures this process's Python and torch RNG states (and its own CUDA device's).

    Args:
        device: The worker's device; a CUDA device adds that device's generator state.

    Returns:
        The states.
    """
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def gather_rng_states(engine: Engine, device: torch.device | None = None) -> list[dict[str, Any]]:
    """Every rank's RNG states, by rank (a collective: every worker calls it).

    Args:
        engine: The engine the worker joined.
        device: This worker's device.

    Returns:
        The states of all ranks.
    """
    return engine.all_gather_object(rng_state(device))


def cuda_state_for(state: dict[str, Any], local_rank: int) -> torch.Tensor | None:
    """The CUDA generator state a rank should restore from its saved states.

    Format 2 saves one device's state (a tensor); format 1 saved every device's of rank 0's
    node (a list), of which the rank takes its own local device's, if that device existed.

    Args:
        state: One rank's saved states.
        local_rank: The restoring worker's local rank.

    Returns:
        The state, or ``None`` when there is none for this device.
    """
    saved = state.get("cuda")
    if isinstance(saved, torch.Tensor):
        return saved
    if isinstance(saved, list | tuple) and local_rank < len(saved):
        return saved[local_rank]
    return None


def restore_rng_state(
    states: list[dict[str, Any]], rank: int, device: torch.device | None = None
) -> bool:
    """Restores the RNG states this rank saved, if it saved any.

    Args:
        states: Every rank's saved states, by rank.
        rank: This worker's global rank.
        device: This worker's device (CUDA: its generator is restored).

    Returns:
        Whether a saved state was restored (False for a rank new to the run).
    """
    if rank >= len(states):
        return False
    state = states[rank]
    random.setstate(_as_tuple(state["python"]))
    torch.set_rng_state(state["torch"])
    if device is not None and device.type == "cuda":
        cuda = cuda_state_for(state, device.index or 0)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)
    return True


def _as_tuple(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    return value


def write_epoch_checkpoints(
    folder: RunFolder, checkpoint: Checkpoint, epoch: int, is_best: bool, keep_last: int
) -> None:
    """Writes ``last.pt``, ``epoch-NNNN.pt`` and (if best) ``best.pt``, each atomically.

    ``last.pt`` comes first: a disk that fills after it leaves the rerun its newest epoch to
    resume from. Older per-epoch files beyond ``keep_last`` are removed after the new ones are
    in place.

    Args:
        folder: The run folder (local or remote).
        checkpoint: The checkpoint.
        epoch: Completed epochs.
        is_best: Whether this is the best validation mIoU so far.
        keep_last: Per-epoch checkpoints to keep.
    """
    data = checkpoint.serialize()
    folder.write_checkpoint("last.pt", data)
    if keep_last > 0:
        folder.write_checkpoint(f"epoch-{epoch:04d}.pt", data)
    if is_best:
        folder.write_checkpoint("best.pt", data)
    epochs = [n for n in folder.checkpoint_names() if n.startswith("epoch-")]
    for old in epochs[: max(0, len(epochs) - keep_last)]:
        folder.remove_checkpoint(old)


def restore_best(folder: RunFolder, resumed: str, state: Checkpoint, writer: bool) -> bool:
    """Writes ``best.pt`` again from the checkpoint resumed from, if it was the best epoch.

    Only where ``best.pt`` is not that checkpoint already. ``last.pt`` is written before
    ``best.pt``: a run stopped between the two (a full disk, a kill) resumes with that epoch's
    best mIoU already counted, and no later epoch need beat it, so ``best.pt`` would stay
    missing, or an older epoch's.

    Args:
        folder: The run folder.
        resumed: The checkpoint resumed from.
        state: Its contents (its own validation mIoU against the run's best).
        writer: Whether this worker writes the run's checkpoints (rank 0).

    Returns:
        Whether ``best.pt`` was written.
    """
    own_miou = (state.metrics or {}).get("val_miou")
    if not writer or own_miou is None or own_miou != state.best_miou:  # not the best epoch
        return False
    data = storage.read_bytes(resumed)
    best = folder.url_of("checkpoints", "best.pt")
    if storage.exists(best) and storage.read_bytes(best) == data:
        return False
    folder.write_checkpoint("best.pt", data)
    log.info("best.pt written again from %s (its epoch was the best)", resumed)
    return True


def find_resume_checkpoint(folder: RunFolder, clean: bool = True) -> str | None:
    """Returns the run's ``last.pt``, or without one its newest ``epoch-NNNN.pt``.

    (Stale temporaries are removed first, with ``clean``.) An epoch file without ``last.pt`` is
    left by a run whose ``last.pt`` was removed, or by one written before ``last.pt`` came
    first.

    Args:
        folder: The run folder.
        clean: Remove stale temporaries (not before the worker holds the folder's lock).

    Returns:
        Its path or URL, or ``None`` for a fresh run.
    """
    names = folder.checkpoint_names(clean)
    if "last.pt" in names:
        return folder.url_of("checkpoints", "last.pt")
    epochs = sorted(n for n in names if n.startswith("epoch-"))
    return folder.url_of("checkpoints", epochs[-1]) if epochs else None
