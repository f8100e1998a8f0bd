"""Training-time augmentation of (image, label) patches: the dihedral group D4.

D4 (flips and 90-degree rotations) is exact for nadir aerial imagery: it changes no pixel
value and keeps labels aligned. Each of its 8 elements is an optional transpose after optional
row and column flips. The flips are numpy views (free); the transpose is the one real cost, and
it is done by torch's blocked transpose copy. A 4-band uint8 pixel moves as one 32-bit word
throughout, which makes a column flip 12x and the transpose 5x faster than element-wise numpy
copies (albumentations' ``A.D4`` did the latter and copied every patch once more: 3,000
patches/s of 256 px on one core, against about 8,000 here). The transform is drawn from the
sampler's own generator, so a batch stays a pure function of (seed, rank, epoch, step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class D4:
    """One element of D4: flips, then a transpose.

    Attributes:
        flip_rows: Reverse the row order (a vertical flip).
        flip_cols: Reverse the column order (a horizontal flip).
        transpose: Swap rows and columns.
    """

    flip_rows: bool = False
    flip_cols: bool = False
    transpose: bool = False

    @classmethod
    def draw(cls, rng: np.random.Generator) -> D4:
        """Draws one of the 8 elements uniformly.

        Args:
            rng: The random generator.

        Returns:
            The transform.
        """
        return cls.from_code(int(rng.integers(8)))

    @classmethod
    def from_code(cls, code: int) -> D4:
        """The element of a code: bit 0 flips rows, bit 1 flips columns, bit 2 transposes.

        Args:
            code: 0 to 7.

        Returns:
            The transform.
        """
        return cls(bool(code & 1), bool(code & 2), bool(code & 4))

    @property
    def code(self) -> int:
        """The element's code (:meth:`from_code`'s inverse)."""
        return int(self.flip_rows) | int(self.flip_cols) << 1 | int(self.transpose) << 2


def _as_pixels(array: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """An ``(H, W, 4)`` uint8 array as ``(H, W)`` 32-bit words (one per pixel), else as is."""
    if array.ndim == 3 and array.shape[2] == 4:
        if isinstance(array, torch.Tensor):
            return array.view(torch.int32).squeeze(-1)
        if array.strides[2] == 1 and array.strides[1] == 4:
            return array.view(np.int32)[..., 0]
    return array


def write_transformed(dst: torch.Tensor, src: np.ndarray, transform: D4 | None) -> None:
    """Writes ``src`` transformed by ``transform`` into ``dst``.

    Args:
        dst: A contiguous ``(H, W)`` or ``(H, W, C)`` tensor (a batch slot).
        src: The patch, ``(H, W)`` or ``(H, W, C)``, any strides (a view of a tile).
        transform: The D4 element, or ``None`` for a plain copy.
    """
    src, dst = _as_pixels(src), _as_pixels(dst)  # a pixel moves as one word
    if transform is not None and transform.flip_rows:
        src = src[::-1]
    if transform is not None and transform.flip_cols:
        src = src[:, ::-1]
    patch = torch.from_numpy(np.ascontiguousarray(src))
    dst.copy_(patch.transpose(0, 1) if transform is not None and transform.transpose else patch)


def d4_source_index(size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """For each D4 code, the flat source position of every pixel of a transformed patch.

    Args:
        size: The patch side.
        device: Where the table lives.

    Returns:
        An ``(8, size * size)`` int64 tensor: row ``k`` gathers a patch transformed by
        ``D4.from_code(k)`` from the flat untransformed patch, as :func:`write_transformed`
        writes it.
    """
    rows = torch.arange(size).view(size, 1).expand(size, size)
    cols = torch.arange(size).view(1, size).expand(size, size)
    table = torch.empty((8, size * size), dtype=torch.int64)
    for code in range(8):
        t = D4.from_code(code)
        # write_transformed: dst = transpose?(flip(src)); so dst[i, j] reads src at these
        r, c = (cols, rows) if t.transpose else (rows, cols)
        r = size - 1 - r if t.flip_rows else r
        c = size - 1 - c if t.flip_cols else c
        table[code] = (r * size + c).reshape(-1)
    return table.to(device)


def resolve_augment_on(setting: str, device: torch.device) -> str:
    """Where ``data.augment_on`` applies D4 on a device.

    ``auto`` is ``device`` on a GPU and ``host`` elsewhere. On one H100 (2026-11-27, bf16,
    batch 32) D4 as one gather on the GPU trained 1.23x faster than D4 in the feed on the
    host (its gather: 4.3 us a patch there, against 112 us of host time); on the CPU the
    gather costs about 5x the host's flips (``benchmarks/feed_bench.py``). The batches are the
    same bit for bit either way.

    Args:
        setting: ``auto``, ``host`` or ``device``.
        device: The training device.

    Returns:
        ``host`` or ``device``.
    """
    if setting == "auto":
        return "device" if device.type == "cuda" else "host"
    return setting


def transform_batch(
    images: torch.Tensor, labels: torch.Tensor, codes: torch.Tensor, table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Applies each patch's D4 element where the batch is (``data.augment_on: device``).

    One gather per tensor: no host work and no device synchronisation.

    Args:
        images: ``(B, P, P, C)`` uint8 patches, untransformed.
        labels: ``(B, P, P)`` uint8 class indices, untransformed.
        codes: ``(B,)`` int64 D4 codes (:attr:`D4.code`), on the same device.
        table: :func:`d4_source_index` for ``P``, on the same device.

    Returns:
        ``(images, labels)`` transformed: equal to what :func:`write_transformed` writes on the
        host for the same codes.
    """
    b, p = labels.shape[0], labels.shape[1]
    index = table[codes]  # (B, P*P)
    pixels = _as_pixels(images.reshape(b * p, p, -1)).reshape(b, p * p, -1)
    moved = pixels.gather(1, index.unsqueeze(-1).expand(-1, -1, pixels.shape[2]))
    out_images = moved.reshape(b, p, p, -1)
    if out_images.dtype != images.dtype:  # 4-band pixels moved as one 32-bit word each
        out_images = out_images.contiguous().view(images.dtype).reshape(images.shape)
    out_labels = labels.reshape(b, p * p).gather(1, index).reshape(b, p, p)
    return out_images, out_labels
