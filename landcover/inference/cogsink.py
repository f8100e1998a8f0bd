"""The ``cog`` map writer: Cloud Optimized GeoTIFFs, a PAM sidecar and a preview per tile.

Files per tile: ``{stem}_class.tif`` (COG, colour table, class names; its ``.aux.xml`` gives
category names and transparency, :mod:`.pam`), ``{stem}_prob.tif`` (one band per class; not
with ``--no-probs``) and ``{stem}_preview.png`` (not with ``--no-preview``). The maps are
written strip by strip to scratch GeoTIFFs and made COGs at the end
(:class:`~landcover.inference.writers.MapWriter`).

A previous run's maps are complete (:meth:`CogSink.problem`) when they

- open, are Cloud Optimized GeoTIFFs as GDAL's COG driver writes them (``LAYOUT=COG`` as
  GDAL reports it, 256 px blocks, internal overviews when larger than one block) whose last
  block can be read (a truncated copy cannot);
- lie on exactly the input's grid (CRS, transform, size) with the right bands and data type;
- carry the job's tags (its fingerprint); and the preview exists, when the job writes one.
"""

from __future__ import annotations

import os
from typing import Any

import pystac
import rasterio

from landcover import storage
from landcover.errors import first_line
from landcover.inference.pam import AUX_SUFFIX
from landcover.inference.preview import write_preview
from landcover.inference.results import Grid, MapFile
from landcover.inference.sinks import (
    MapSink,
    MapTarget,
    TileCheck,
    local_file,
    open_dataset,
    register_map_writer,
)
from landcover.inference.writers import MapWriter

COG_TYPE = "image/tiff; application=geotiff; profile=cloud-optimized"
COG_BLOCK = 256
"""Block size of the maps (``writers.publish_cog``): larger maps have overviews."""
CLASS, PROBABILITIES, PREVIEW = "class", "probabilities", "preview"
"""The asset keys of the class map, the probability map and the preview."""


@register_map_writer("cog")
class CogSink(MapSink):
    """Writes a tile's class and probability maps as COGs, and its preview (see the module).

    Args:
        target: The tile and where its maps go.
    """

    def __init__(self, target: MapTarget) -> None:
        super().__init__(target)
        self.maps = MapWriter(
            target.src,
            target.mapping,
            target.scratch,
            target.prob_dtype,
            target.tags,
            label=target.label,
        )

    def write(self, strip: Any) -> None:
        """Writes a finished strip into the scratch maps (and their overviews)."""
        self.maps.write_finished(strip)

    def close(self) -> None:
        """Closes the scratch maps."""
        self.maps.close()

    def publish(self) -> list[MapFile]:
        """Makes the COGs, their PAM sidecar and the preview; removes a stale probability map."""
        target, options = self.target, self.target.options
        out = target.out
        files = self.expected(target.stem, options)
        paths = {f.key: out / storage.name(f.path) for f in files}
        class_dst, prob_dst = paths[CLASS], paths.get(PROBABILITIES)
        self.maps.publish(class_dst, prob_dst, options.prob_compress)
        if PREVIEW in paths:
            preview = paths[PREVIEW]
            write_preview(target.local_tile, class_dst, target.mapping, preview, bands=target.bands)
        if prob_dst is None:  # an earlier run's probabilities no longer fit the class map
            storage.remove(storage.join(str(options.out), f"{target.stem}_prob.tif"))
        return [f.moved(str(out / storage.name(f.path))) for f in files]

    @classmethod
    def expected(cls, stem: str, options: Any) -> list[MapFile]:
        """The sidecar, the class map, the probability map and the preview, as the job has them."""
        files = [
            MapFile(f"{stem}_class.tif{AUX_SUFFIX}", cls.name, None, "application/xml", "metadata"),
            MapFile(f"{stem}_class.tif", cls.name, CLASS, COG_TYPE, "data", "Land-cover classes"),
        ]
        if options.probs:
            title = "Class probabilities"
            files.append(
                MapFile(f"{stem}_prob.tif", cls.name, PROBABILITIES, COG_TYPE, "data", title)
            )
        if options.preview:
            title = "Imagery beside the map"
            png = str(pystac.MediaType.PNG)
            files.append(MapFile(f"{stem}_preview.png", cls.name, PREVIEW, png, "overview", title))
        return files

    @classmethod
    def problem(cls, files: list[MapFile], check: TileCheck) -> str | None:
        """Why the maps are not complete COGs of this grid and fingerprint (see the module)."""
        by_key = {f.key: f.path for f in files}
        for what, key, bands, dtype in (
            ("class map", CLASS, 1, "uint8"),
            ("probability map", PROBABILITIES, check.num_classes, check.prob_dtype),
        ):
            url = by_key.get(key)
            if url is None:  # --no-probs
                continue
            local = local_file(url)
            if local is not None and not os.path.isfile(local):
                return f"{what}: missing"
            try:
                with open_dataset(url) as ds:
                    problem = map_problem(ds, check.grid, bands, check.tags, dtype)
            except FileNotFoundError:
                problem = "missing"
            except Exception as exc:  # any failure to open or read means: not complete
                problem = f"unreadable ({first_line(exc, 200)})"
            if problem:
                return f"{what}: {problem}"
        preview = by_key.get(PREVIEW)
        if preview is not None and not storage.is_file(preview):
            return "preview: missing"
        return None


def map_problem(
    ds: rasterio.io.DatasetReader,
    grid: Grid,
    bands: int,
    tags: dict[str, str],
    dtype: str | None,
) -> str | None:
    """Why an open map is not a complete COG for this grid and these tags, if it is not.

    Everything is read from the file as GDAL reports it: the layout (``LAYOUT=COG``), the
    block shapes, the overviews, the grid, bands and data type. (rasterio's
    ``profile['tiled']`` is no guide: it is ``False`` for a tiled map exactly one block wide.)
    """
    if ds.driver != "GTiff" or ds.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") != "COG":
        return "not a Cloud Optimized GeoTIFF"
    if any(shape != (COG_BLOCK, COG_BLOCK) for shape in ds.block_shapes):
        return f"not in {COG_BLOCK} x {COG_BLOCK} px blocks"
    if max(ds.width, ds.height) > COG_BLOCK and not ds.overviews(1):
        return "has no overviews"
    if Grid.of(ds) != grid:
        return "not on the input's grid"
    if ds.count != bands:
        return f"has {ds.count} bands, not {bands}"
    if dtype is not None and any(d != dtype for d in ds.dtypes):
        return f"is {ds.dtypes[0]}, not {dtype}"
    found = ds.tags()
    if any(found.get(name) != value for name, value in tags.items()):
        return "made by another model or with other options"
    height, width = ds.block_shapes[0]
    row = (ds.height - 1) // height * height
    col = (ds.width - 1) // width * width
    window = rasterio.windows.Window(col, row, ds.width - col, ds.height - row)
    ds.read(1, window=window)  # the last block: a truncated file fails here
    return None
