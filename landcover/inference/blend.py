"""Blending overlapping windows into final strips, one row of windows at a time.

Windows overlap by ``overlap`` pixels; each window's class probabilities are weighted by a
window that falls off linearly toward its edges over the overlap (:func:`blend_weights`), and
the weighted sum is divided by the summed weights, so overlapping windows cross-fade and no
seams appear at window borders. :class:`StripPlan` says which windows cover an image and which
image rows each row of windows finishes; :class:`StripBlender` accumulates them.

Without test-time augmentation the blender takes the softmax of each window's logits itself
(:func:`add_weighted_softmax`): on the CPU a block of rows at a time, so that the logits'
copy out of the model's channels-last layout, the softmax, the weighting and the sum pass over
data that stays in a core's cache (``benchmarks/blend_bench.py``). The numbers are the same
as a softmax of the whole window, weighted and added.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch


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


SOFTMAX_ROWS = 64
"""Rows of a window taken at once by :func:`add_weighted_softmax` on the CPU: 6 classes x 64 x
1,024 px of float32 is 1.5 MB."""

ALIGN = 64
"""A block is a whole number of 64 values: torch's softmax over the classes runs a vector loop
over the pixels, whose tail (where a block's pixels are not a whole number of vectors) may round
in the last bit otherwise than the whole window's loop; without a tail the numbers are the
same. Predict's windows are multiples of 32 px, so their 64-row blocks always are."""


def put(acc: torch.Tensor, values: torch.Tensor, rows: int, cols: int) -> None:
    """Adds ``values`` into the sums of ``acc`` and writes them over what is not a sum yet.

    The top ``rows`` rows and the left ``cols`` columns of ``acc`` hold sums (of the row of
    windows above, or of the window to the left); the rest holds nothing yet, and writing
    there gives the numbers that adding to zero would, without zeroing it first or reading it.

    Args:
        acc: ``(..., h, w)`` accumulator view.
        values: Values of the same shape (none negative, so ``0 + v`` is ``v``).
        rows: Leading rows of ``acc`` that hold sums.
        cols: Leading columns of ``acc`` (below those rows) that hold sums.
    """
    if rows > 0:
        acc[..., :rows, :] += values[..., :rows, :]
    if cols > 0:
        acc[..., rows:, :cols] += values[..., rows:, :cols]
    acc[..., rows:, cols:] = values[..., rows:, cols:]


def add_weighted_softmax(
    acc: torch.Tensor,
    logits: torch.Tensor,
    weights: torch.Tensor,
    rows: int,
    summed: tuple[int, int] | None = None,
) -> None:
    """Adds a window's class probabilities, weighted, into ``acc``: ``rows`` rows at a time.

    ``acc += softmax(logits, dim=0) * weights``, element for element the same numbers as the
    whole window's softmax, weighted, then added.

    Args:
        acc: ``(K, p, p)`` float32 sums to add into (a view of the blender's accumulator).
        logits: ``(K, p, p)`` logits of one window, in any layout and floating dtype.
        weights: ``(p, p)`` blending weights.
        rows: Rows per block (the whole window in one block where launches cost more than
            memory traffic, as on a GPU).
        summed: ``(rows, cols)`` of ``acc`` that hold sums, the rest written over (:func:`put`);
            ``None``: all of it holds sums.
    """
    k, p, width = logits.shape
    rows = min(rows, p)
    if rows * width % ALIGN:  # a tail in softmax's vector loop might round another way
        rows = p
    top, cols = summed if summed is not None else (p, width)
    buf = torch.empty((k, rows, width), device=logits.device)
    for r in range(0, p, rows):
        block = buf[:, : min(rows, p - r)]
        block.copy_(logits[:, r : r + rows])  # to float32, class-major
        probs = torch.softmax(block, dim=0).mul_(weights[r : r + rows])
        put(acc[:, r : r + rows], probs, min(max(top - r, 0), probs.shape[1]), cols)


@dataclass(frozen=True)
class StripPlan:
    """How an image is covered by rows of windows, and which rows each window row finishes.

    Attributes:
        height: Image height.
        width: Image width.
        window: Window size (shrunk for an image smaller than the predictor's window).
        ys: First image row of each row of windows.
        xs: First image column of each window in a row.
    """

    height: int
    width: int
    window: int
    ys: tuple[int, ...]
    xs: tuple[int, ...]

    def __len__(self) -> int:
        """Number of rows of windows."""
        return len(self.ys)

    @property
    def padded_width(self) -> int:
        """Width of a row of windows (the image, or one window if the image is narrower)."""
        return max(self.width, self.window)

    def rows(self, i: int) -> tuple[int, int]:
        """Image rows ``[start, stop)`` read for window row ``i`` (fewer at the image's end).

        Args:
            i: The window row.

        Returns:
            ``(start, stop)``.
        """
        return self.ys[i], min(self.ys[i] + self.window, self.height)

    def done(self, i: int) -> int:
        """Rows of the accumulator that are final after window row ``i`` (then dropped).

        Args:
            i: The window row.

        Returns:
            The rows from ``ys[i]`` up to the next window row (or the padded end).
        """
        end = self.ys[i + 1] if i + 1 < len(self.ys) else max(self.height, self.window)
        return end - self.ys[i]

    def strip(self, i: int) -> tuple[int, int]:
        """The image rows that are final after window row ``i``.

        Args:
            i: The window row.

        Returns:
            ``(first row, number of rows)``; the strips of all window rows cover the image's
            rows exactly once.
        """
        return self.ys[i], max(0, min(self.done(i), self.height - self.ys[i]))

    def pad(self, rows: np.ndarray) -> np.ndarray:
        """Zero-pads rows read for a window row to ``(window, padded_width, C)``.

        Args:
            rows: ``(h, width, C)`` image rows.

        Returns:
            A C-contiguous ``(window, padded_width, C)`` array.
        """
        h, w = rows.shape[:2]
        if h < self.window or w < self.padded_width:
            pad = ((0, self.window - h), (0, self.padded_width - w), (0, 0))
            return np.pad(rows, pad)
        return np.ascontiguousarray(rows)


class StripBlender:
    """Accumulates the blended probabilities of one image, one row of windows at a time.

    Holds one row of windows' worth of probabilities (``window`` rows x the padded width):
    after each row of windows, the rows above the next row of windows are final; they are
    returned and the accumulator shifts up in place.

    Args:
        plan: The image's windows.
        window_probs: Class probabilities ``(B, K, p, p)`` of a batch of ``(B, p, p, C)``
            uint8 windows on the device, or their logits with ``logits``.
        batch_size: Windows per call of ``window_probs``.
        weights: The ``(p, p)`` blending weights of the plan's window (:func:`blend_weights`).
        logits: ``window_probs`` returns logits, whose softmax the blender takes
            (:func:`add_weighted_softmax`).
    """

    def __init__(
        self,
        plan: StripPlan,
        window_probs: Callable[[torch.Tensor], torch.Tensor],
        batch_size: int,
        weights: torch.Tensor,
        logits: bool = False,
    ) -> None:
        self.plan = plan
        self.window_probs = window_probs
        self.batch_size = batch_size
        self.weights = weights
        self.logits = logits
        self.softmax_rows = SOFTMAX_ROWS if weights.device.type == "cpu" else plan.window
        self.acc: torch.Tensor | None = None
        self.out: torch.Tensor | None = None
        self.norm = torch.empty((plan.window, plan.padded_width), device=weights.device)
        self.row = 0
        self.carried = 0
        """Top rows of the accumulators that hold the row of windows above's sums; below
        them, each window writes over what no window of this row has added to yet."""

    def add(self, rows: torch.Tensor) -> torch.Tensor | None:
        """Predicts the next row of windows and returns the rows it makes final.

        The arithmetic is that of a plain loop (each window's probabilities times the
        weights, added in window order, divided by the summed weights), done in place in
        buffers kept from row to row: no full-strip tensor is allocated per row, and none is
        zeroed (a window writes where no window has added yet: :func:`put`).

        Args:
            rows: ``(window, padded_width, C)`` uint8 image rows on the device (see
                :meth:`StripPlan.pad`), for window row ``self.row``.

        Returns:
            ``(K, h, width)`` float32 probabilities of the strip ``plan.strip(row)`` on the
            device, or ``None`` when the row finishes no image row. The tensor is a view of
            a buffer the next call overwrites: use it (or copy it) before then.
        """
        plan, p, batch = self.plan, self.plan.window, self.batch_size
        end = 0  # the columns the windows of this row have covered so far
        for j in range(0, len(plan.xs), batch):
            chunk = plan.xs[j : j + batch]
            crops = torch.stack([rows[:, x : x + p] for x in chunk])
            scores = self.window_probs(crops)
            if self.acc is None:
                k = scores.shape[1]
                self.acc = torch.empty((k, p, plan.padded_width), device=scores.device)
                self.out = torch.empty((k, p, plan.width), device=scores.device)
            if not self.logits:
                scores = scores.mul_(self.weights)
            for x, score in zip(chunk, scores, strict=True):
                summed = (self.carried, max(0, end - x))
                acc = self.acc[:, :, x : x + p]
                if self.logits:
                    add_weighted_softmax(acc, score, self.weights, self.softmax_rows, summed)
                else:
                    put(acc, score, *summed)
                put(self.norm[:, x : x + p], self.weights, *summed)
                end = x + p
            del scores
        assert self.acc is not None and self.out is not None
        _, keep = plan.strip(self.row)
        out = None
        if keep:
            out = self.out[:, :keep]
            torch.div(self.acc[:, :keep, : plan.width], self.norm[:keep, : plan.width], out=out)
        done = plan.done(self.row)
        rest = p - done
        if rest > 0:  # the overlap rows carry over; the next row's windows write the rest
            self.acc[:, :rest] = self.acc[:, done:].clone()
            self.norm[:rest] = self.norm[done:].clone()
        self.carried = max(rest, 0)
        self.row += 1
        return out
