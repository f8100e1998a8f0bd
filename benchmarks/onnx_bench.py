"""ONNX Runtime against torch eager: predict's forward on the CPU, for the CPU and default models.

For ``configs/cpu.yaml`` and ``configs/default.yaml`` the model (random weights, built as
training builds it) is exported as ``landcover export --format onnx`` exports it (the
product's :func:`~landcover.export.artifacts.write_model`: opset 18, dynamic batch and sides,
checked against torch on a probe) and run on a batch of predict's windows at predict's window
and batch (:func:`~landcover.inference.sliding.resolve_geometry`): torch eager
(``model(x)`` under ``no_grad``, fp32) and an ONNX Runtime session (CPU provider, as many
intra-op threads as torch has), in alternating rounds in one process. The windows are a
synthetic NAIP-like scene (``synthesize_scene``), normalised by per-tile statistics. Rows:
Mpx/s of each (median round), the ratio, and how far apart they are: the largest difference
of a softmax probability, and the share of pixels whose arg-max class agrees (with random
weights the classes are near ties far more often than a trained model's).

Then, per config, a checkpoint of the same model is exported by ``landcover export``'s own
function and a synthetic region of three tiles is mapped through the region job with the
checkpoint and with the exported model (``predict --model``): ``onnx_agreement.csv`` has the
class maps' pixel agreement, whether they are identical wherever the checkpoint's top two
probabilities differ by more than 1/255, and the largest probability difference.

Usage: python benchmarks/onnx_bench.py [--quick] [--rounds N] [--out DIR]
(``--quick``: one window of 256 px per model, two rounds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, write_results

PART = "onnx"
CONFIGS = {"cpu": REPO / "configs" / "cpu.yaml", "default": REPO / "configs" / "default.yaml"}


def windows(batch: int, size: int, bands: int) -> torch.Tensor:
    """A batch of normalised windows of a synthetic scene (per-tile statistics)."""
    from landcover.data.normalize import BandNormalizer, array_band_stats
    from landcover.synthetic.synthetic import synthesize_scene

    image, _ = synthesize_scene(size, size * batch, np.random.default_rng(0))
    pixels = np.ascontiguousarray(np.moveaxis(image[:bands], 0, -1))  # (H, W * batch, C)
    stats = array_band_stats(pixels, None)
    assert stats is not None
    tiles = np.stack([pixels[:, i * size : (i + 1) * size] for i in range(batch)])
    return BandNormalizer(stats.mean, stats.std, torch.device("cpu"))(torch.from_numpy(tiles))


def measure(name: str, quick: bool, rounds: int, scratch: Path) -> dict[str, Any]:
    """One config's row: export, then alternating rounds of torch and ONNX Runtime."""
    import onnxruntime

    from landcover.config import load_config
    from landcover.export.artifacts import OPSET, write_model
    from landcover.inference.sliding import resolve_geometry
    from landcover.models import build_model

    config = load_config(CONFIGS[name])
    bands, classes = len(config.data.bands), config.data.classes.num_classes
    window, _, batch = resolve_geometry(config.data.patch_size)
    if quick:
        window, batch = 256, 1
    torch.manual_seed(0)
    model = build_model(config.model, bands, classes, config.data.patch_size).eval()
    path = scratch / f"{name}.onnx"
    start = time.perf_counter()
    write_model(model, "onnx", bands, config.data.patch_size, path, f"configs/{name}.yaml")
    export_s = time.perf_counter() - start
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    x = windows(batch, window, bands)
    feed = {"image": x.numpy()}

    def eager() -> np.ndarray:
        with torch.no_grad():
            return model(x).numpy()

    def onnx() -> np.ndarray:
        return session.run(None, feed)[0]

    expected, got = eager(), onnx()  # warm-up, and the comparison
    times: dict[str, list[float]] = {"torch": [], "onnxruntime": []}
    for _ in range(rounds):
        for label, call in (("torch", eager), ("onnxruntime", onnx)):
            t = time.perf_counter()
            call()
            times[label].append(time.perf_counter() - t)
    mpx = batch * window * window / 1e6
    p_torch = torch.softmax(torch.from_numpy(expected), 1)
    p_onnx = torch.softmax(torch.from_numpy(got), 1)
    torch_mpx = mpx / statistics.median(times["torch"])
    onnx_mpx = mpx / statistics.median(times["onnxruntime"])
    return {
        "config": f"configs/{name}.yaml",
        "model": f"{config.model.arch}/{config.model.encoder}",
        "window": window,
        "batch": batch,
        "threads": torch.get_num_threads(),
        "torch_mpx_s": round(torch_mpx, 3),
        "onnxruntime_mpx_s": round(onnx_mpx, 3),
        "onnx_over_torch": round(onnx_mpx / torch_mpx, 3),
        "max_prob_diff": float((p_onnx - p_torch).abs().max()),
        "class_agreement": float((p_onnx.argmax(1) == p_torch.argmax(1)).float().mean()),
        "export_s": round(export_s, 1),
        "opset": OPSET,
        "rounds": rounds,
        "onnxruntime": onnxruntime.__version__,
    }


def region_agreement(name: str, scratch: Path) -> dict[str, Any]:
    """The class maps of a synthetic region through the checkpoint and through ``--model``.

    A checkpoint of the config's model (random weights, band statistics of a typical NAIP
    flight) is exported with ``landcover export``'s own function and both map three synthetic
    tiles through the region job (float32 probabilities); the row says how far apart they are.
    """
    import rasterio
    from rasterio.transform import from_origin

    from landcover.checkpoint import Checkpoint
    from landcover.config import RunConfig, load_config
    from landcover.export.command import export_model
    from landcover.inference.options import PredictOptions
    from landcover.mapping.job import run_predict_job
    from landcover.mapping.spec import JobOptions
    from landcover.models import build_model
    from landcover.synthetic.synthetic import synthesize_scene

    stats = {"data.mean": [0.36, 0.42, 0.33, 0.49], "data.std": [0.14, 0.14, 0.11, 0.19]}
    config = load_config(CONFIGS[name], stats)
    torch.manual_seed(0)
    model = build_model(config.model, len(config.data.bands), config.data.classes.num_classes, 64)
    ckpt = scratch / f"{name}.pt"
    state = Checkpoint(model=model.state_dict(), config=config.to_dict(), pixel_size_m=1.0)
    ckpt.write_bytes(state.serialize())
    exported = export_model(str(ckpt), "onnx", str(scratch / f"{name}-model"))
    region = scratch / f"{name}-region"
    region.mkdir()
    for i, (height, width) in enumerate([(300, 280), (256, 384), (200, 200)]):
        image, _ = synthesize_scene(height, width, np.random.default_rng(100 + i))
        profile = {"driver": "GTiff", "height": height, "width": width, "count": 4}
        profile.update(dtype="uint8", crs="EPSG:26918", nodata=0)
        profile["transform"] = from_origin(400000 + 1000 * i, 4300000, 1.0, 1.0)
        with rasterio.open(region / f"t{i}_naip.tif", "w", **profile) as ds:
            ds.write(image)
    maps = {}
    for label, model_path in (("checkpoint", ckpt), ("onnx", exported.model)):
        out = scratch / f"{name}-{label}"
        options = PredictOptions(str(out), prob_dtype="float32", preview=False)
        run_predict_job([str(region)], str(model_path), options, JobOptions(), "cpu", RunConfig())
        maps[label] = out
    agree = total = clear_total = clear_same = 0
    worst = 0.0
    for tile in sorted(region.glob("*_naip.tif")):
        read = {}
        for label, out in maps.items():
            with rasterio.open(out / f"{tile.stem}_class.tif") as ds:
                classes = ds.read(1)
            with rasterio.open(out / f"{tile.stem}_prob.tif") as ds:
                read[label] = (classes, ds.read())
        (c_t, p_t), (c_o, p_o) = read["checkpoint"], read["onnx"]
        worst = max(worst, float(np.abs(p_o - p_t).max()))
        top2 = np.sort(p_t, axis=0)[-2:]
        clear = (top2[1] - top2[0]) > 1 / 255
        agree += int((c_o == c_t).sum())
        total += c_t.size
        clear_total += int(clear.sum())
        clear_same += int((c_o[clear] == c_t[clear]).sum())
    return {
        "config": f"configs/{name}.yaml",
        "normalize": config.data.normalize,
        "pixels": total,
        "class_agreement": round(agree / total, 6),
        "clear_pixels": clear_total,
        "clear_identical": clear_same == clear_total,
        "max_prob_diff": worst,
    }


def run(quick: bool, out: Path, rounds: int | None = None) -> list[Goal]:
    """Runs the part: both configs, in one process.

    Args:
        quick: One 256 px window per model, two rounds.
        out: Results folder.
        rounds: Rounds of each (default 5; quick 2).

    Returns:
        The part's goals.
    """
    rounds = rounds or (2 if quick else 5)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lc-onnx-") as scratch:
        rows = [measure(name, quick, rounds, Path(scratch)) for name in CONFIGS]
        agreement = [region_agreement(name, Path(scratch)) for name in CONFIGS]
    goals = [
        Goal(
            PART,
            f"ONNX Runtime / torch eager, predict's forward, {row['config']}",
            row["onnx_over_torch"],
            ">= 1",
            row["onnx_over_torch"] >= 1,
            f"{row['batch']} x {row['window']} px, {row['threads']} threads, CPU provider",
        )
        for row in rows
    ] + [
        Goal(
            PART,
            f"class map through --model / the checkpoint's, synthetic region, {row['config']}",
            row["class_agreement"],
            ">= 0.999, identical where the top two differ by > 1/255",
            row["class_agreement"] >= 0.999 and row["clear_identical"],
            f"{row['pixels']} px, {row['normalize']} normalisation, random weights; "
            f"probabilities within {row['max_prob_diff']:.2g}",
        )
        for row in agreement
    ]
    extra = {
        "settings": {"quick": quick, "rounds": rounds},
        "loadavg_end": os.getloadavg(),
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_results(f"{PART}_agreement", agreement, {}, out)
    write_results(PART, rows, extra, out, goals)
    return goals


def main() -> None:
    """Runs the part from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one 256 px window, two rounds")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of each")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    args = parser.parse_args()
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    run(args.quick, out, args.rounds)


if __name__ == "__main__":
    main()
