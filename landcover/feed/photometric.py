"""Photometric augmentation of 4-band imagery, batched on the device, for shift between flights.

NAIP flights differ by tens of digital numbers per band (camera, contractor, sun, haze) and
autumn flights have a lower NIR and browner fields. This module perturbs a batch on the 0..1
scale (after the uint8 patches reached the device, before normalisation) with, per patch drawn
with probability ``p``:

- a per-band gain (contrast, log-uniform; covers an autumn NIR drop of a third),
- a per-band offset (brightness / channel shift, uniform, tens of DN),
- a per-patch gamma (log-uniform),
- Gaussian sensor noise (per-patch standard deviation, uniform),
- a Gaussian blur (haze, defocus, resampling), with probability ``blur_p``.

Labels are never touched and no pixel moves: image and label stay aligned. A pixel whose bands
are all 0 is no data (:mod:`landcover.data.nodatafill` fills no-data so): it stays 0, as
``predict`` sees it, so a patch at the edge of a flight does not train on a perturbed border. Two entry points
share one draw and one pass: :func:`photometric_uint8` takes the uint8 batch training has
(``(B, H, W, C)`` or ``(B, C, H, W)``) and maps every value through a per-(patch, band) lookup
table of 256 floats (``clip(x / 255) ** gamma * gain + offset``: the gamma is paid on 256
values, not on every pixel), optionally standardising on the way out; :func:`photometric` takes
a float batch on the 0..1 scale and does the same arithmetic per pixel.
Noise and blur are computed for the chosen (and blurred) patches only, the noise codes of a
chunk in one draw (on the CPU the very codes of one draw a patch); a captured step takes every
patch through the pass instead (:meth:`PhotometricDraw.unpack`). The noise is a standard normal
drawn as 16-bit codes mapped through a table of normal quantiles
(:func:`~landcover.feed.noiseblur.normal_table`), four codes per 64 random bits: about half the
cost of ``torch.randn`` on the CPU. The blur is separable (two 5-tap passes). On the CPU the batch
goes one patch at a time, its scratch in cache and reused; elsewhere in one chunk, in few
operations (:mod:`.photopass`).

Why our own and not albumentations: the pass works on the batch where training has it (on
the GPU in a CUDA run, taking no CPU time from the sampler), its draws come from a generator
the caller seeds per (seed, rank, epoch) (reproducible, also on resume), it needs no
dependency, its arithmetic is exact enough to test against numpy, and on the CPU it is faster
too: ``benchmarks/augment_bench.py`` (a uint8 batch of 64 patches of 256 px in, the perturbed
float batch out, every patch perturbed, one thread) measured 0.063 s against 0.096 s for
albumentations 2.0.8 per patch, stacked and made float (1.5x; 1.5 to 1.6x over four runs); the
earlier per-pixel float pass took 0.40 to 0.46 s. About 25 ms of the 63 are the page faults
of the fresh 67 MB float batch, which both sides pay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from landcover.feed.noiseblur import BLUR_KERNEL, device_generator, noise_codes
from landcover.feed.photopass import Fill, lookup_base, lookup_rows, run_pass
from landcover.feed.photoranges import PhotometricRanges

CPU_CHUNK = 1
"""Patches processed together on the CPU (their scratch stays in cache); one chunk elsewhere."""


@dataclass
class PhotometricDraw:
    """The perturbation of one batch: identity values for the patches not chosen.

    Attributes:
        gain: ``(B, C, 1, 1)`` per-band gain.
        offset: ``(B, C, 1, 1)`` per-band offset (0..1 scale).
        gamma: ``(B, 1, 1, 1)`` per-patch gamma.
        chosen: ``(B,)`` bool on the host: the patches perturbed (the others are only clamped
            to 0..1).
        noise_sd: ``(B,)`` noise standard deviation (0..1 scale; 0 where not chosen).
        noise_seed: Seeds the generator of the chosen patches' noise codes
            (:meth:`noise_codes`).
        blur_sigma: ``(B,)`` blur sigma in pixels; 0 where a patch is not blurred.
        blurred: ``(B,)`` bool on the host: ``blur_sigma > 0``.
        shape: The batch's ``(B, C, H, W)``.
        kernels: ``(B, BLUR_KERNEL)`` the blur's 1-D kernels, made on the host with the draw
            (a unit impulse where a patch is not blurred).
        packed: ``gain, offset, gamma, noise_sd, blur_sigma, kernels`` flattened in that
            order, one tensor (the others are views of it): what :meth:`unpack` takes.
        every: Every patch goes through the one pass, with identity values where it is not
            chosen and a noise drawn from the device's default generator: nothing on the
            host branches on the draw, so the pass can be captured in a CUDA graph
            (:meth:`unpack`).

    The other tensors are on the batch's device; what the pass branches on stays on the host,
    where reading it costs a GPU no synchronisation.
    """

    gain: torch.Tensor
    offset: torch.Tensor
    gamma: torch.Tensor
    chosen: torch.Tensor
    noise_sd: torch.Tensor
    noise_seed: int
    blur_sigma: torch.Tensor
    blurred: torch.Tensor
    shape: tuple[int, int, int, int]
    packed: torch.Tensor
    kernels: torch.Tensor
    every: bool = False

    @classmethod
    def draw(
        cls,
        shape: torch.Size | tuple[int, ...],
        p: float,
        gen: torch.Generator,
        ranges: PhotometricRanges,
        device: torch.device,
        to_device: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> PhotometricDraw:
        """Draws a batch's perturbation.

        The draws, in order: chosen ``(B,)``, gain ``(B, C)``, offset ``(B, C)``, gamma
        ``(B,)``, noise standard deviation ``(B,)``, blurred ``(B,)``, sigma ``(B,)`` (all
        uniform), then one integer, the seed of the noise codes; made on the host and moved
        to ``device`` in one copy (nothing is read back from a GPU).

        Args:
            shape: The batch's ``(B, C, H, W)``.
            p: Probability that a patch is perturbed.
            gen: The random generator (on the CPU).
            ranges: The ranges.
            device: The batch's device.
            to_device: Copies the drawn values (a host tensor) to ``device``; ``None``: ``.to``.

        Returns:
            The draw.
        """
        b, c, h, w = (int(s) for s in shape)
        values = ranges.sample(b, c, p, gen)
        packed = values.packed
        host = torch.from_numpy(packed)  # one copy (a GPU's: from pinned memory, PinnedStaging)
        there = to_device(host) if to_device else host.to(device, non_blocking=True)
        split = there.split([b * c, b * c, b, b, b, b * BLUR_KERNEL])
        return cls(
            gain=split[0].view(b, c, 1, 1),
            offset=split[1].view(b, c, 1, 1),
            gamma=split[2].view(b, 1, 1, 1),
            chosen=torch.from_numpy(values.chosen),
            noise_sd=split[3],
            noise_seed=values.seed,
            blur_sigma=split[4],
            blurred=torch.from_numpy(values.blurred),
            shape=(b, c, h, w),
            packed=there,
            kernels=split[5].view(b, BLUR_KERNEL),
        )

    @classmethod
    def unpack(cls, packed: torch.Tensor, shape: tuple[int, int, int, int]) -> PhotometricDraw:
        """A draw from its :attr:`packed` values, applied to every patch (:attr:`every`).

        The result is the draw's own (to float rounding: a patch not chosen has gain 1,
        offset 0, gamma 1, no noise and a blur whose kernel is a unit impulse), but for the
        noise, drawn from the device's default generator.

        Args:
            packed: :attr:`packed` of a draw, on the batch's device (e.g. a CUDA graph's input).
            shape: The batch's ``(B, C, H, W)``.

        Returns:
            The draw.
        """
        b, c = shape[:2]
        values = packed.split([b * c, b * c, b, b, b, b * BLUR_KERNEL])
        every = torch.ones(b, dtype=torch.bool)
        return cls(
            gain=values[0].view(b, c, 1, 1),
            offset=values[1].view(b, c, 1, 1),
            gamma=values[2].view(b, 1, 1, 1),
            chosen=every,
            noise_sd=values[3],
            noise_seed=0,
            blur_sigma=values[4],
            blurred=every,
            shape=shape,
            packed=packed,
            kernels=values[5].view(b, BLUR_KERNEL),
            every=True,
        )

    def noise_codes(self) -> torch.Tensor:
        """The chosen patches' noise codes, as :meth:`apply` draws them.

        Returns:
            ``(K, H, W, C)`` int32 codes of the ``K`` chosen patches in batch order (pixel
            ``(h, w)``, band ``c``); the noise is ``noise_sd * normal_table()[code]``.
        """
        _, c, h, w = self.shape
        device = self.gain.device
        gen = device_generator(device, self.noise_seed)
        k = int(self.chosen.sum())
        codes = torch.empty((k, h, w, c), dtype=torch.int32, device=device)
        if h * w * c % 4 == 0:  # one draw, as apply draws them (on the CPU: one draw a patch)
            return noise_codes(gen, codes.numel(), codes).view(k, h, w, c)
        for patch in codes:  # one draw per patch, as apply draws them
            noise_codes(gen, h * w * c, patch)
        return codes

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Applies the perturbation: ``clip(blur(clip(x) ** gamma * gain + offset + noise))``.

        Args:
            x: ``(B, C, H, W)`` float imagery on the 0..1 scale.

        Returns:
            The perturbed imagery, clamped to 0..1: ``(B, C, H, W)`` float32 (memory
            channels-last).
        """
        b, c = self.shape[:2]
        gamma, gain = self.gamma.view(b, 1, 1, 1), self.gain.view(b, 1, 1, c)
        offset = self.offset.view(b, 1, 1, c)
        source = x.permute(0, 2, 3, 1)
        chosen = self.chosen.tolist()

        def fill(start: int, stop: int, chunk: torch.Tensor, _: torch.Tensor) -> None:
            chunk.copy_(source[start:stop]).clamp_(min=0.0, max=1.0)
            if any(chosen[start:stop]):
                chunk.pow_(gamma[start:stop]).mul_(gain[start:stop]).add_(offset[start:stop])

        return self._run(fill, x.device, None, None, source.amax(-1, keepdim=True) > 0)

    def apply_uint8(
        self,
        images: torch.Tensor,
        channels_last: bool = True,
        scale: torch.Tensor | None = None,
        shift: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Applies the perturbation to uint8 imagery through per-(patch, band) lookup tables.

        Equal (to float rounding) to :meth:`apply` on ``images.float() / 255``, then
        ``* scale - shift`` when given.

        Args:
            images: uint8 imagery, ``(B, H, W, C)`` (``channels_last``) or ``(B, C, H, W)``.
            channels_last: Whether ``images`` is ``(B, H, W, C)``.
            scale: Optional ``(B, C)`` or ``(1, C)`` factor applied after the clamp.
            shift: Optional ``(B, C)`` or ``(1, C)`` term subtracted after ``scale``.

        Returns:
            ``(B, C, H, W)`` float32 (memory channels-last): the perturbed imagery on the 0..1
            scale, clamped, then standardised when ``scale``/``shift`` are given.

        Raises:
            TypeError: When ``images`` is not uint8.
        """
        if images.dtype != torch.uint8:
            raise TypeError(f"apply_uint8 takes uint8 imagery, not {images.dtype}")
        b, c, h, w = self.shape
        source = images if channels_last else images.permute(0, 2, 3, 1)
        device = images.device
        # the table: every value a uint8 can take, through the very arithmetic of apply
        base = lookup_base(device)
        table = torch.addcmul(
            self.offset.view(b, c, 1), base.pow(self.gamma.view(b, 1, 1)), self.gain.view(b, c, 1)
        ).view(-1)
        patch_rows = lookup_rows(device, b, c, w)  # (patch, band) row starts

        def fill(start: int, stop: int, chunk: torch.Tensor, index: torch.Tensor) -> None:
            n = stop - start
            rows = patch_rows[:n]  # the batch's own patch offsets folded into the table
            index = index[:n].view(n, h, w * c)
            index.view(n, h, w, c).copy_(source[start:stop])
            index.add_(rows)
            part = table[start * c * 256 : stop * c * 256]
            torch.index_select(part, 0, index.view(-1), out=chunk.view(-1))

        return self._run(fill, device, scale, shift, source.amax(-1, keepdim=True) != 0)

    def _run(
        self,
        fill: Fill,
        device: torch.device,
        scale: torch.Tensor | None,
        shift: torch.Tensor | None,
        valid: torch.Tensor,
    ) -> torch.Tensor:
        """The pass shared by :meth:`apply` and :meth:`apply_uint8` (:func:`.photopass.run_pass`).

        Args:
            fill: Writes ``x ** gamma * gain + offset`` of patches ``start:stop`` into a
                ``(n, H, W, C)`` float chunk, given an int32 scratch of as many elements.
            device: The batch's device.
            scale: Optional ``(B, C)`` or ``(1, C)`` factor applied after the clamp.
            shift: Optional ``(B, C)`` or ``(1, C)`` term subtracted after ``scale``.
            valid: ``(B, H, W, 1)`` bool, the pixels with data (some band not 0).

        Returns:
            ``(B, C, H, W)`` float32, memory channels-last.
        """
        return run_pass(self, fill, device, scale, shift, CPU_CHUNK, valid)


def photometric(
    x: torch.Tensor,
    p: float,
    gen: torch.Generator,
    ranges: PhotometricRanges | None = None,
) -> torch.Tensor:
    """Perturbs a float batch photometrically: each patch with probability ``p``.

    Args:
        x: ``(B, C, H, W)`` float imagery on the 0..1 scale.
        p: Probability that a patch is perturbed.
        gen: The random generator of the per-patch draws (on the CPU).
        ranges: The ranges (default :class:`PhotometricRanges`).

    Returns:
        A new ``(B, C, H, W)`` float32 tensor on the 0..1 scale (clamped; the patches not
        chosen only clamped), same device, memory channels-last.
    """
    draw = PhotometricDraw.draw(x.shape, p, gen, ranges or PhotometricRanges(), x.device)
    return draw.apply(x)


def photometric_uint8(
    images: torch.Tensor,
    p: float,
    gen: torch.Generator,
    ranges: PhotometricRanges | None = None,
    channels_last: bool = True,
    scale: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    to_device: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Perturbs a uint8 batch photometrically, optionally standardising it: the fast path.

    The same draw as :func:`photometric` on ``images.float() / 255`` (same generator state:
    same perturbation, to float rounding), through 256-entry lookup tables per (patch, band).

    Args:
        images: uint8 imagery, ``(B, H, W, C)`` (``channels_last``) or ``(B, C, H, W)``.
        p: Probability that a patch is perturbed.
        gen: The random generator of the per-patch draws (on the CPU).
        ranges: The ranges (default :class:`PhotometricRanges`).
        channels_last: Whether ``images`` is ``(B, H, W, C)``.
        scale: Optional ``(B, C)`` or ``(1, C)`` factor applied to the 0..1 result.
        shift: Optional ``(B, C)`` or ``(1, C)`` term subtracted after ``scale``.
        to_device: How the drawn values reach the batch's device (:meth:`PhotometricDraw.draw`).

    Returns:
        A new ``(B, C, H, W)`` float32 tensor (memory channels-last), same device: on the 0..1
        scale (clamped), then ``* scale - shift`` when given.
    """
    b, *rest = images.shape
    shape = (b, rest[2], rest[0], rest[1]) if channels_last else (b, *rest)
    ranges = ranges or PhotometricRanges()
    draw = PhotometricDraw.draw(shape, p, gen, ranges, images.device, to_device)
    return draw.apply_uint8(images, channels_last, scale, shift)
