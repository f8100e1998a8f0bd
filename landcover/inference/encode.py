"""A strip of blended class probabilities, encoded as the maps store it.

The class map is the first arg-max over the classes (:func:`first_argmax`); the probability
map is ``round(p x 255)`` in uint8 or float32 as it is. Encoding runs where the probabilities
are (on a GPU, only the uint8 results cross to the host); :class:`EncodedStrip` is what the map
writers (:mod:`landcover.inference.writers`) take.

On a GPU the results cross without stopping the thread that feeds the device
(:func:`encode_strip`): they are copied into pinned host memory behind the device's queued
work, and the writer thread, not the device's, waits for the copy (:meth:`EncodedStrip.wait`).
A ``.cpu()`` per strip would make the device's thread wait for every queued window before it
queues the next row's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class EncodedStrip:
    """A strip of finished maps, ready to write.

    Attributes:
        row: First image row of the strip.
        classes: ``(h, W)`` uint8 class indices (no-data not yet applied).
        probs: ``(K, h, W)`` probabilities as written: uint8 (x 255) or float32; ``None``
            when no probability map is written (``--no-probs``).
        valid: ``(h, W)`` bool, False where the input has no data.
        copied: Recorded on the device after the copies to the host were queued; the arrays
            hold their values once it has completed (``None``: they already do).
    """

    row: int
    classes: np.ndarray
    probs: np.ndarray | None
    valid: np.ndarray
    copied: torch.cuda.Event | None = None

    def wait(self) -> None:
        """Waits until the arrays hold their values (the device's copies have completed)."""
        if self.copied is not None:
            self.copied.synchronize()
            self.copied = None


def first_argmax(probs: torch.Tensor) -> torch.Tensor:
    """The index of the first maximum along dim 0, as uint8 (``torch.argmax(probs, 0)``).

    On the CPU, ``argmax`` over the outer dimension of a ``(K, h, W)`` tensor is over 10x
    slower than these ``K`` element-wise passes. Class ``k`` takes a pixel where it beats the
    best so far and every earlier index is below ``k``, so the index becomes ``max(index, k *
    [p_k > best])``: at least 2.4x faster than setting it with ``masked_fill_`` (1.9x on 2
    threads; ``benchmarks/blend_bench.py``). Both return the first index of a tie.

    Args:
        probs: ``(K, h, W)`` finite values, ``K <= 255``.

    Returns:
        ``(h, W)`` uint8 indices.
    """
    best = probs[0].clone()
    index = torch.zeros(best.shape, dtype=torch.uint8, device=probs.device)
    larger = torch.empty(best.shape, dtype=torch.bool, device=probs.device)
    scaled = larger.view(torch.uint8)  # the comparison's bytes, 0 or 1, as numbers
    for k in range(1, probs.shape[0]):
        torch.gt(probs[k], best, out=larger)  # where class k beats the best so far
        torch.maximum(index, scaled.mul_(k), out=index)
        torch.maximum(best, probs[k], out=best)
    return index


def encode_probs(
    probs: torch.Tensor, prob_dtype: str | None, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Turns a strip of probabilities into class indices and stored probabilities.

    Runs where ``probs`` lives (on a GPU only the uint8 results cross to the host).

    Args:
        probs: ``(K, h, W)`` float32 probabilities.
        prob_dtype: ``uint8`` (``round(p x 255)``, ties to even), ``float32``, or ``None``
            when no probabilities are stored (only the arg-max is made).
        overwrite: ``probs`` is scratch: the uint8 scaling may be done in it, in place.

    Returns:
        ``(classes, stored)``: ``(h, W)`` uint8 argmax and ``(K, h, W)`` stored probabilities
        (``None`` without ``prob_dtype``), numpy arrays on the host.
    """
    classes, stored = _encoded(probs, prob_dtype, overwrite)
    if stored is None:
        return classes.cpu().numpy(), None
    # float32 probabilities are ``probs`` itself, a buffer its owner reuses: copied
    return classes.cpu().numpy(), stored.to("cpu", copy=stored is probs).numpy()


def _encoded(
    probs: torch.Tensor, prob_dtype: str | None, overwrite: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Class indices and stored probabilities, as tensors where ``probs`` lives.

    As :func:`encode_probs` encodes them; float32 probabilities are ``probs`` itself.
    """
    classes = first_argmax(probs)
    if prob_dtype != "uint8":
        return classes, None if prob_dtype is None else probs
    scaled = probs.mul_(255.0) if overwrite else probs.mul(255.0)
    return classes, scaled.round_().to(torch.uint8)


def encode_strip(
    probs: torch.Tensor, prob_dtype: str | None, row: int, valid: np.ndarray
) -> EncodedStrip:
    """Encodes a strip (:func:`encode_probs`); on a GPU, copies the results without waiting.

    ``probs`` is scratch (scaled in place). On a CUDA device the uint8 (or float32) results are
    copied into pinned host memory asynchronously, behind the work already queued; the strip's
    :meth:`EncodedStrip.wait` waits for them (the map writer calls it).

    Args:
        probs: ``(K, h, W)`` float32 probabilities (on the host or a device).
        prob_dtype: ``uint8``, ``float32``, or ``None`` (the class map alone).
        row: First image row of the strip.
        valid: ``(h, W)`` bool validity of the strip's pixels.

    Returns:
        The encoded strip.
    """
    if probs.device.type != "cuda":
        classes, stored = encode_probs(probs, prob_dtype, overwrite=True)
        return EncodedStrip(row, classes, stored, valid)
    classes, stored = _encoded(probs, prob_dtype, overwrite=True)
    host = [_to_pinned(t) for t in (classes, stored) if t is not None]
    copied = torch.cuda.Event()
    copied.record()
    arrays = [t.numpy() for t in host]  # each array holds its pinned tensor
    return EncodedStrip(row, arrays[0], arrays[1] if stored is not None else None, valid, copied)


def _to_pinned(tensor: torch.Tensor) -> torch.Tensor:
    """A pinned host copy of a device tensor, queued behind the device's work (not waited for)."""
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor, non_blocking=True)
    return host
