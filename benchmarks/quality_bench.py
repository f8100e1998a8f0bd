"""Quality benchmark: what the trained model gets right, against the time it took to train.

Trains through the real CLI on the built-in synthetic sample (12 tiles of 512 px), then
evaluates with ``landcover evaluate`` on unseen synthetic tiles (generated with another seed,
as the demo does), and reports per-class IoU and mean IoU beside the training wall time:

- ``cpu``: ``configs/cpu.yaml`` exactly as the demo runs it (2 workers, its 10 epochs);
- ``default``: ``configs/default.yaml`` (ResNet-34 U-Net, the GPU production config), shorter
  (2 workers on the CPU, 3 epochs of 512 samples), to show it learns every class too.

A regression like the CPU config that silently stopped learning water (IoU 0.006 while the
mean IoU looked acceptable) shows up here as a number: the goals are IoU >= 0.5 for every
class and mean IoU >= 0.80 for the demo's config. ``--quick`` trains half as long and reports
without goals.

Usage: python benchmarks/quality_bench.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, landcover_cli, write_results

MIN_CLASS_IOU = 0.5
MIN_MIOU = 0.80
UNSEEN_SEED = 2026


def _train_and_evaluate(
    name: str, config: str, extra: list[str], unseen: Path, work: Path
) -> dict[str, object]:
    run = work / name
    start = time.perf_counter()
    landcover_cli("train", "--config", config, "--workers", "2", "--out", str(run), *extra)
    train_s = time.perf_counter() - start
    evaluation = work / f"{name}-eval"
    checkpoint = run / "checkpoints" / "last.pt"
    landcover_cli(
        "evaluate", "--checkpoint", str(checkpoint), "--data", str(unseen), "--out", str(evaluation)
    )
    metrics = json.loads((evaluation / "metrics.json").read_text())
    row: dict[str, object] = {
        "config": name,
        "epochs": metrics["epoch"],
        "train_s": round(train_s, 1),
        "miou": round(metrics["miou"], 4),
        "accuracy": round(metrics["accuracy"], 4),
        "min_class_iou": round(min(v for v in metrics["iou"].values() if v is not None), 4),
    }
    row.update({f"iou_{k}": None if v is None else round(v, 4) for k, v in metrics["iou"].items()})
    return row


def run(quick: bool, out: Path) -> list[Goal]:
    """Trains the CPU and default configs, evaluates them on unseen tiles, writes the results.

    Args:
        quick: Train about half as long (no goals).
        out: Results folder.

    Returns:
        The goals for the CPU config (none with ``quick``).
    """
    default_extra = [
        "--device",
        "cpu",
        "--epochs",
        "2" if quick else "3",
        "--samples-per-epoch",
        "512",
        "--set",
        "run.val_every=1",
    ]
    with tempfile.TemporaryDirectory(prefix="landcover-quality-") as tmp:
        work = Path(tmp)
        unseen = work / "unseen"
        landcover_cli(
            "data", "synth", str(unseen), "--tiles", "2", "--size", "512",
            "--seed", str(UNSEEN_SEED), "--prefix", "unseen",
        )  # fmt: skip
        rows = [
            _train_and_evaluate(
                "cpu", "configs/cpu.yaml", ["--epochs", "3"] if quick else [], unseen, work
            ),
            _train_and_evaluate("default", "configs/default.yaml", default_extra, unseen, work),
        ]
    cpu = rows[0]
    goals = []
    if not quick:
        goals = [
            Goal(
                "quality",
                "lowest per-class IoU on unseen tiles, configs/cpu.yaml as the demo trains it",
                cpu["min_class_iou"],  # type: ignore[arg-type]
                f">= {MIN_CLASS_IOU}",
                cpu["min_class_iou"] >= MIN_CLASS_IOU,  # type: ignore[operator]
                f"training {cpu['train_s']} s on this machine",
            ),
            Goal(
                "quality",
                "mean IoU on unseen tiles, configs/cpu.yaml as the demo trains it",
                cpu["miou"],  # type: ignore[arg-type]
                f">= {MIN_MIOU}",
                cpu["miou"] >= MIN_MIOU,  # type: ignore[operator]
            ),
        ]
    write_results(
        "quality",
        rows,
        {"unseen": f"2 synthetic tiles of 512 px, seed {UNSEEN_SEED}", "quick": quick},
        out,
        goals,
    )
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    run(args.quick, args.out)


if __name__ == "__main__":
    main()
