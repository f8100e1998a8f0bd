"""``landcover export`` and ``predict``/``evaluate --model``: the exported model maps as the checkpoint.

The tiny trained model is exported twice: with per-tile normalisation (its checkpoint's config
switched to ``per_tile``) as ONNX through the CLI, and as it is (global statistics) as a torch
exported program. A small region of synthetic tiles (one larger than a window, one with a
no-data corner) is mapped through the region job with the checkpoint and with the ONNX model;
the class maps must agree on at least 99.9 % of pixels and wherever the checkpoint's top two
probabilities differ by more than 1/255, and the float32 probabilities within
:data:`PROB_TOLERANCE`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pystac
import pystac.validation
import pytest
import rasterio
import torch
from mapagreement import PROB_TOLERANCE, assert_maps_agree, clear_pixels, read
from pystac.extensions.mlm import AssetGeneralMLMExtension, MLMExtension, ValueScaling
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from landcover.checkpoint import load_checkpoint
from landcover.config import RunConfig
from landcover.export.command import export_model
from landcover.inference.loader import load_inference_model
from landcover.inference.options import PredictOptions
from landcover.inference.predict import predict_tile
from landcover.inference.runner import load_model
from landcover.mapping.job import run_predict_job
from landcover.mapping.spec import JobOptions
from landcover.synthetic.synthetic import synthesize_scene

from conftest import REPO, assert_one_line_error, run_cli, write_naip_tile

# (name, height, width): one tile of several windows (the tiny model's window is 256 px)
TILES = [("r1", 300, 280), ("r2", 96, 128), ("r3", 128, 160)]


@pytest.fixture(scope="module")
def per_tile_checkpoint(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny trained model's checkpoint, its config switched to per-tile normalisation."""
    state = load_checkpoint(checkpoint)
    state.config["data"]["normalize"] = "per_tile"
    path = tmp_path_factory.mktemp("per-tile") / "per_tile.pt"
    path.write_bytes(state.serialize())
    return path


@pytest.fixture(scope="module")
def exported(per_tile_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``landcover export CHECKPOINT --format onnx --out DIR``: the folder."""
    out = tmp_path_factory.mktemp("exported") / "model"
    result = run_cli("export", str(per_tile_checkpoint), "--format", "onnx", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("model.onnx")
    return out


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("region")
    for seed, (name, height, width) in enumerate(TILES):
        image, _ = synthesize_scene(height, width, np.random.default_rng(40 + seed))
        if name == "r3":
            image[:, :40, :50] = 0  # a no-data corner: per-tile statistics skip it
        corner = (400000 + 1000 * seed, 4300000)
        write_naip_tile(folder / f"{name}_naip.tif", image, "EPSG:26918", 1.0, corner)
    return folder


@pytest.fixture(scope="module")
def maps(
    region: Path,
    per_tile_checkpoint: Path,
    exported: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path]:
    """The region mapped with the checkpoint (in this process) and with ``--model`` (the CLI)."""
    base = tmp_path_factory.mktemp("maps")
    torch_out, onnx_out = base / "checkpoint", base / "onnx"
    options = PredictOptions(str(torch_out), prob_dtype="float32", preview=False)
    run_predict_job(
        [str(region)], str(per_tile_checkpoint), options, JobOptions(), "cpu", RunConfig()
    )
    result = run_cli(
        "predict", str(region), "--model", str(exported / "model.onnx"), "--out", str(onnx_out),
        "--prob-dtype", "float32", "--no-preview", "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return torch_out, onnx_out


def test_export_writes_the_model_its_metadata_and_a_stac_item(
    exported: Path, per_tile_checkpoint: Path
) -> None:
    assert sorted(p.name for p in exported.iterdir()) == [
        "model.json",
        "model.onnx",
        "model.stac.json",
    ]
    assert not list(exported.parent.glob(".model.export-*"))  # the scratch folder is gone
    meta = json.loads((exported / "model.json").read_text())
    config = load_checkpoint(per_tile_checkpoint).config
    assert meta["runtime"] == "onnx" and meta["opset"] == 18
    assert meta["bands"] == config["data"]["bands"]
    assert meta["normalization"]["mode"] == "per_tile"
    assert "tile's own mean and standard deviation" in meta["normalization"]["recipe"]
    assert meta["normalization"]["mean"] == config["data"]["mean"]
    assert [c["name"] for c in meta["classes"]] == [
        c["name"] for c in config["data"]["classes"]["classes"]
    ]
    assert [c["codes"] for c in meta["classes"]][:2] == [[1], [2]]
    assert meta["classes"][0]["color"] == "#0000ff"
    patch = config["data"]["patch_size"]
    assert (meta["window"], meta["overlap"]) == (4 * patch, patch // 4)  # predict's defaults
    model = onnx.load(str(exported / "model.onnx"))
    assert {o.domain: o.version for o in model.opset_import}[""] == 18
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [bool(d.dim_param) for d in dims] == [True, False, True, True]  # batch, sides
    assert dims[1].dim_value == len(meta["bands"])


def test_the_onnx_file_carries_its_card_for_a_client_given_it_alone(exported: Path) -> None:
    import onnxruntime

    session = onnxruntime.InferenceSession(
        str(exported / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    inside = session.get_modelmeta().custom_metadata_map
    card = json.loads((exported / "model.json").read_text())
    embedded = json.loads(inside["landcover:model.json"])
    # the card, but for the size and hash of the very file it is inside
    assert embedded == {**card, "model_sha256": None, "model_bytes": None}
    names = [c["name"] for c in card["classes"]]
    assert json.loads(inside["class_names"]) == {str(i): n for i, n in enumerate(names)}
    assert session.get_modelmeta().description.startswith("landcover ")


def test_the_card_names_no_place_of_the_training_machines(
    exported: Path, per_tile_checkpoint: Path
) -> None:
    trained = load_checkpoint(per_tile_checkpoint).config
    places = [trained["data"]["root"] or trained["data"]["manifest"], trained["run"]["out"]]
    assert all(p and Path(p).is_absolute() for p in places), places
    card = json.loads((exported / "model.json").read_text())
    for place in places:
        for file in ("model.json", "model.onnx", "model.stac.json"):
            assert place.encode() not in (exported / file).read_bytes(), (place, file)
    root = card["config"]["data"]["root"] or card["config"]["data"]["manifest"]
    assert root == Path(places[0]).name and card["config"]["run"]["out"] == Path(places[1]).name


SCHEMAS = Path(__file__).parent / "schemas"  # copied from the extensions' repositories
EXTENSIONS = "https://stac-extensions.github.io"
MLM_SCHEMA = f"{EXTENSIONS}/mlm/v1.4.0/schema.json"


def mlm_validator() -> jsonschema.Draft7Validator:
    """The MLM extension's schema with the schemas it refers to, offline (schemas/README.md).

    The registry has no way to fetch: a reference to a schema not in it fails the test.
    """
    resources = []
    for name, version in [("mlm", "v1.4.0"), ("classification", "v1.1.0"),
                          ("processing", "v1.1.0"), ("raster", "v1.1.0")]:  # fmt: skip
        contents = json.loads((SCHEMAS / f"{name}-{version}.json").read_text())
        resource = Resource.from_contents(contents, default_specification=DRAFT7)
        resources.append((f"{EXTENSIONS}/{name}/{version}/schema.json", resource))
    schema = json.loads((SCHEMAS / "mlm-v1.4.0.json").read_text())
    return jsonschema.Draft7Validator(schema, registry=Registry().with_resources(resources))


def test_stac_item_validates_against_the_mlm_extensions_schema_offline(exported: Path) -> None:
    item = json.loads((exported / "model.stac.json").read_text())
    assert MLM_SCHEMA in item["stac_extensions"]  # the version the shipped schema is
    validator = mlm_validator()
    errors = [error.message for error in validator.iter_errors(item)]
    assert not errors, errors[:5]
    # STAC 1.1's core item schema (bundled by pystac): item-level bands need an asset's
    pystac.validation.validate_dict(item, pystac.STACObjectType.ITEM, extensions=[])
    assert item["assets"]["model"]["bands"] == item["properties"]["bands"]
    # and the schema is not a formality: an item without its input, or with a task the
    # extension does not know, fails it
    no_input = json.loads(json.dumps(item))
    del no_input["properties"]["mlm:input"]
    assert list(validator.iter_errors(no_input))
    bad_task = json.loads(json.dumps(item))
    bad_task["properties"]["mlm:tasks"] = ["painting"]
    assert list(validator.iter_errors(bad_task))


def test_stac_item_describes_the_model_with_the_mlm_extension(exported: Path) -> None:
    meta = json.loads((exported / "model.json").read_text())
    item = pystac.Item.from_file(str(exported / "model.stac.json"))
    assert MLMExtension.has_extension(item)
    # the checkpoint's name and its weights' hash: two exports of a best.pt are two items
    stem = meta["source_checkpoint"].rsplit(".", 1)[0]
    assert item.id == f"{stem}-{meta['weights_sha256'][:12]}"
    mlm = MLMExtension.ext(item)  # pystac's classes read every required field back
    assert mlm.architecture == "Unet" and mlm.framework == "ONNX"
    assert list(mlm.tasks) == ["semantic-segmentation"]
    (model_input,) = mlm.input
    assert model_input.bands == meta["bands"]
    assert model_input.input.shape == [-1, len(meta["bands"]), -1, -1]
    assert model_input.input.dim_order == ["batch", "bands", "height", "width"]
    assert model_input.value_scaling is None  # per tile: a pre-processing function instead
    assert model_input.pre_processing_function.expression == meta["normalization"]["recipe"]
    (output,) = mlm.output
    assert output.result.shape == [-1, len(meta["classes"]), -1, -1]
    assert [c.name for c in output.classes] == [c["name"] for c in meta["classes"]]
    assert [c.value for c in output.classes] == list(range(len(meta["classes"])))
    asset = item.assets["model"]
    assert asset.href.endswith("model.onnx") and "mlm:model" in asset.roles
    assert AssetGeneralMLMExtension.ext(asset).artifact_type == "onnx"
    assert item.properties["landcover:window"] == meta["window"]
    # what the extension's schema asks beyond pystac's classes: the bands described in the
    # item (STAC 1.1), a semantic framework version, colours as 6 hex digits
    assert item.properties["bands"] == [{"name": band} for band in meta["bands"]]
    assert mlm.framework_version == onnx.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+([-+].*)?", mlm.framework_version)
    assert item.properties["landcover:onnx_opset"] == 18
    assert [c.color_hint for c in output.classes] == [
        c["color"][1:].upper() for c in meta["classes"]
    ]
    assert "mlm:artifact_type" not in item.properties  # an asset's field only


def test_onnx_model_maps_the_region_as_the_checkpoint(maps: tuple[Path, Path]) -> None:
    torch_out, onnx_out = maps
    assert_maps_agree(torch_out, onnx_out, TILES)
    summary_t = json.loads((torch_out / "summary.json").read_text())
    summary_o = json.loads((onnx_out / "summary.json").read_text())
    assert summary_o["job"]["checkpoint"].endswith("model.onnx")
    assert summary_o["tiles_by_status"] == summary_t["tiles_by_status"] == {
        "done": 3, "skipped": 0, "failed": 0, "not_run": 0
    }  # fmt: skip
    assert (onnx_out / "stac_items.json").is_file() and (onnx_out / "mosaic_class.vrt").is_file()


def test_maps_of_the_model_name_the_weights_its_card_names(
    maps: tuple[Path, Path], exported: Path, per_tile_checkpoint: Path
) -> None:
    card = json.loads((exported / "model.json").read_text())
    # the checkpoint's weights hashed here, independently: name, dtype, shape and bytes
    state = load_checkpoint(per_tile_checkpoint).model
    digest = hashlib.sha256()
    for name, tensor in sorted(state.items()):
        flat = tensor.contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    assert card["weights_sha256"] == digest.hexdigest()
    tags = {}
    for out in maps:
        with rasterio.open(next(out.glob("*_class.tif"))) as ds:
            tags[out.name] = ds.tags()
        items = json.loads((out / "stac_items.json").read_text())["features"]
        assert {i["properties"]["landcover:model_sha256"] for i in items} == {digest.hexdigest()}
    assert tags["checkpoint"]["MODEL_SHA256"] == tags["onnx"]["MODEL_SHA256"] == digest.hexdigest()
    # one model, two runtimes: a job resumed with the other one maps its tiles again
    assert tags["checkpoint"]["LANDCOVER_FINGERPRINT"] != tags["onnx"]["LANDCOVER_FINGERPRINT"]


def test_evaluate_with_the_model_scores_as_the_checkpoint(
    exported: Path, per_tile_checkpoint: Path, tiny_data: Path, tmp_path: Path
) -> None:
    pairs = tmp_path / "pairs"  # two of the tiny pairs
    pairs.mkdir()
    for name in ("synth_000", "synth_001"):
        for suffix in ("_naip.tif", "_lc.tif"):
            (pairs / f"{name}{suffix}").symlink_to(tiny_data / f"{name}{suffix}")
    scores = []
    for flag, model in (
        ("--checkpoint", per_tile_checkpoint),
        ("--model", exported / "model.onnx"),
    ):
        out = tmp_path / flag.strip("-")
        result = run_cli("evaluate", flag, str(model), "--data", str(pairs), "--out", str(out))
        assert result.returncode == 0, result.stderr
        scores.append(json.loads((out / "metrics.json").read_text()))
    assert scores[1]["miou"] == pytest.approx(scores[0]["miou"], abs=1e-3)
    assert scores[1]["accuracy"] == pytest.approx(scores[0]["accuracy"], abs=1e-3)


def test_exported_program_gives_the_checkpoints_logits(checkpoint: Path, tmp_path: Path) -> None:
    done = export_model(str(checkpoint), "exported-program", str(tmp_path / "ep"))
    assert done.model.name == "model.pt2" and done.opset is None
    program = torch.export.load(str(done.model)).module()
    model = load_inference_model(checkpoint, "cpu").model
    x = torch.randn(3, 4, 96, 160)  # another batch and size than the example's
    with torch.no_grad():
        assert torch.allclose(program(x), model(x), atol=1e-4)
    mlm = MLMExtension.ext(pystac.Item.from_file(str(done.stac_item)))
    # global statistics: one z-score per band on the 0..255 pixels, a list as the schema has it
    scalings = mlm.input[0].properties["value_scaling"]
    data = load_checkpoint(checkpoint).config["data"]
    assert len(scalings) == len(data["bands"])
    for scaling, mean, std in zip(scalings, data["mean"], data["std"], strict=True):
        ValueScaling.validate_property_dict(scaling["type"], scaling)
        assert scaling["type"] == "z-score"
        assert scaling["mean"] == pytest.approx(255 * mean)
        assert scaling["stddev"] == pytest.approx(255 * std)
    assert mlm.framework == "PyTorch" and mlm.framework_version == torch.__version__


def test_model_option_errors_are_one_line(
    exported: Path, per_tile_checkpoint: Path, region: Path, tmp_path: Path
) -> None:
    model = str(exported / "model.onnx")
    both = run_cli("predict", str(region), "-k", str(per_tile_checkpoint), "--model", model)
    assert_one_line_error(both, "--checkpoint or --model")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(model, alone / "model.onnx")
    missing = run_cli(
        "predict", str(region), "--model", str(alone / "model.onnx"), "--out", str(tmp_path / "o")
    )
    assert_one_line_error(missing, "model.json is not beside it")
    assert not (tmp_path / "o").exists()
    program = tmp_path / "model.pt2"  # refused before it is opened: it need not exist
    pt2 = run_cli("predict", str(region), "--model", str(program), "--out", str(tmp_path / "o"))
    assert_one_line_error(pt2, "exported program", "--format onnx")
    assert not (tmp_path / "o").exists()


def docs_snippet() -> str:
    """The ONNX Runtime snippet of docs/guide/export.md, as written there."""
    text = (REPO / "docs" / "guide" / "export.md").read_text()
    section = text.split("## Run it without landcover", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_docs_snippet_maps_a_window_as_predict_does(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = docs_snippet()
    assert len(code.strip().splitlines()) <= 15
    image, _ = synthesize_scene(128, 128, np.random.default_rng(11))
    tile = write_naip_tile(
        tmp_path / "tile.tif", np.maximum(image, 1), "EPSG:26918", 1.0, (400000, 4300000)
    )
    (tmp_path / "model").symlink_to(exported)
    namespace: dict = {}
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/guide/export.md", "exec"), namespace)  # landcover not imported

    # the tile is one window: predict's map of it (its per-tile statistics are the window's)
    options = PredictOptions(str(tmp_path / "maps"), prob_dtype="float32", preview=False)
    result = predict_tile(str(tile), load_model(exported / "model.onnx", "cpu"), options)
    classes, probs = read(Path(result.class_map))[0], read(Path(result.prob_map))
    assert np.abs(namespace["probs"] - probs).max() <= PROB_TOLERANCE
    clear = clear_pixels(probs)
    assert np.array_equal(namespace["classes"][clear], classes[clear])
    assert (namespace["classes"] == classes).mean() >= 0.999
