"""The photometric pass over a batch, chunk by chunk (:class:`~.photometric.PhotometricDraw`).

On the CPU the batch goes one patch at a time, its scratch in cache and reused; elsewhere (a
GPU) in one chunk, where each operation is a kernel launch and a small batch's step is bound by
launches (issue 43): there the constant index tensors come from a cache
(:func:`lookup_rows`), the blur is a reflect pad and two depthwise convolutions over the whole
chunk (:func:`blur_chunk_`; a patch not blurred has a unit-impulse kernel) and the
standardisation broadcasts its ``(B, C)`` factors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F

from landcover.feed.noiseblur import (
    BLUR_KERNEL,
    blur_hwc_,
    device_generator,
    noise_codes,
    normal_table,
)


class Draw(Protocol):
    """What the pass reads of a :class:`~.photometric.PhotometricDraw`."""

    shape: tuple[int, int, int, int]
    chosen: torch.Tensor
    blurred: torch.Tensor
    noise_sd: torch.Tensor
    noise_seed: int
    kernels: torch.Tensor
    every: bool


Fill = Callable[[int, int, torch.Tensor, torch.Tensor], None]
"""Writes ``x ** gamma * gain + offset`` of patches ``start:stop`` into a ``(n, H, W, C)``
float chunk, given an int32 scratch of as many elements."""

_CONSTANTS: dict[tuple[object, ...], torch.Tensor] = {}


def _cached(
    key: tuple[object, ...], device: torch.device, make: Callable[[], torch.Tensor]
) -> torch.Tensor:
    """A constant tensor made once per key.

    One made during a CUDA graph capture is not kept: its kernels only run on replay.
    """
    value = _CONSTANTS.get(key)
    if value is None:
        value = make()
        if not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
            _CONSTANTS[key] = value
    return value


def lookup_base(device: torch.device) -> torch.Tensor:
    """Every value a uint8 takes on the 0..1 scale, clamped: the lookup tables' input.

    Args:
        device: Where it is wanted.

    Returns:
        ``(1, 1, 256)`` float32.
    """

    def make() -> torch.Tensor:
        values = torch.arange(256, device=device, dtype=torch.float32) * (1.0 / 255.0)
        return values.clamp(min=0.0, max=1.0).view(1, 1, 256)

    return _cached(("base", device), device, make)


def lookup_rows(device: torch.device, b: int, c: int, w: int) -> torch.Tensor:
    """Each (patch, band)'s first entry in the batch's lookup tables, along an image row.

    Args:
        device: Where it is wanted.
        b: Patches.
        c: Bands.
        w: Image width.

    Returns:
        ``(B, 1, W * C)`` int32: ``patch * C * 256 + band * 256``.
    """

    def make() -> torch.Tensor:
        band = (torch.arange(c, device=device, dtype=torch.int32) * 256).repeat(w)
        patch = torch.arange(b, device=device, dtype=torch.int32) * (c * 256)
        return (patch[:, None] + band[None]).view(b, 1, w * c)

    return _cached(("rows", device, b, c, w), device, make)


def blur_chunk_(y: torch.Tensor, kernels: torch.Tensor) -> None:
    """Separable Gaussian blur of ``(N, H, W, C)`` patches, reflected borders, in place.

    The same blur as :func:`~landcover.feed.noiseblur.blur_hwc_` (to float rounding) in a few
    operations: the patches as ``N * C`` planes, reflect-padded, through two depthwise
    convolutions (along the rows, then the columns) with each patch's kernel for its bands.

    Args:
        y: ``(N, H, W, C)`` float patches, overwritten with their blurred values.
        kernels: ``(N, BLUR_KERNEL)`` 1-D kernels, one per patch.
    """
    n, h, w, c = y.shape
    r = BLUR_KERNEL // 2
    planes = y.permute(0, 3, 1, 2).reshape(1, n * c, h, w)
    padded = F.pad(planes, (r, r, r, r), mode="reflect")
    weights = kernels.to(y.dtype)[:, None].expand(n, c, BLUR_KERNEL).reshape(n * c, 1, 1, -1)
    rows = F.conv2d(padded, weights, groups=n * c)  # along W
    both = F.conv2d(rows, weights.view(n * c, 1, -1, 1), groups=n * c)  # along H
    y.copy_(both.view(n, c, h, w).permute(0, 2, 3, 1))


def run_pass(
    draw: Draw,
    fill: Fill,
    device: torch.device,
    scale: torch.Tensor | None,
    shift: torch.Tensor | None,
    cpu_chunk: int = 1,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """The pass shared by ``apply`` and ``apply_uint8``, chunk by chunk.

    Args:
        draw: The perturbation.
        fill: Writes ``x ** gamma * gain + offset`` of patches ``start:stop`` (:data:`Fill`).
        device: The batch's device.
        scale: Optional ``(B, C)`` or ``(1, C)`` factor applied after the clamp.
        shift: Optional ``(B, C)`` or ``(1, C)`` term subtracted after ``scale``.
        cpu_chunk: Patches processed together on the CPU (one chunk elsewhere).
        valid: Optional ``(B, H, W, 1)`` bool: the pixels with data. The others (no data) are
            0 before the standardisation, as an unperturbed no-data pixel is.

    Returns:
        ``(B, C, H, W)`` float32, memory channels-last.
    """
    b, c, h, w = draw.shape
    out = torch.empty((b, h, w, c), dtype=torch.float32, device=device)
    step = cpu_chunk if device.type == "cpu" else b
    one_chunk = step >= b  # a GPU's: few operations
    index = torch.empty((min(step, b), h, w, c), dtype=torch.int32, device=device)
    noise = torch.empty((min(step, b), h, w, c), dtype=torch.float32, device=device)
    bits = torch.empty(-(-h * w * c // 4), dtype=torch.int64, device=device)
    scratch: torch.Tensor | None = None  # the blur's, made when a patch is blurred
    chosen, blurred = draw.chosen.tolist(), draw.blurred.tolist()  # on the host
    kernels = draw.kernels
    table = normal_table(device)
    gen = None if draw.every else device_generator(device, draw.noise_seed)
    rows = None
    if not one_chunk and (scale is not None or shift is not None):
        ones = torch.ones((1, c), device=device)
        scale_rows = (ones if scale is None else scale).float().repeat(1, w)
        shift_rows = (0 * ones if shift is None else shift).float().repeat(1, w)
        rows = (scale_rows[:, None], shift_rows[:, None])  # (B or 1, 1, W * C)
    for start in range(0, b, step):
        stop = min(start + step, b)
        chunk = out[start:stop]
        fill(start, stop, chunk, index)
        noisy = [i for i in range(start, stop) if chosen[i]]
        if noisy:
            k, n = len(noisy), h * w * c
            codes, values = index[:k], noise[:k]
            if n % 4 == 0:  # one draw: the codes of one draw a patch, in a few kernels
                noise_codes(gen, k * n, codes, bits if k == 1 else None)
            else:
                for patch in codes:  # one draw per patch: the same codes whatever the chunks
                    noise_codes(gen, n, patch, bits)
            torch.index_select(table, 0, codes.view(-1), out=values.view(-1))
            if k == stop - start:
                chunk.addcmul_(values, draw.noise_sd[start:stop].view(k, 1, 1, 1))
            else:
                idx = torch.tensor(noisy).to(device, non_blocking=True)
                out.index_add_(0, idx, values.mul_(draw.noise_sd[idx].view(k, 1, 1, 1)))
        smooth = [i for i in range(start, stop) if blurred[i]]
        if smooth and one_chunk:  # every patch: the others' kernels are unit impulses
            blur_chunk_(chunk, kernels)
        elif smooth:
            if scratch is None:  # reused: fresh memory costs its page faults
                r = BLUR_KERNEL // 2
                scratch = out.new_empty(len(index) * (h + 2 * r) * (2 * w + 2 * r) * c)
            if len(smooth) == stop - start:
                blur_hwc_(chunk, kernels[start:stop], scratch)
            else:
                idx = torch.tensor(smooth).to(device, non_blocking=True)
                patches = out.index_select(0, idx)
                blur_hwc_(patches, kernels[idx], scratch)
                out.index_copy_(0, idx, patches)
        chunk.clamp_(min=0.0, max=1.0)
        if valid is not None:
            chunk.mul_(valid[start:stop])
        if one_chunk:
            if scale is not None:
                chunk.mul_(scale.float().view(-1, 1, 1, c))
            if shift is not None:
                chunk.sub_(shift.float().view(-1, 1, 1, c))
        elif rows is not None:
            s, t = (v if len(v) == 1 else v[start:stop] for v in rows)
            flat = chunk.view(stop - start, h, w * c)
            flat.mul_(s).sub_(t)
    return out.permute(0, 3, 1, 2)
