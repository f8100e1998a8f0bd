"""The map-writer seam: a toy ``.npy`` writer, defined and registered here alone, used by a job.

The writer below is all a new output format takes (docs/guide/extending.md, "A map writer"):
the region job writes its files beside the COGs, lists them in its records and STAC items,
and skips a tile on a rerun only when the writer finds its files complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio

from landcover.inference.results import MapFile
from landcover.inference.sinks import MapSink, MapTarget, TileCheck, register_map_writer
from landcover.synthetic.synthetic import synthesize_scene

from conftest import run_cli, write_naip_tile

NPY_TYPE = "application/x-npy"


@register_map_writer("npy")
class NpySink(MapSink):
    """Writes a tile's classes and probabilities as ``.npy`` arrays, strip by strip (memmaps)."""

    def __init__(self, target: MapTarget) -> None:
        super().__init__(target)
        shape = (target.src.height, target.src.width)
        scratch = target.scratch
        self.arrays = {"class": np.lib.format.open_memmap(scratch / "c.npy", "w+", "uint8", shape)}
        if target.prob_dtype is not None:
            probs = (len(target.mapping.names), *shape)
            self.arrays["prob"] = np.lib.format.open_memmap(
                scratch / "p.npy", "w+", target.prob_dtype, probs
            )

    def write(self, strip: Any) -> None:
        rows = slice(strip.row, strip.row + strip.classes.shape[0])
        self.arrays["class"][rows] = strip.classes
        if "prob" in self.arrays:
            self.arrays["prob"][:, rows] = strip.probs

    def close(self) -> None:
        for array in self.arrays.values():
            array.flush()

    def publish(self) -> list[MapFile]:
        self.close()
        out, stem = self.target.out, self.target.stem
        for kind, array in self.arrays.items():
            os.replace(array.filename, out / f"{stem}_{kind}.npy")
        (out / f"{stem}_npy.json").write_text(json.dumps(self.target.tags))  # last: complete
        files = self.expected(stem, self.target.options)
        return [f.moved(str(out / f.path)) for f in files]

    @classmethod
    def expected(cls, stem: str, options: Any) -> list[MapFile]:
        files = [MapFile(f"{stem}_class.npy", cls.name, "npy-class", NPY_TYPE, "data", "Classes")]
        if options.probs:
            files.append(MapFile(f"{stem}_prob.npy", cls.name, "npy-prob", NPY_TYPE))
        return [*files, MapFile(f"{stem}_npy.json", cls.name, None, "application/json")]

    @classmethod
    def problem(cls, files: list[MapFile], check: TileCheck) -> str | None:
        grid = check.grid
        for file in files:
            if not os.path.isfile(file.path):
                return f"{Path(file.path).name}: missing"
            if file.key == "npy-class":
                shape = np.load(file.path, mmap_mode="r").shape
                if shape != (grid.height, grid.width):
                    return f"{Path(file.path).name}: {shape}, not on the input's grid"
            elif file.key is None:
                tags = json.loads(Path(file.path).read_text())
                if any(tags.get(k) != v for k, v in check.tags.items()):
                    return "made by another model or with other options"
        return None


@pytest.fixture(scope="module")
def two_tiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("npy-region")
    for seed, (name, height, width, corner) in enumerate(
        [("n1", 96, 128, (400000, 4300000)), ("n2", 80, 64, (400200, 4300000))]
    ):
        image, _ = synthesize_scene(height, width, np.random.default_rng(seed))
        write_naip_tile(folder / f"{name}_naip.tif", image, "EPSG:26918", 1.0, corner)
    return folder


def predict(tiles: Path, checkpoint: Path, out: Path, *extra: str):
    args = ["predict", str(tiles), "--checkpoint", str(checkpoint), "--out", str(out)]
    return run_cli(*args, "--workers", "1", "--device", "cpu", *extra)


def statuses(out: Path) -> dict[str, str]:
    tiles = json.loads((out / "summary.json").read_text())["tiles"]
    return {Path(t["tile"]).name.split("_")[0]: t["status"] for t in tiles}


def test_a_job_writes_the_toy_writers_files_equal_to_the_cogs_and_resumes_on_them(
    two_tiles: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    result = predict(two_tiles, quick_checkpoint, out, "--map-writer", "cog,npy")
    assert result.returncode == 0, result.stderr
    assert statuses(out) == {"n1": "done", "n2": "done"}
    for stem in ("n1_naip", "n2_naip"):
        with rasterio.open(out / f"{stem}_class.tif") as ds:
            classes = ds.read(1)
        with rasterio.open(out / f"{stem}_prob.tif") as ds:
            probs = ds.read()
        np.testing.assert_array_equal(np.load(out / f"{stem}_class.npy"), classes)
        np.testing.assert_array_equal(np.load(out / f"{stem}_prob.npy"), probs)
        assert (out / f"{stem}_preview.png").is_file()  # the cog writer's files as ever
    assert not list(out.glob(".*"))  # no scratch folder left

    # the records list every writer's files; STAC items the toy writer's as assets
    summary = json.loads((out / "summary.json").read_text())
    files = {f["key"]: f for t in summary["tiles"] for f in t["outputs"]["files"]}
    assert {"class", "probabilities", "preview", "npy-class", "npy-prob"} <= set(files)
    items = json.loads((out / "stac_items.json").read_text())["features"]
    assets = {item["id"]: item["assets"] for item in items}
    assert assets["n1_naip"]["npy-class"]["href"] == "./n1_naip_class.npy"
    assert assets["n1_naip"]["npy-class"]["type"] == NPY_TYPE
    assert assets["n2_naip"]["npy-prob"]["roles"] == ["data"]
    assert "class" in assets["n1_naip"] and "probabilities" in assets["n1_naip"]

    # a rerun skips complete tiles; a tile whose .npy is missing is predicted again
    (out / "n2_naip_prob.npy").unlink()
    result = predict(two_tiles, quick_checkpoint, out, "--map-writer", "cog,npy")
    assert result.returncode == 0, result.stderr
    assert statuses(out) == {"n1": "skipped", "n2": "done"}
    assert (out / "n2_naip_prob.npy").is_file()
    # the same job without the toy writer finds the COGs complete
    result = predict(two_tiles, quick_checkpoint, out)
    assert result.returncode == 0, result.stderr
    assert statuses(out) == {"n1": "skipped", "n2": "skipped"}


def test_an_unknown_writer_or_one_without_the_cogs_is_refused_before_any_work(
    two_tiles: Path, tmp_path: Path
) -> None:
    for choice, needle in (("cog,zarr", "unknown map writer 'zarr'"), ("npy", "needs cog")):
        result = predict(two_tiles, tmp_path / "missing.pt", tmp_path / "o", "--map-writer", choice)
        assert result.returncode == 2, result.stderr
        assert needle in result.stderr and "--map-writer" in result.stderr
    assert not (tmp_path / "o").exists()
