"""The ranges of the photometric augmentation (:mod:`.photometric`), and their strength.

The defaults cover the differences between NAIP flights of one place: a per-band gain up to
1.5x (an autumn NIR drop of a third), offsets of about 30 DN, a gamma of 0.7 to 1.4, 5 DN of
sensor noise and a light blur; ``data.photometric_strength`` shrinks or widens them toward the
identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
