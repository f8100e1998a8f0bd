"""The ranges of the photometric augmentation (:mod:`.photometric`), and their strength.

The defaults cover the differences between NAIP flights of one place: a per-band gain up to
1.5x (an autumn NIR drop of a third), offsets of about 30 DN, a gamma of 0.7 to 1.4, 5 DN of
sensor noise and a light blur; ``data.photometric_strength`` shrinks or widens them toward the
identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

BLUR_KERNEL = 5
"""Side of the blur kernel (sigma up to about 1.2 px fits in it)."""

MIN_BLUR_SIGMA = 1e-3
"""The least sigma a kernel is made for: an unblurred patch's kernel is a unit impulse."""


def gaussian_kernels_np(sigma: np.ndarray, size: int = BLUR_KERNEL) -> np.ndarray:
    """Normalised 1-D Gaussian kernels on the host, as ``gaussian_kernels_1d`` makes them.

    Args:
        sigma: ``(N,)`` standard deviations in pixels (at least :data:`MIN_BLUR_SIGMA` taken).
        size: Kernel length (odd).

    Returns:
        ``(N, size)`` float32 kernels summing to 1.
    """
    r = np.arange(size, dtype=np.float32) - np.float32(size // 2)
    sd = np.maximum(sigma.astype(np.float32), np.float32(MIN_BLUR_SIGMA))
    one_d = np.exp(-(r[None, :] ** 2) / (np.float32(2) * sd[:, None] ** 2))
    return (one_d / one_d.sum(axis=1, keepdims=True)).astype(np.float32)


@dataclass(frozen=True)
class SampledValues:
    """One batch's perturbation values, drawn on the host.

    Attributes:
        packed: ``gain (B*C), offset (B*C), gamma (B), noise_sd (B), blur_sigma (B),
            blur kernels (B*BLUR_KERNEL)`` as one float32 array, identity values (gain 1,
            offset 0, gamma 1, no noise, no blur: a unit-impulse kernel) for the patches not
            chosen.
        chosen: ``(B,)`` bool: the patches perturbed.
        blurred: ``(B,)`` bool: the patches blurred (``blur_sigma > 0``).
        seed: Seeds the generator of the chosen patches' noise codes.
    """

    packed: np.ndarray
    chosen: np.ndarray
    blurred: np.ndarray
    seed: int


def _log_uniform(low: float, high: float, u: np.ndarray) -> np.ndarray:
    return np.exp(np.float32(math.log(low)) + u * np.float32(math.log(high) - math.log(low)))


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

    def sample(self, b: int, c: int, p: float, gen: torch.Generator) -> SampledValues:
        """Draws a batch's perturbation values.

        The draws, in order: chosen ``(B,)``, gain ``(B, C)``, offset ``(B, C)``, gamma
        ``(B,)``, noise standard deviation ``(B,)``, blurred ``(B,)``, sigma ``(B,)`` (all
        uniform, in one draw: the same numbers as one draw each), then one integer, the seed
        of the noise codes. The arithmetic is numpy's on the host: a few host operations a
        batch instead of a few dozen torch ones.

        Args:
            b: Patches.
            c: Bands.
            p: Probability that a patch is perturbed.
            gen: The random generator (on the CPU).

        Returns:
            The values.
        """
        u = torch.rand(b * (5 + 2 * c), generator=gen).numpy()
        seed = int(torch.randint(0, 2**62, (1,), generator=gen)[0])
        parts = np.split(u, np.cumsum([b, b * c, b * c, b, b, b]))
        chosen = (parts[0] < p).astype(np.float32)
        gain = _log_uniform(*self.gain, parts[1].reshape(b, c))
        offset = (parts[2].reshape(b, c) * 2 - 1) * np.float32(self.offset)
        gamma = _log_uniform(*self.gamma, parts[3])
        noise_sd = parts[4] * np.float32(self.noise) * chosen
        blurred = (parts[5] < self.blur_p).astype(np.float32) * chosen
        low, high = (np.float32(v) for v in self.blur_sigma)
        sigma = (low + parts[6] * (high - low)) * blurred
        packed = np.concatenate(
            [
                (1 + chosen[:, None] * (gain - 1)).ravel(),
                (chosen[:, None] * offset).ravel(),
                1 + chosen * (gamma - 1),
                noise_sd,
                sigma,
                gaussian_kernels_np(sigma).ravel(),  # made here: no kernels to make on a GPU
            ]
        ).astype(np.float32)
        return SampledValues(packed, chosen > 0, sigma > 0, seed)
