"""Training-time augmentation of (image, label) patches with albumentations."""

from __future__ import annotations

import albumentations as A


def build_augmentation(enabled: bool) -> A.Compose | None:
    """Builds the augmentation applied to every training patch.

    The dihedral group D4 (horizontal/vertical flips and 90-degree rotations) is exact for
    nadir aerial imagery: it changes no pixel value and keeps labels aligned.

    Args:
        enabled: Whether to augment at all.

    Returns:
        An albumentations pipeline taking ``image`` (H, W, C) and ``mask`` (H, W), or ``None``.
    """
    if not enabled:
        return None
    return A.Compose([A.D4(p=1.0)])
