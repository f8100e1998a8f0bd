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

import numpy as np
import torch
from torch import nn

from landcover.devices import autocast
from landcover.errors import ConfigError

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


def blend_weights(size: int, overlap: int) -> torch.Tensor:
    """A 2-D weight window: 1 in the middle, falling linearly to near 0 over ``overlap`` px.

    Args:
        size: Window size.
        overlap: Width of the ramp at each edge.

    Returns:
        A ``(size, size)`` float32 tensor of positive weights.
    """
    ramp = max(overlap, 1)
    i = torch.arange(size, dtype=torch.float32) + 0.5
    one_d = torch.clamp(torch.minimum(i, size - i) / ramp, max=1.0)
    return torch.outer(one_d, one_d)


#: Pixels per forward pass when the batch is not given: 16 windows of a 256 px patch.
DEFAULT_BATCH_PIXELS = 16 * 256 * 256
#: Largest default window: windows of 4 patches, at most this size.
MAX_DEFAULT_WINDOW = 1024


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
    if window < multiple or window % multiple:
        raise ConfigError(f"--window {window}: must be a positive multiple of {multiple}")
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
    ) -> None:
        self.model = model
        self.patch = patch_size
        self.overlap = overlap
        self.batch_size = batch_size
        self.prepare = prepare
        self.device = device
        self.autocast_dtype = autocast_dtype
        self.weights = blend_weights(patch_size, overlap).to(device)

    def _forward(self, crops: list[np.ndarray], weights: torch.Tensor) -> torch.Tensor:
        batch = torch.from_numpy(np.stack(crops)).to(self.device, non_blocking=True)
        with autocast(self.device, self.autocast_dtype):
            logits = self.model(self.prepare(batch))
        return torch.softmax(logits.float(), dim=1) * weights

    def _fitted_window(self, height: int, width: int) -> int:
        """The window, shrunk for an image smaller than it (so padding stays small)."""
        step = 32
        extent = -(-max(height, width) // step) * step
        smallest = (2 * self.overlap // step + 1) * step  # keeps overlap < window / 2
        return min(self.patch, max(extent, smallest))

    @torch.no_grad()
    def iter_strips(
        self, read_rows: RowReader, height: int, width: int
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """Yields final probabilities strip by strip, top to bottom.

        Args:
            read_rows: Reads image rows (called once per row of windows).
            height: Image height.
            width: Image width.

        Yields:
            ``(row, probs)``: the first image row of the strip and ``(K, h, width)`` float32
            probabilities on the CPU; the strips cover rows ``0..height`` exactly once.
        """
        was_training = self.model.training
        self.model.eval()
        p = self._fitted_window(height, width)
        weights = (
            self.weights if p == self.patch else blend_weights(p, self.overlap).to(self.device)
        )
        ph, pw = max(height, p), max(width, p)
        ys = window_starts(ph, p, self.overlap)
        xs = window_starts(pw, p, self.overlap)
        acc: torch.Tensor | None = None
        norm = torch.zeros((p, pw), device=self.device)
        try:
            for i, y in enumerate(ys):
                rows = read_rows(y, min(y + p, height))
                if rows.shape[0] < p or rows.shape[1] < pw:
                    rows = np.pad(rows, ((0, p - rows.shape[0]), (0, pw - rows.shape[1]), (0, 0)))
                for j in range(0, len(xs), self.batch_size):
                    chunk = xs[j : j + self.batch_size]
                    probs = self._forward([rows[:, x : x + p] for x in chunk], weights)
                    if acc is None:
                        acc = torch.zeros((probs.shape[1], p, pw), device=self.device)
                    for x, prob in zip(chunk, probs, strict=True):
                        acc[:, :, x : x + p] += prob
                        norm[:, x : x + p] += weights
                assert acc is not None
                done = (ys[i + 1] if i + 1 < len(ys) else ph) - y
                keep = min(done, height - y)
                if keep > 0:
                    yield y, (acc[:, :keep, :width] / norm[:keep, :width]).cpu()
                acc = torch.cat([acc[:, done:], torch.zeros_like(acc[:, :done])], dim=1)
                norm = torch.cat([norm[done:], torch.zeros_like(norm[:done])], dim=0)
        finally:
            self.model.train(was_training)

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
