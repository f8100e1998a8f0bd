"""Test-time augmentation: class probabilities averaged over elements of D4.

Nadir aerial imagery has no preferred orientation, so a model's prediction of a rotated or
flipped window, rotated or flipped back onto the window's own pixel grid, is another estimate of
the same map. Averaging the class probabilities of several such estimates (before the windows
are blended) usually gains a little accuracy, at one forward pass per transform.

Each transform is a :class:`~landcover.feed.augment.D4` element (row flip, column flip, then a
transpose: the same representation the training augmentation draws from). It is applied to a
``(B, C, H, W)`` batch of square windows and inverted exactly on the ``(B, K, H, W)``
prediction: the transpose first, then the same flips (each part is its own inverse).

Choices, for ``--tta``:

========================  ==========================================================
``none`` or ``1``         no augmentation (the default)
``2``                     identity and the horizontal flip
``flips``                 identity, horizontal, vertical and both flips (= rotation by 180)
``rotations`` or ``4``    identity and rotations by 90, 180 and 270 degrees
``d4`` or ``8``           all 8: the rotations, the two flips, the two transposes
``NAME,NAME,...``         any of ``identity rot90 rot180 rot270 hflip vflip transpose
                          antitranspose``
========================  ==========================================================
"""

from __future__ import annotations

import torch

from landcover.errors import ConfigError
from landcover.feed.augment import D4

TRANSFORMS: dict[str, D4] = {
    "identity": D4(),
    "rot90": D4(flip_cols=True, transpose=True),  # counter-clockwise, as numpy.rot90
    "rot180": D4(flip_rows=True, flip_cols=True),
    "rot270": D4(flip_rows=True, transpose=True),
    "hflip": D4(flip_cols=True),
    "vflip": D4(flip_rows=True),
    "transpose": D4(transpose=True),
    "antitranspose": D4(flip_rows=True, flip_cols=True, transpose=True),
}
"""The 8 elements of D4 by name."""

PRESETS: dict[str, tuple[str, ...]] = {
    "none": ("identity",),
    "1": ("identity",),
    "2": ("identity", "hflip"),
    "flips": ("identity", "hflip", "vflip", "rot180"),
    "rotations": ("identity", "rot90", "rot180", "rot270"),
    "4": ("identity", "rot90", "rot180", "rot270"),
    "d4": tuple(TRANSFORMS),
    "8": tuple(TRANSFORMS),
}
"""Named sets of transforms accepted by ``--tta``."""


def parse_tta(spec: str) -> tuple[str, ...]:
    """The transforms named by a ``--tta`` value.

    Args:
        spec: A preset (``none``, ``1``, ``2``, ``flips``, ``rotations``, ``4``, ``d4``,
            ``8``) or a comma-separated list of transform names.

    Returns:
        Transform names, without repeats, in the order given.

    Raises:
        ConfigError: If a name is unknown.
    """
    key = spec.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    names = [n.strip() for n in key.split(",") if n.strip()]
    unknown = [n for n in names if n not in TRANSFORMS]
    if unknown or not names:
        raise ConfigError(
            f"--tta {spec}: choose one of {', '.join(PRESETS)} or a comma-separated list "
            f"of {', '.join(TRANSFORMS)}"
        )
    return tuple(dict.fromkeys(names))


def apply(batch: torch.Tensor, transform: D4) -> torch.Tensor:
    """Transforms a ``(B, C, H, W)`` batch of square windows.

    Args:
        batch: The windows.
        transform: The D4 element.

    Returns:
        The transformed windows (``batch`` itself for the identity).
    """
    dims = [d for d, on in ((2, transform.flip_rows), (3, transform.flip_cols)) if on]
    out = batch.flip(dims) if dims else batch
    return out.transpose(2, 3) if transform.transpose else out


def invert(prediction: torch.Tensor, transform: D4) -> torch.Tensor:
    """Maps a ``(B, K, H, W)`` prediction of transformed windows back onto the windows' grid.

    Args:
        prediction: The model's output for ``apply(batch, transform)``.
        transform: The same D4 element.

    Returns:
        The prediction on the original pixel grid.
    """
    out = prediction.transpose(2, 3) if transform.transpose else prediction
    dims = [d for d, on in ((2, transform.flip_rows), (3, transform.flip_cols)) if on]
    return out.flip(dims) if dims else out
