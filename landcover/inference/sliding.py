"""Sliding-window prediction with smooth blending, streamed in strips of rows.

Windows (of the training patch size in validation, larger in predict and evaluate: see
:func:`resolve_geometry`) overlap by ``overlap`` pixels; each window's class probabilities are
weighted by a window that falls off linearly toward its edges over the overlap, and the
weighted sum is divided by the summed weights, so overlapping windows cross-fade and no seams
appear at window borders.

The image is processed one row of windows at a time. After a row of windows, the image rows
above the next row of windows are final: they are yielded and dropped. Memory therefore holds
one window row (``patch`` rows x the image width) of probabilities, whatever the image height:
predicting a large tile needs no more memory than a short one of the same width.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from landcover.errors import ConfigError
from landcover.inference import tta
from landcover.inference.blend import StripBlender, StripPlan, blend_weights
from landcover.inference.tta import TRANSFORMS
from landcover.parallel.devices import autocast

RowReader = Callable[[int, int], np.ndarray]
"""Reads image rows ``[start, stop)`` as an ``(stop - start, W, C)`` uint8 array."""


def window_starts(length: int, size: int, overlap: int) -> list[int]:
    """Start offsets of windows covering ``length`` pixels.

    Args:
        length: Extent to cover.
        size: Window size.
        overlap: Overlap between neighbouring windows (less than ``size``).

    Returns:
        Offsets from 0 to ``length - size``, the last window flush with the end (``[0]`` when
        the extent is not larger than one window).
    """
    if length <= size:
        return [0]
    stride = size - overlap
    starts = list(range(0, length - size, stride))
    starts.append(length - size)
    return starts


#: Pixels per forward pass when the batch is not given: 16 windows of a 256 px patch.
DEFAULT_BATCH_PIXELS = 16 * 256 * 256
#: Largest default window: windows of 4 patches, at most this size.
MAX_DEFAULT_WINDOW = 1024

MAX_WINDOW = 8192
"""The largest ``--window``: a window of 8,192 px already holds 67 Mpx (a whole NAIP tile) and
its activations take tens of GB."""


def resolve_geometry(
    patch: int,
    window: int | None = None,
    overlap: int | None = None,
    batch_size: int | None = None,
    multiple: int = 32,
) -> tuple[int, int, int]:
    """The window size, overlap and batch of whole-tile prediction.

    A U-Net is fully convolutional, so tiles are predicted in windows larger than the
    training patch: with the same overlap (the context a window edge needs), larger windows
    recompute fewer pixels (a window of ``w`` px overlapping by ``o`` computes
    ``(w / (w - o))^2`` times the tile's pixels). The default window is four patches (at most
    1024 px, at least the patch) and the default batch keeps the pixels of a forward pass at
    16 windows of 256 px.

    Args:
        patch: The model's training patch size.
        window: Window size in pixels (default: ``min(4 * patch, 1024)``).
        overlap: Overlap between windows (default: a quarter of the patch).
        batch_size: Windows per forward pass (default: from the pixel budget).
        multiple: The window must be a multiple of this (the model's total downsampling).

    Returns:
        ``(window, overlap, batch_size)``.

    Raises:
        ConfigError: If the window or overlap does not fit.
    """
    if window is None:
        window = max(patch, min(4 * patch, MAX_DEFAULT_WINDOW))
    if window < multiple or window % multiple or window > MAX_WINDOW:
        raise ConfigError(
            f"--window {window}: must be a positive multiple of {multiple}, at most {MAX_WINDOW}"
        )
    if overlap is None:
        overlap = patch // 4
    if not 0 <= overlap < window // 2:
        raise ConfigError(f"--overlap {overlap}: must be between 0 and {window // 2 - 1}")
    if batch_size is None:
        batch_size = max(1, round(DEFAULT_BATCH_PIXELS / window**2))
    return window, overlap, batch_size


class SlidingWindowPredictor:
    """Predicts class probabilities over whole images with blended sliding windows.

    Args:
        model: The segmentation model (switched to eval mode while predicting).
        patch_size: Window size.
        overlap: Overlap between windows (less than half the window).
        batch_size: Windows per forward pass.
        prepare: Turns a ``(B, h, w, C)`` uint8 device batch into model input.
        device: The model's device.
        autocast_dtype: Autocast dtype on CUDA (e.g. ``torch.bfloat16``), or ``None``.
        tta: Test-time augmentation: names of the D4 transforms whose probabilities are
            averaged (see :mod:`landcover.inference.tta`); the identity alone is none.
    """

    def __init__(
        self,
        model: nn.Module,
        patch_size: int,
        overlap: int,
        batch_size: int,
        prepare: Callable[[torch.Tensor], torch.Tensor],
        device: torch.device,
        autocast_dtype: torch.dtype | None = None,
        tta: tuple[str, ...] = ("identity",),
    ) -> None:
        self.model = model
        self.patch = patch_size
        self.overlap = overlap
        self.batch_size = batch_size
        self.prepare = prepare
        self.device = device
        self.autocast_dtype = autocast_dtype
        self.tta = tuple(TRANSFORMS[name] for name in tta)
        self._weights: dict[int, torch.Tensor] = {}  # by window size, made when first used

    def window_probs(self, batch: torch.Tensor) -> torch.Tensor:
        """Class probabilities of a batch of windows (averaged over the TTA transforms).

        Args:
            batch: ``(B, p, p, C)`` uint8 windows on the device.

        Returns:
            ``(B, K, p, p)`` float32 probabilities.
        """
        if self.plain:
            return torch.softmax(self.window_logits(batch).float(), dim=1)
        x = self.prepare(batch)
        total: torch.Tensor | None = None
        for transform in self.tta:
            xt = tta.apply(x, transform).contiguous(memory_format=torch.channels_last)
            with autocast(self.device, self.autocast_dtype):
                logits = self.model(xt)
            probs = tta.invert(torch.softmax(logits.float(), dim=1), transform)
            total = probs if total is None else total + probs
        assert total is not None
        return total / len(self.tta)

    @property
    def plain(self) -> bool:
        """No test-time augmentation: the identity transform alone."""
        return self.tta == (TRANSFORMS["identity"],)

    def window_logits(self, batch: torch.Tensor) -> torch.Tensor:
        """The model's logits of a batch of windows (no test-time augmentation).

        Args:
            batch: ``(B, p, p, C)`` uint8 windows on the device.

        Returns:
            ``(B, K, p, p)`` logits, in the model's dtype and memory layout.
        """
        x = self.prepare(batch)
        with autocast(self.device, self.autocast_dtype):
            return self.model(x)

    def plan(self, height: int, width: int) -> StripPlan:
        """The windows covering an image.

        The window shrinks for an image smaller than it (so padding stays small).

        Args:
            height: Image height.
            width: Image width.

        Returns:
            The plan.
        """
        step = 32
        extent = -(-max(height, width) // step) * step
        smallest = (2 * self.overlap // step + 1) * step  # keeps overlap < window / 2
        p = min(self.patch, max(extent, smallest))
        ys = window_starts(max(height, p), p, self.overlap)
        xs = window_starts(max(width, p), p, self.overlap)
        return StripPlan(height, width, p, tuple(ys), tuple(xs))

    def blender(self, plan: StripPlan) -> StripBlender:
        """A blender that turns the rows of windows of ``plan`` into final strips.

        Args:
            plan: The image's windows.

        Returns:
            The blender (feed it window rows in order).
        """
        p = plan.window
        weights = self._weights.get(p)
        if weights is None:
            weights = self._weights[p] = blend_weights(p, self.overlap).to(self.device)
        if self.plain:  # the blender takes the softmax, block by block
            return StripBlender(plan, self.window_logits, self.batch_size, weights, logits=True)
        return StripBlender(plan, self.window_probs, self.batch_size, weights)

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """Puts the model in eval mode and turns off autograd; restores the mode after."""
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                yield
        finally:
            self.model.train(was_training)

    def iter_strips(
        self, read_rows: RowReader, height: int, width: int
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """Yields final probabilities strip by strip, top to bottom, one step at a time.

        Reading, predicting and yielding alternate in the caller's thread (``landcover
        predict`` overlaps them instead: :mod:`landcover.inference.pipeline`).

        Args:
            read_rows: Reads image rows (called once per row of windows).
            height: Image height.
            width: Image width.

        Yields:
            ``(row, probs)``: the first image row of the strip and ``(K, h, width)`` float32
            probabilities on the CPU; the strips cover rows ``0..height`` exactly once.
        """
        plan = self.plan(height, width)
        blender = self.blender(plan)
        with self.evaluating():
            for i in range(len(plan)):
                rows = torch.from_numpy(plan.pad(read_rows(*plan.rows(i))))
                probs = blender.add(rows.to(self.device))
                if probs is not None:  # a copy: the blender reuses its buffer
                    yield plan.strip(i)[0], probs.to("cpu", copy=True)

    def predict_array(self, image: np.ndarray) -> torch.Tensor:
        """Predicts a whole in-memory image.

        Args:
            image: ``(H, W, C)`` uint8 imagery.

        Returns:
            ``(K, H, W)`` float32 probabilities on the CPU.
        """
        height, width = image.shape[:2]
        strips = [s for _, s in self.iter_strips(lambda a, b: image[a:b], height, width)]
        return torch.cat(strips, dim=1)
