"""``data``: where the tiles are, their classes and bands, and how patches are drawn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from landcover.classes import ClassMapping, resolve_mapping
from landcover.config.base import AUTO, Section, no_credentials_in_url, numbers_or_auto


class DataConfig(Section):
    """Where the tile pairs are and how they become training samples.

    Attributes:
        root: Folder (or URL) holding ``{name}{image_suffix}`` / ``{name}{label_suffix}`` pairs.
            ``None`` uses the built-in synthetic sample dataset.
        manifest: Optional CSV with columns ``image,label`` and an optional ``split`` column
            (``train``/``val``/``test``; test rows are not trained on); paths relative to the
            manifest's folder. Overrides ``root``.
        image_suffix: File-name suffix of the imagery.
        label_suffix: File-name suffix of the labels.
        val_root: Optional separate folder of validation pairs.
        val_tiles: Names of tiles held out for validation.
        val_fraction: Fraction of tiles (the last ones by name) held out when neither
            ``val_root`` nor ``val_tiles`` nor a manifest split is given.
        classes: A preset name (``chesapeake7``, ``cvpr4``, ``tutorial5``) or an explicit mapping.
        bands: Names of the image bands, in file order; their count is the model's input channels.
        mean: Per-band mean on the 0..1 scale, subtracted before the model; ``auto`` measures it
            on the training tiles when training starts (the resolved run config and every
            checkpoint then hold the numbers, so predict and evaluate use them).
        std: Per-band standard deviation on the 0..1 scale; ``auto`` as for ``mean``.
        class_frequencies: Optional pixel frequency of each class (by class name) in the
            training data, as ``landcover data stats`` writes it; ``optim.loss.class_weights:
            auto`` derives its weights from it when given (else it measures them). A run that
            measures frequencies records them here.
        patch_size: Side of the square training patches in pixels (32 to 4,096, a multiple
            of 32).
        max_nodata_fraction: Training patches with more ignored pixels than this are redrawn.
        oversample_rare: Probability that a patch is centred on a pixel of a rare class, the
            class drawn with probability inversely proportional to its pixel count (applies to
            the patches ``class_balance`` leaves random).
        class_balance: Fraction of every batch's patches centred on a pixel of a class, the
            classes present in the worker's share taking equal turns: each of the ``K``
            present classes is at the centre of about ``class_balance / K`` of every batch's
            patches, however rare it is; 0 turns it off.
        augment: Random flips and 90-degree rotations.
        augment_on: Where they are applied: ``host`` (the sampler, in the feed),
            ``device`` (one gather on the training device; the same batches, bit for bit), or
            ``auto``: ``device`` on a GPU, ``host`` on the CPU. On one H100 the gather trained
            1.23x faster than the host's flips (about 40 % of the sampler's time per patch);
            on the CPU it costs about 5x the host's flips (``benchmarks/feed_bench.py``).
        loader_workers: Processes drawing each training worker's batches: ``0`` draws them in
            a thread of the training process, ``N`` in ``N`` forked processes that share its
            tiles in memory and draw outside its GIL (``benchmarks/gil_bench.py``); ``auto``:
            2 on a GPU (on one H100, with D4 on the GPU, 1.39x faster than the thread,
            ``benchmarks/results/gpu/``), 0 on the CPU. The batches are the same whichever
            draws them (each batch has its own random generator), so the trained model does
            not depend on it.
        fetch_concurrency: Files each worker fetches (and decodes) at once when loading.
        cache_dir: Optional local folder caching remote (blob) files, so a second run reads
            them from local disk.
        resolution: Pixel size in metres every tile is resampled to on load (imagery bilinear,
            labels nearest), for tiles of mixed pixel sizes (0.6 m and 1 m NAIP); ``None``
            keeps each tile's own. Checkpoints record the pixel size trained at.
        photometric: Probability that a training patch is perturbed photometrically (per-band
            gain and offset of tens of DN, gamma, sensor noise, blur; see
            :mod:`landcover.feed.photometric`), against radiometric shift between flights;
            0 turns it off. Labels never change.
        photometric_strength: Scales the photometric ranges (1: gains 0.67..1.5, offsets up to
            30 DN, gamma 0.7..1.4, noise up to 5 DN).
        normalize: ``global`` standardises every tile by ``mean``/``std``; ``per_tile`` by the
            tile's own band mean and standard deviation over its valid pixels (training,
            validation, predict and evaluate alike; the checkpoint's config records it).
    """

    root: str | None = None
    manifest: str | None = None
    image_suffix: str = "_naip.tif"
    label_suffix: str = "_lc.tif"
    val_root: str | None = None
    val_tiles: list[str] = Field(default_factory=list)
    val_fraction: float = Field(0.2, ge=0.0, lt=1.0)
    classes: ClassMapping = Field(default_factory=lambda: resolve_mapping("chesapeake7"))
    bands: list[str] = Field(default_factory=lambda: ["red", "green", "blue", "nir"])
    mean: list[float] | Literal["auto"] = "auto"
    std: list[float] | Literal["auto"] = "auto"
    class_frequencies: dict[str, float] | None = None
    patch_size: int = Field(256, ge=32, le=4096)
    max_nodata_fraction: float = Field(0.5, ge=0.0, le=1.0)
    oversample_rare: float = Field(0.0, ge=0.0, le=1.0)
    class_balance: float = Field(0.0, ge=0.0, le=1.0)
    augment: bool = True
    augment_on: Literal["auto", "host", "device"] = "auto"
    loader_workers: int | Literal["auto"] = "auto"
    fetch_concurrency: int = Field(8, ge=1)
    cache_dir: str | None = None
    resolution: float | None = Field(None, gt=0)
    photometric: float = Field(0.0, ge=0.0, le=1.0)
    photometric_strength: float = Field(1.0, ge=0.0, le=2.0)
    normalize: Literal["global", "per_tile"] = "global"

    @field_validator("root", "manifest", "val_root", "cache_dir")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        return no_credentials_in_url(value)

    @field_validator("mean", "std", mode="before")
    @classmethod
    def _band_values(cls, value: Any) -> Any:
        return numbers_or_auto(value, "one per band")

    @field_validator("loader_workers")
    @classmethod
    def _workers_not_negative(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"must be 0 or more processes, or auto, not {value}")
        return value

    @field_validator("classes", mode="before")
    @classmethod
    def _resolve_classes(cls, value: Any) -> ClassMapping:
        return resolve_mapping(value)

    @field_validator("patch_size")
    @classmethod
    def _patch_multiple_of_32(cls, value: int) -> int:
        if value % 32:
            raise ValueError(f"patch_size {value} must be a multiple of 32 (the U-Net's stride)")
        return value

    @model_validator(mode="after")
    def _band_stats_match(self) -> DataConfig:
        n = len(self.bands)
        for key in ("mean", "std"):
            value = getattr(self, key)
            if value != AUTO and len(value) != n:
                raise ValueError(
                    f"{key} needs one value per band ({n} bands: {self.bands}) or auto"
                )
        if self.std != AUTO and any(s <= 0 for s in self.std):
            raise ValueError("std values must be positive")
        if self.class_frequencies is not None:
            unknown = sorted(set(self.class_frequencies) - set(self.classes.names))
            if unknown:
                raise ValueError(
                    f"class_frequencies names classes {unknown} that the class mapping "
                    f"{self.classes.name} does not have ({', '.join(self.classes.names)})"
                )
            if any(f < 0 for f in self.class_frequencies.values()):
                raise ValueError("class_frequencies must not be negative")
        return self

    @property
    def stats_auto(self) -> bool:
        """Whether ``mean`` or ``std`` is still to be measured (``auto``)."""
        return self.mean == AUTO or self.std == AUTO
