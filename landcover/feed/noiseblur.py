"""The noise and blur primitives of the photometric augmentation (:mod:`.photometric`).

Sensor noise is a standard normal drawn as 16-bit codes (:func:`noise_codes`, four per 64
random bits) mapped through a table of normal quantiles (:func:`normal_table`); the blur is a
separable Gaussian (:func:`gaussian_kernels_1d`) applied in place to ``(N, H, W, C)`` patches
with reflected borders (:func:`blur_hwc_`).
"""

from __future__ import annotations

import torch

from landcover.feed.photoranges import BLUR_KERNEL

NOISE_LEVELS = 65536
"""Noise codes are 16 bits, each standing for one quantile of the standard normal."""


def gaussian_kernels_1d(sigma: torch.Tensor, size: int = BLUR_KERNEL) -> torch.Tensor:
    """Normalised 1-D Gaussian kernels, one per sigma (the blur applies one along each axis).

    Args:
        sigma: ``(N,)`` standard deviations in pixels.
        size: Kernel length (odd).

    Returns:
        ``(N, size)`` float32 kernels summing to 1.
    """
    r = torch.arange(size, device=sigma.device, dtype=torch.float32) - size // 2
    one_d = torch.exp(-(r[None, :] ** 2) / (2 * sigma.float()[:, None] ** 2))
    return one_d / one_d.sum(dim=1, keepdim=True)


def gaussian_kernels(sigma: torch.Tensor, size: int = BLUR_KERNEL) -> torch.Tensor:
    """Normalised 2-D Gaussian kernels, one per sigma (the outer product of the 1-D ones).

    Args:
        sigma: ``(N,)`` standard deviations in pixels.
        size: Kernel side (odd).

    Returns:
        ``(N, 1, size, size)`` kernels summing to 1.
    """
    one_d = gaussian_kernels_1d(sigma, size)
    return (one_d[:, :, None] * one_d[:, None, :])[:, None]


def device_generator(device: torch.device, seed: int) -> torch.Generator:
    """A seeded generator that draws tensors on ``device``.

    ``meta`` tensors (shapes without values) have no generator of their own; they take a
    CPU one.

    Args:
        device: Where the draws go.
        seed: The seed.

    Returns:
        The generator.
    """
    gen = torch.Generator() if device.type == "meta" else torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


_NORMAL_TABLES: dict[torch.device, torch.Tensor] = {}


def normal_table(device: torch.device) -> torch.Tensor:
    """The standard normal quantiles a noise code stands for.

    Args:
        device: Where the table is wanted.

    Returns:
        ``(NOISE_LEVELS,)`` float32: entry ``k`` is the normal quantile of
        ``(k + 0.5) / NOISE_LEVELS`` (from -4.32 to 4.32).
    """
    table = _NORMAL_TABLES.get(device)
    if table is None:
        u = (torch.arange(NOISE_LEVELS, dtype=torch.float64) + 0.5) / NOISE_LEVELS
        table = torch.special.ndtri(u).float().to(device)
        _NORMAL_TABLES[device] = table
    return table


def noise_codes(
    gen: torch.Generator | None,
    count: int,
    out: torch.Tensor | None = None,
    bits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Draws ``count`` uniform 16-bit noise codes (four per 64 random bits).

    Args:
        gen: The random generator (on the device wanted), or ``None`` for the default
            generator of ``out``'s device (``out`` then given).
        count: How many codes.
        out: Optional int32 tensor of ``count`` elements to write into.
        bits: Optional int64 scratch of ``ceil(count / 4)`` elements.

    Returns:
        ``(count,)`` int32 codes in ``0..NOISE_LEVELS - 1``: each 16-bit word of the bits, read
        as a signed integer, plus 32768.
    """
    device = out.device if out is not None else gen.device  # type: ignore[union-attr]
    if bits is None:
        bits = torch.empty(-(-count // 4), dtype=torch.int64, device=device)
    bits.random_(-(2**63), None, generator=gen)  # the full 64-bit range
    if out is None:
        out = torch.empty(count, dtype=torch.int32, device=device)
    out = out.view(-1)
    out.copy_(bits.view(torch.int16)[:count])
    return out.add_(NOISE_LEVELS // 2)


def blur_hwc_(y: torch.Tensor, weights: torch.Tensor, scratch: torch.Tensor) -> None:
    """Separable Gaussian blur of ``(N, H, W, C)`` patches with reflected borders, in place.

    Args:
        y: ``(N, H, W, C)`` float patches, overwritten with their blurred values.
        weights: ``(N, BLUR_KERNEL)`` 1-D kernels, one per patch.
        scratch: Float scratch of at least ``N * (H + 4) * (2 * W + 4) * C`` elements (for
            ``BLUR_KERNEL`` 5), same device.
    """
    n, h, w, c = y.shape
    r = BLUR_KERNEL // 2
    size = n * (h + 2 * r) * (w + 2 * r) * c
    padded = scratch[:size].view(n, h + 2 * r, w + 2 * r, c)
    rows = scratch[size : size + n * (h + 2 * r) * w * c].view(n, h + 2 * r, w, c)
    padded[:, r : r + h, r : r + w] = y
    for k in range(1, r + 1):  # reflect (no edge repeat): columns, then rows of the result
        padded[:, r : r + h, r - k] = y[:, :, k]
        padded[:, r : r + h, r + w - 1 + k] = y[:, :, w - 1 - k]
    for k in range(1, r + 1):
        padded[:, r - k] = padded[:, r + k]
        padded[:, r + h - 1 + k] = padded[:, r + h - 1 - k]
    wt = weights.to(y.dtype)[:, :, None, None, None]  # (N, K, 1, 1, 1)
    torch.mul(padded[:, :, 0:w], wt[:, 0], out=rows)
    for k in range(1, BLUR_KERNEL):
        rows.addcmul_(padded[:, :, k : k + w], wt[:, k])
    torch.mul(rows[:, 0:h], wt[:, 0], out=y)
    for k in range(1, BLUR_KERNEL):
        y.addcmul_(rows[:, k : k + h], wt[:, k])
