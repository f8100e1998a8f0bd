"""From a uint8 training batch on the device to model input: augmentation, then normalisation.

The batch is perturbed photometrically (``data.photometric``, :mod:`landcover.feed.photometric`:
the uint8 values go straight through per-(patch, band) lookup tables to the perturbed 0..1
scale, in one pass that also standardises) or, without augmentation, made float; standardised
by the training data's band statistics
(``data.normalize: global``) or by each patch's own tile's (``per_tile``; the sampler says
which tile each patch came from). Validation tiles are standardised the way ``predict`` and
``evaluate`` standardise a tile
(:func:`~landcover.data.normalize.tile_normalizer`).
"""

from __future__ import annotations

import numpy as np
import torch

from landcover.config import DataConfig
from landcover.data.normalize import TileStats, array_band_stats
from landcover.data.raster import TileArrays
from landcover.feed.augment import d4_source_index, resolve_augment_on, transform_batch
from landcover.feed.photometric import PhotometricDraw, PhotometricRanges, photometric_uint8
from landcover.feed.staging import PinnedStaging


def tile_stats(tiles: list[TileArrays]) -> list[TileStats | None]:
    """Each tile's band statistics over its valid pixels.

    Args:
        tiles: Tiles in memory.

    Returns:
        One entry per tile (``None`` for a tile without valid pixels).
    """
    return [array_band_stats(t.image, t.nodata) for t in tiles]


class TrainingInput:
    """Turns sampled uint8 batches into augmented, normalised model input.

    Args:
        cfg: The data settings (resolved: ``mean``/``std`` are numbers).
        tiles: The worker's training tiles, in the sampler's order (for ``per_tile``).
        device: Where the batches will be.
        seed: The seed of the photometric draws (combined with the epoch by :meth:`start_epoch`).
    """

    def __init__(
        self, cfg: DataConfig, tiles: list[TileArrays], device: torch.device, seed: int = 0
    ) -> None:
        self.p = cfg.photometric
        self.ranges = PhotometricRanges().scaled(cfg.photometric_strength)
        self.device = device
        self.seed = seed
        # the per-patch draws on the host: reading which patches to perturb then costs a GPU
        # no synchronisation (the pixel noise is drawn on the device, from a drawn seed)
        self.generator = torch.Generator()
        self.generator.manual_seed(seed)
        mean = torch.tensor([list(cfg.mean)], dtype=torch.float32)  # type: ignore[arg-type]
        std = torch.tensor([list(cfg.std)], dtype=torch.float32)  # type: ignore[arg-type]
        if cfg.normalize == "per_tile":
            own = tile_stats(tiles)
            mean = torch.tensor([s.mean if s else list(cfg.mean) for s in own])  # type: ignore[arg-type]
            std = torch.tensor([s.std if s else list(cfg.std) for s in own])  # type: ignore[arg-type]
        self.per_tile = cfg.normalize == "per_tile"
        # the draws reach a GPU from pinned memory: the copy waits for nothing
        self.staging = PinnedStaging(device) if device.type == "cuda" else None
        mean, std = mean.to(device), std.to(device)
        # the very arithmetic of BandNormalizer: (T, C) factors of each tile (T = 1: global)
        self.scale_dn = 1.0 / (255.0 * std)
        self.scale = 1.0 / std
        self.shift = mean / std
        # D4 on the device (data.augment_on; auto: on a GPU): the sampler leaves it to one
        # gather here (the same batches)
        self.d4_table = (
            d4_source_index(cfg.patch_size, device)
            if cfg.augment and resolve_augment_on(cfg.augment_on, device) == "device"
            else None
        )

    def start_epoch(self, rank: int, epoch: int) -> None:
        """Reseeds the photometric draws for one worker and epoch (reproducible on resume).

        Args:
            rank: The worker's rank.
            epoch: The epoch (0-based).
        """
        state = np.random.SeedSequence([self.seed, rank, epoch]).generate_state(1, np.uint64)
        self.generator.manual_seed(int(state[0]) & 0x7FFF_FFFF_FFFF_FFFF)

    def host_draw(self, images: torch.Tensor) -> torch.Tensor | None:
        """Draws a batch's photometric perturbation on the host, for :meth:`__call__`'s ``draw``.

        Args:
            images: The batch's ``(B, H, W, C)`` uint8 imagery (only its shape is read).

        Returns:
            The draw's packed values (:attr:`PhotometricDraw.packed`, a host tensor), or
            ``None`` without photometric augmentation.
        """
        if self.p <= 0:
            return None
        b, h, w, c = images.shape
        cpu = torch.device("cpu")
        return PhotometricDraw.draw((b, c, h, w), self.p, self.generator, self.ranges, cpu).packed

    def __call__(
        self,
        images: torch.Tensor,
        tiles: torch.Tensor | None = None,
        draw: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Augments and normalises a batch.

        Args:
            images: ``(B, H, W, C)`` uint8 tensor on the device.
            tiles: ``(B,)`` index of each patch's tile in the worker's tiles (``per_tile``).
            draw: A perturbation drawn by :meth:`host_draw`, on the device: every patch then
                goes through one pass that branches on nothing on the host (a CUDA graph's
                step), its noise from the device's default generator. ``None``: drawn here.

        Returns:
            ``(B, C, H, W)`` float32 model input (memory channels-last).
        """
        if self.per_tile and tiles is not None:
            index = tiles.to(self.device, dtype=torch.long, non_blocking=True)
        else:
            index = torch.zeros(1, dtype=torch.long, device=self.device)
        if self.p <= 0:
            x = images.permute(0, 3, 1, 2).float()
            return x * self.scale_dn[index][:, :, None, None] - self.shift[index][:, :, None, None]
        if draw is not None:
            b, h, w, c = images.shape
            every = PhotometricDraw.unpack(draw, (b, c, h, w))
            return every.apply_uint8(images, True, self.scale[index], self.shift[index])
        # clip(perturbed) * scale - shift, the uint8 values through lookup tables
        return photometric_uint8(
            images,
            self.p,
            self.generator,
            self.ranges,
            channels_last=True,
            scale=self.scale[index],
            shift=self.shift[index],
            to_device=self.staging.to_device if self.staging is not None else None,
        )

    def model_batch(
        self,
        batch: tuple[torch.Tensor, ...],
        contiguous: bool = False,
        draw: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch as the sampler draws it, made the model's input on the device.

        Moves it (asynchronously from pinned memory), applies D4 when the sampler left it
        here (:attr:`d4_table`), augments and normalises. Nothing is read back from the
        device, so on a GPU the host goes on queueing work without waiting for it.

        Args:
            batch: ``(images, labels, tiles)`` of
                :meth:`~landcover.feed.sampler.PatchSampler.batch_with_tiles`, or with
                :attr:`d4_table` ``(images, labels, tiles, codes)`` of
                :meth:`~landcover.feed.sampler.PatchSampler.batch_for_device`.
            contiguous: Return the input in contiguous ``(B, C, H, W)`` memory (else
                channels-last memory, as it is made).
            draw: The photometric draw of :meth:`host_draw`, on the device (see
                :meth:`__call__`); ``None``: drawn here.

        Returns:
            ``(inputs, labels)``: ``(B, C, H, W)`` float32 and ``(B, H, W)`` int64 class
            indices, on the device.
        """
        images, labels, tiles, *codes = batch
        images = images.to(self.device, non_blocking=True)
        labels = labels.to(self.device, non_blocking=True)
        if self.d4_table is not None:
            code = codes[0].to(self.device, non_blocking=True)
            images, labels = transform_batch(images, labels, code, self.d4_table)
        inputs = self(images, tiles, draw)
        return (inputs.contiguous() if contiguous else inputs), labels.long()
