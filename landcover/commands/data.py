"""``landcover data``: sample data, transfers, checks, statistics and tiling."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from landcover.commands.options import (
    BandsOption,
    ClassesOption,
    ConcurrencyOption,
    ImageSuffixOption,
    LabelSuffixOption,
    class_mapping,
)

data_app = typer.Typer(help="Sample data and data tools.", no_args_is_help=True)


@data_app.command("synth")
def data_synth(
    out: Annotated[Path, typer.Argument(help="Output folder.")],
    tiles: Annotated[
        int | None,
        typer.Option(
            min=1, help="Tile pairs (easy, default 8); training tiles (shifted, default 16)."
        ),
    ] = None,
    size: Annotated[
        int | None,
        typer.Option(min=32, help="Tile side in pixels (easy: 512; shifted: 256, >= 128)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed; same seed, same files.")] = 0,
    prefix: Annotated[str, typer.Option(help="File-name prefix.")] = "synth",
    profile: Annotated[
        str, typer.Option(help="easy (one radiometry, the built-in sample) or shifted.")
    ] = "easy",
    overwrite: Annotated[
        bool,
        typer.Option(
            help="Replace the PREFIX_* tile pairs already in OUT (once the new ones are written)."
        ),
    ] = False,
) -> None:
    """Write synthetic NAIP-like {name}_naip.tif / {name}_lc.tif pairs.

    --profile easy (the default): OUT/{prefix}_NNN pairs with one radiometry
    and generous classes, like the built-in sample.

    --profile shifted: the difficulties of real NAIP. OUT/train, OUT/val and
    OUT/test (TILES training tiles, a quarter as many for validation, half as
    many for test), each split from its own flights (gain and offset, gamma,
    haze, sun and shadows, season, noise, JPEG); forest, farmland and town
    tiles; buildings <= 0.5 % of the training pixels, roads partly under
    canopy. OUT/train_reflown: the training scenes (same labels) as a flight
    no split saw. OUT/flights.csv: each tile's flight and its parameters.
    OUT/manifest.csv (image,label,split) for data.manifest.

    A folder that already holds PREFIX_* tiles (easy), or a shifted world
    (shifted: one a folder), is refused, as the two sets would mix;
    --overwrite replaces them once the new set is whole.
    """
    from landcover.diskerrors import check_output_folder

    if profile not in ("easy", "shifted"):
        raise typer.BadParameter(
            f"unknown profile {profile!r} (easy or shifted)", param_hint="--profile"
        )
    from landcover.synthetic.replacing import replacing

    check_output_folder(out)
    earlier = _earlier_or_refuse(out, prefix, profile, overwrite)
    if profile == "easy":
        from landcover.synthetic.synthetic import write_synthetic_dataset

        tiles, size = tiles or 8, size or 512
        with replacing(out, earlier) as target:
            pairs = write_synthetic_dataset(target, tiles, size, seed, prefix=prefix)
        typer.echo(f"wrote {len(pairs)} tile pairs of {size}x{size} px to {out}")
    else:
        from landcover.synthetic.shifted import MIN_SHIFTED_SIZE, write_shifted_world

        tiles, size = tiles or 16, size or 256
        if size < MIN_SHIFTED_SIZE:
            raise typer.BadParameter(
                f"the shifted world needs tiles of at least {MIN_SHIFTED_SIZE} px, got {size}",
                param_hint="--size",
            )
        with replacing(out, earlier) as target:
            written = write_shifted_world(target, tiles, size, seed, prefix=prefix)
        counts = {
            s: sum(t.split == s for t in written) for s in dict.fromkeys(t.split for t in written)
        }
        listed = ", ".join(f"{n} {s}" for s, n in counts.items())
        typer.echo(f"wrote {listed} tile pairs of {size}x{size} px to {out}")


def _earlier_or_refuse(out: Path, prefix: str, profile: str, overwrite: bool) -> list[Path]:
    """Refuses an output folder holding synthetic tiles of the prefix, or lists them.

    A shifted world is one a folder (its ``manifest.csv`` lists one world): any world there
    is refused, or replaced whole (:func:`~landcover.synthetic.replacing.replacing`).
    """
    from landcover.errors import DataError
    from landcover.synthetic.shifted import REFLOWN, SPLITS, world_files
    from landcover.synthetic.tiffile import pairs_written_before

    folders = [out] if profile == "easy" else [out / s for s in (*SPLITS, REFLOWN)]
    found = pairs_written_before(folders, prefix)
    if profile != "easy":
        found = sorted({*found, *world_files(out)})
    if found and not overwrite:
        what = f"{prefix}_* tile files" if profile == "easy" else "files of a shifted world"
        raise DataError(
            f"{out} already holds {len(found)} {what} (such as {found[0].name}): a second set "
            "would mix with them; write to another folder"
            + (", choose another --prefix," if profile == "easy" else "")
            + " or pass --overwrite to replace them"
        )
    return found


@data_app.command("sample")
def data_sample() -> None:
    """Print the folder of the built-in sample dataset (generating it on first use)."""
    from landcover.synthetic.sample import ensure_sample

    typer.echo(str(ensure_sample()))


@data_app.command("upload")
def data_upload(
    local: Annotated[Path, typer.Argument(help="Local file or folder (copied recursively).")],
    url: Annotated[
        str, typer.Argument(help="Destination: az://container/prefix, abfs://..., or a path.")
    ],
    concurrency: ConcurrencyOption = 8,
) -> None:
    """Upload a file or folder to Azure Blob Storage (credentials from AZURE_STORAGE_*)."""
    from landcover.storage.transfer import upload

    typer.echo(upload(local, url, concurrency).line())


@data_app.command("download")
def data_download(
    url: Annotated[
        str, typer.Argument(help="Source: az://container/prefix, abfs://..., a blob or a path.")
    ],
    local: Annotated[str, typer.Argument(help="Local folder (or file, for one blob).")],
    concurrency: ConcurrencyOption = 8,
) -> None:
    """Download a blob or every blob under a prefix (credentials from AZURE_STORAGE_*)."""
    from landcover.storage.transfer import download

    typer.echo(download(url, local, concurrency).line())


@data_app.command("check")
def data_check(
    data: Annotated[
        str, typer.Argument(help="Folder of image/label pairs or a manifest CSV: path or URL.")
    ],
    classes: ClassesOption = "chesapeake7",
    bands: BandsOption = 4,
    image_suffix: ImageSuffixOption = "_naip.tif",
    label_suffix: LabelSuffixOption = "_lc.tif",
) -> None:
    """Check every pair of a data folder or manifest; show its class balance; list bad files."""
    from landcover.data.check import run_check

    run_check(data, class_mapping(classes), bands, image_suffix, label_suffix)


@data_app.command("stats")
def data_stats(
    data: Annotated[
        str, typer.Argument(help="Folder of image/label pairs or a manifest CSV: path or URL.")
    ],
    classes: ClassesOption = "chesapeake7",
    out: Annotated[
        str | None,
        typer.Option(help="Output YAML (path or URL); default: {DATA name}_stats.yaml here."),
    ] = None,
    bands: BandsOption = 4,
    image_suffix: ImageSuffixOption = "_naip.tif",
    label_suffix: LabelSuffixOption = "_lc.tif",
) -> None:
    """Measure per-band mean/std and class frequencies; write them as an includable YAML."""
    from landcover.data.statsfile import run_stats

    run_stats(data, class_mapping(classes), bands, image_suffix, label_suffix, out)


@data_app.command("prepare")
def data_prepare(
    images: Annotated[
        list[str], typer.Option(help="Large NAIP GeoTIFF or quoted glob; repeat for more.")
    ],
    labels: Annotated[
        list[str], typer.Option(help="Label raster (any CRS or grid) or quoted glob; repeatable.")
    ],
    out: Annotated[Path, typer.Option(help="Output folder for the pairs and manifest.csv.")],
    tile_size: Annotated[int, typer.Option(min=16, help="Tile side in pixels.")] = 2048,
    min_valid: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Drop tiles with fewer labelled pixels.")
    ] = 0.5,
    classes: ClassesOption = "chesapeake7",
    bands: BandsOption = 4,
    overwrite: Annotated[
        bool,
        typer.Option(
            help="Replace the *_naip.tif / *_lc.tif pairs and manifest.csv already in OUT "
            "(once the new ones are written)."
        ),
    ] = False,
) -> None:
    """Cut large rasters into {name}_naip.tif / {name}_lc.tif tiles with labels on their grid.

    An OUT that already holds tile pairs (an earlier prepare's) is refused, as the two sets
    would mix; --overwrite replaces them once the new set is whole.
    """
    from landcover.data.prepare import prepare_tiles
    from landcover.diskerrors import check_output_folder

    mapping = class_mapping(classes)
    existed = out.exists()
    check_output_folder(out)
    try:
        summary = prepare_tiles(
            images, labels, out, mapping, tile_size, min_valid, typer.echo, bands, overwrite
        )
    except BaseException:
        if not existed:  # the preflight made it: take it back if nothing was written
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    typer.echo(summary.line(min_valid))
