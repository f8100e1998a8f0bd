"""Photometric augmentation of 4-band imagery, batched on the device, for shift between flights.

NAIP flights differ by tens of digital numbers per band (camera, contractor, sun, haze) and
autumn flights have a lower NIR and browner fields. This module perturbs a whole
``(B, C, H, W)`` float batch on the 0..1 scale (after the uint8 patches reached the device,
before normalisation) with, per patch drawn with probability ``p``:

- a per-band gain (contrast, log-uniform; covers an autumn NIR drop of a third),
- a per-band offset (brightness / channel shift, uniform, tens of DN),
- a per-patch gamma (log-uniform),
- Gaussian sensor noise (per-patch standard deviation, uniform),
- a Gaussian blur (haze, defocus, resampling), with probability ``blur_p``.

Labels are never touched and no pixel moves: image and label stay aligned. Why our own and not
albumentations: the pass works on the float batch where training already has it (on the GPU in
a CUDA run, where a few element-wise operations over a batch cost next to nothing and no CPU
time is taken from the sampler), its draws come from a ``torch.Generator`` the caller seeds
per (seed, rank, epoch) (a batch stays reproducible, also on resume), it needs no dependency,
and its arithmetic is exact enough to test against numpy. On the CPU it is the slower one:
``benchmarks/augment_bench.py`` measured 64 patches of 256 px on one shared core at 2.1 s,
against 0.44 s for albumentations 2.0.8 per patch (uint8 lookup tables in OpenCV), so CPU-only
runs pay for it (``data.photometric`` is off by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class PhotometricRanges:
    """The ranges a perturbed patch draws from, at strength 1.

    Attributes:
        gain: ``(low, high)`` per-band multiplicative gain (log-uniform).
        offset: Largest per-band additive offset on the 0..1 scale (uniform in +-offset;
            0.12 is about 30 DN).
        gamma: ``(low, high)`` per-patch gamma (log-uniform), applied as ``x ** gamma``.
        noise: Largest per-patch noise standard deviation on the 0..1 scale (0.02: 5 DN).
        blur_p: Probability that a perturbed patch is blurred.
        blur_sigma: ``(low, high)`` blur sigma in pixels (uniform).
    """

    gain: tuple[float, float] = (0.67, 1.5)
    offset: float = 0.12
    gamma: tuple[float, float] = (0.7, 1.4)
    noise: float = 0.02
    blur_p: float = 0.25
    blur_sigma: tuple[float, float] = (0.4, 1.2)

    def scaled(self, strength: float) -> PhotometricRanges:
        """The ranges shrunk (or widened) toward the identity by ``strength``.

        Args:
            strength: 1 keeps the ranges; 0.5 halves log-gains, offsets, log-gammas, noise.

        Returns:
            The scaled ranges.
        """

        def log_range(r: tuple[float, float]) -> tuple[float, float]:
            return (math.exp(strength * math.log(r[0])), math.exp(strength * math.log(r[1])))

        return PhotometricRanges(
            gain=log_range(self.gain),
            offset=self.offset * strength,
            gamma=log_range(self.gamma),
            noise=self.noise * strength,
            blur_p=self.blur_p,
            blur_sigma=self.blur_sigma,
        )


BLUR_KERNEL = 5
"""Side of the blur kernel (sigma up to about 1.2 px fits in it)."""


def _log_uniform(
    low: float, high: float, shape: tuple[int, ...], gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    u = torch.rand(shape, generator=gen, device=device)
    return torch.exp(math.log(low) + u * (math.log(high) - math.log(low)))


def gaussian_kernels(sigma: torch.Tensor, size: int = BLUR_KERNEL) -> torch.Tensor:
    """Normalised 2-D Gaussian kernels, one per sigma.

    Args:
        sigma: ``(N,)`` standard deviations in pixels.
        size: Kernel side (odd).

    Returns:
        ``(N, 1, size, size)`` kernels summing to 1.
    """
    r = torch.arange(size, device=sigma.device, dtype=torch.float32) - size // 2
    one_d = torch.exp(-(r[None, :] ** 2) / (2 * sigma[:, None] ** 2))
    one_d = one_d / one_d.sum(dim=1, keepdim=True)
    return (one_d[:, :, None] * one_d[:, None, :])[:, None]


@dataclass
class PhotometricDraw:
    """The perturbation of one batch: identity values for the patches not chosen.

    Attributes:
        gain: ``(B, C, 1, 1)`` per-band gain.
        offset: ``(B, C, 1, 1)`` per-band offset (0..1 scale).
        gamma: ``(B, 1, 1, 1)`` per-patch gamma.
        noise: ``(B, C, H, W)`` additive noise (0..1 scale; zeros where not chosen).
        blur_sigma: ``(B,)`` blur sigma in pixels; 0 where a patch is not blurred.
    """

    gain: torch.Tensor
    offset: torch.Tensor
    gamma: torch.Tensor
    noise: torch.Tensor
    blur_sigma: torch.Tensor

    @classmethod
    def draw(
        cls,
        shape: torch.Size,
        p: float,
        gen: torch.Generator,
        ranges: PhotometricRanges,
        device: torch.device,
    ) -> PhotometricDraw:
        """Draws a batch's perturbation.

        Args:
            shape: The batch's ``(B, C, H, W)``.
            p: Probability that a patch is perturbed.
            gen: The random generator (on ``device``).
            ranges: The ranges.
            device: The batch's device.

        Returns:
            The draw.
        """
        b, c = shape[0], shape[1]
        r = ranges

        def rand(*size: int) -> torch.Tensor:
            return torch.rand(size, generator=gen, device=device)

        chosen = (rand(b, 1, 1, 1) < p).float()
        gain = _log_uniform(*r.gain, (b, c, 1, 1), gen, device)
        offset = (rand(b, c, 1, 1) * 2 - 1) * r.offset
        gamma = _log_uniform(*r.gamma, (b, 1, 1, 1), gen, device)
        noise_sd = rand(b, 1, 1, 1) * r.noise * chosen
        blurred = (rand(b) < r.blur_p).float() * chosen.view(-1)
        sigma = r.blur_sigma[0] + rand(b) * (r.blur_sigma[1] - r.blur_sigma[0])
        noise = torch.randn(tuple(shape), generator=gen, device=device) * noise_sd
        return cls(
            gain=1 + chosen * (gain - 1),
            offset=chosen * offset,
            gamma=1 + chosen * (gamma - 1),
            noise=noise,
            blur_sigma=sigma * blurred,
        )

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Applies the perturbation: ``clip(blur(x ** gamma * gain + offset + noise))``.

        Args:
            x: ``(B, C, H, W)`` float imagery on the 0..1 scale.

        Returns:
            The perturbed imagery, clamped to 0..1.
        """
        y = x.clamp(min=0.0, max=1.0).pow(self.gamma) * self.gain + self.offset + self.noise
        idx = (self.blur_sigma > 0).nonzero().view(-1)
        if len(idx):
            c = y.shape[1]
            kernels = gaussian_kernels(self.blur_sigma[idx]).repeat_interleave(c, dim=0)
            sub = y[idx].reshape(1, -1, *y.shape[2:])
            pad = BLUR_KERNEL // 2
            sub = F.conv2d(
                F.pad(sub, (pad,) * 4, mode="reflect"), kernels.to(y.dtype), groups=len(kernels)
            )
            y = y.index_copy(0, idx, sub.view(len(idx), c, *y.shape[2:]))
        return y.clamp(min=0.0, max=1.0)


def photometric(
    x: torch.Tensor,
    p: float,
    gen: torch.Generator,
    ranges: PhotometricRanges | None = None,
) -> torch.Tensor:
    """Perturbs a batch photometrically: each patch with probability ``p``, the rest unchanged.

    Args:
        x: ``(B, C, H, W)`` float imagery on the 0..1 scale.
        p: Probability that a patch is perturbed.
        gen: The random generator (on ``x``'s device).
        ranges: The ranges (default :class:`PhotometricRanges`).

    Returns:
        A new ``(B, C, H, W)`` tensor on the 0..1 scale (clamped), same device.
    """
    draw = PhotometricDraw.draw(x.shape, p, gen, ranges or PhotometricRanges(), x.device)
    return draw.apply(x)
