"""How to predict a tile (:class:`PredictOptions`), and the check an input tile must pass."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from landcover.data.raster import check_image
from landcover.inference.tileread import IN_MEMORY_BYTES
from landcover.storage.urls import check_no_credentials


@dataclass
class PredictOptions:
    """How to predict.

    Attributes:
        out: Output folder: a path or a blob URL.
        window: Window size in pixels (default: four training patches, at most 1024).
        overlap: Window overlap in pixels (default: a quarter of the patch size).
        batch_size: Windows per forward pass (default: 16 x 256 x 256 pixels' worth).
        prob_dtype: ``uint8`` (x 255) or ``float32`` probabilities.
        preview: Write the preview PNG.
        log_every_s: Seconds between progress lines.
        tta: Test-time augmentation (see :func:`~landcover.inference.tta.parse_tta`).
        prob_compress: Probability map compression: ``zstd`` (fast) or ``deflate``.
        probs: Write the probability map (``--no-probs``: the class map alone, which saves
            the probabilities' encoding, compression and overviews; an earlier run's
            probability map of a predicted tile is removed, as it no longer fits).
        compile: Run the model compiled (``torch.compile``); the maps equal the eager ones
            within floating-point rounding.
        tags: Extra metadata tags written into the maps (a job's fingerprint).
        resolution: Pixel size the model sees: ``train`` (the checkpoint's), ``native`` or
            metres (see :mod:`landcover.inference.resolution`).
        tile_memory: Largest decoded tile, in bytes, held whole in memory (decoded once, in
            parallel); a larger one is read row by row (see
            :mod:`landcover.inference.tileread`).
        writers: The map writers, by registered name (:mod:`landcover.inference.mapwriters`):
            ``cog`` (the class and probability COGs and the preview) and any others.
    """

    out: str
    overlap: int | None = None
    batch_size: int | None = None
    window: int | None = None
    prob_dtype: str = "uint8"
    preview: bool = True
    log_every_s: float = 10.0
    tta: str = "none"
    prob_compress: str = "zstd"
    probs: bool = True
    compile: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    resolution: str = "train"
    tile_memory: int = IN_MEMORY_BYTES
    writers: tuple[str, ...] = ("cog",)

    def __post_init__(self) -> None:
        """Refuses an output URL that carries a SAS token before any work, as an input's.

        Raises:
            StorageError: ``out`` is a blob URL with a shared access signature (redacted).
        """
        check_no_credentials(self.out)


CHECKPOINT_EXPECTS = "the checkpoint expects"
"""Who expects an input's bands, in predict's and evaluate's band-count errors."""


def check_bands(src: Any, path: str, bands: int) -> None:
    """Checks an image's band count and dtype against the model.

    A 4th band tagged 'alpha' (common for NAIP NIR) counts as a data band (see
    :func:`landcover.data.raster.nodata_mask`); one band beyond the model's, tagged alpha, is
    the image's mask (:func:`landcover.data.bandview.image_view`).

    Args:
        src: The open dataset.
        path: Its path, for the message.
        bands: Bands the model expects.

    Raises:
        DataError: If the band count or dtype does not match.
    """
    check_image(src, path, bands, CHECKPOINT_EXPECTS)
