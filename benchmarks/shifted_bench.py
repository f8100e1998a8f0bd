"""Shifted-world quality: what holds across flights and what learns the rare class.

The easy sample has one radiometry and generous classes; a model can score well on it and
still call every pixel of another flight forest. This part trains on the shifted world
(``landcover data synth --profile shifted``: training tiles from three flights, validation
from a fourth, test tiles from two others, the training ground re-flown as a seventh flight,
buildings at about 0.4 % of the training pixels) and scores each variant, through the real
CLI, on:

- ``test``: the test flights' unseen tiles (``evaluate --data OUT/test``);
- ``reflown``: the training ground as another flight, same labels (``OUT/train_reflown``).

Each variant is ``configs/cpu.yaml`` (2 workers, its own epochs and samples) with some
``--set`` overrides: the shipped defaults, the defaults with one mechanism switched off at a
time, every mechanism off, the defaults with the earlier 256 px patches, and the old defaults
(every generalisation and rare-class mechanism off, 256 px patches, 6 epochs). The table gives
per-class IoU on both, the training time, and the gap between ``last.pt`` and the best epoch.
Variants already in the results file are kept unless named again, so the part can be run one
variant at a time (``--variants a,b``); a variant named again is trained afresh, also in a
kept scratch folder (``--keep``).

The table's world is seed 0, the world the defaults were chosen on; ``--seed 1`` (the
world ``tests/outcome/test_outcome.py`` trains on) writes its own results folder, ``shifted_seed1``.

Usage: python benchmarks/shifted_bench.py [--variants NAME,...] [--seed N] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, landcover_cli, write_results

MIN_CLASS_IOU = 0.5
MAX_LAST_GAP = 0.03
WORLD_SEED = 0

# The mechanisms the shipped defaults turn on, and how each is switched off.
OFF_SWITCHES: dict[str, list[str]] = {
    "photometric": ["data.photometric=0"],
    "per_tile": ["data.normalize=global"],
    "ema": ["optim.ema_decay=0"],
    "class_balance": ["data.class_balance=0"],
    "loss": ["optim.loss.class_weights=null", "optim.loss.dice_weight=0"],
}

ALL_OFF = [s for sets in OFF_SWITCHES.values() for s in sets] + ["data.oversample_rare=0.1"]

# configs/cpu.yaml's patches before the shifted world chose 96 px (as many pixels an epoch)
PATCH_256 = ["data.patch_size=256", "optim.samples_per_epoch=512"]

VARIANTS: dict[str, list[str]] = {
    "defaults": [],
    **{f"no_{name}": sets for name, sets in OFF_SWITCHES.items()},
    # every mechanism off, as long as the defaults train
    "all_off": ALL_OFF,
    # the defaults with the earlier 256 px patches
    "patch_256": PATCH_256,
    # configs/cpu.yaml before the shifted world chose its defaults
    "previous": [*ALL_OFF, *PATCH_256, "optim.epochs=6"],
}


def _evaluate(checkpoint: Path, data: Path, out: Path) -> dict[str, object]:
    landcover_cli(
        "evaluate", "--checkpoint", str(checkpoint), "--data", str(data), "--out", str(out)
    )
    return json.loads((out / "metrics.json").read_text())


def _scores(prefix: str, metrics: dict[str, object]) -> dict[str, object]:
    iou: dict[str, float | None] = metrics["iou"]  # type: ignore[assignment]
    present = [v for v in iou.values() if v is not None]
    row: dict[str, object] = {
        f"{prefix}_miou": round(metrics["miou"], 3),  # type: ignore[arg-type]
        f"{prefix}_acc": round(metrics["accuracy"], 3),  # type: ignore[arg-type]
        f"{prefix}_min": round(min(present), 3),
    }
    row.update({f"{prefix}_{k}": None if v is None else round(v, 3) for k, v in iou.items()})
    return row


def train_and_score(
    name: str, sets: list[str], world: Path, work: Path, extra: list[str]
) -> dict[str, object]:
    """Trains one variant on the shifted world and scores it on test and reflown tiles.

    Args:
        name: Variant name.
        sets: ``--set`` overrides on top of ``configs/cpu.yaml``.
        world: The shifted world's folder.
        work: Scratch folder.
        extra: Further ``landcover train`` flags (epochs, samples).

    Returns:
        The table row.
    """
    run = work / name
    if run.exists():  # a kept run of an earlier invocation: train afresh, do not resume it
        shutil.rmtree(run)
    flags = [a for s in sets for a in ("--set", s)]
    start = time.perf_counter()
    landcover_cli(
        "train", "--config", "configs/cpu.yaml", "--workers", "2",
        "--data", str(world / "train"), "--set", f"data.val_root={world / 'val'}",
        "--out", str(run), *flags, *extra,
    )  # fmt: skip
    train_s = time.perf_counter() - start
    return score(name, sets, run, train_s, world, work)


def score(
    name: str, sets: list[str], run: Path, train_s: float, world: Path, work: Path
) -> dict[str, object]:
    """Scores a trained run on the test and reflown tiles.

    Args:
        name: Variant name.
        sets: Its ``--set`` overrides (for the table).
        run: The run folder.
        train_s: Its training wall time.
        world: The shifted world's folder.
        work: Scratch folder for the evaluations.

    Returns:
        The table row.
    """
    epochs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    val = [e["val_miou"] for e in epochs if e.get("val_miou") is not None]
    last = run / "checkpoints" / "last.pt"
    best = run / "checkpoints" / "best.pt"
    test_last = _evaluate(last, world / "test", work / f"{name}-test")
    test_best = _evaluate(best, world / "test", work / f"{name}-test-best")
    row: dict[str, object] = {
        "variant": name,
        "sets": " ".join(sets) or "(shipped defaults)",
        "train_s": round(train_s, 1),
        "val_miou_best": round(max(val), 3),
        "val_miou_last": round(val[-1], 3),
        "best_epoch": 1 + val.index(max(val)),
        "test_last_minus_best": round(test_last["miou"] - test_best["miou"], 3),  # type: ignore[operator]
    }
    row.update(_scores("test", test_last))
    row.update(_scores("reflown", _evaluate(last, world / "train_reflown", work / f"{name}-rf")))
    return row


def run(
    quick: bool,
    out: Path,
    names: list[str] | None = None,
    keep: Path | None = None,
    seed: int = WORLD_SEED,
) -> list[Goal]:
    """Trains the variants on the shifted world and writes ``shifted.json`` / ``.csv``.

    Args:
        quick: 3 epochs, the defaults and ``all_off`` only, no goals.
        out: Results folder.
        names: Variants to (re)run; the others keep their rows from an earlier run.
        keep: Folder for the scratch folder (runs, evaluations), kept after the run.
        seed: The shifted world's seed.

    Returns:
        The goals the shipped defaults are held to (none with ``quick``).
    """
    wanted = names or (["defaults", "all_off"] if quick else list(VARIANTS))
    unknown = sorted(set(wanted) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    extra = ["--epochs", "3"] if quick else []
    path = out / "shifted.json"
    kept: dict[str, dict[str, object]] = {}
    if path.exists() and not quick:
        earlier = json.loads(path.read_text())
        if earlier.get("world") != _world_note(seed):
            raise SystemExit(
                f"{path} holds rows of another world ({earlier.get('world')}); "
                f"give --out another folder for seed {seed}"
            )
        kept = {r["variant"]: r for r in earlier["rows"]}
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="landcover-shifted-")
        if keep is None
        else contextlib.nullcontext(str(keep))
    ) as tmp:
        work = Path(tmp)
        world = work / f"world-seed{seed}"
        if not (world / "manifest.csv").exists():
            landcover_cli(  # a world left unfinished is written again
                "data", "synth", str(world), "--profile", "shifted", "--seed", str(seed),
                "--overwrite",
            )  # fmt: skip
        held: list[Goal] = []
        for name in wanted:  # the results file is written after each variant (hours in all)
            kept[name] = train_and_score(name, VARIANTS[name], world, work, extra)
            print(json.dumps(kept[name]), flush=True)
            held = _write(kept, quick, seed, out)
    return held


def _write(kept: dict[str, dict[str, object]], quick: bool, seed: int, out: Path) -> list[Goal]:
    """Writes the results file from the rows so far; returns the goals."""
    rows = [kept[n] for n in VARIANTS if n in kept] + [
        r for n, r in kept.items() if n not in VARIANTS
    ]
    held = [] if quick else goals(kept)
    write_results("shifted", rows, {"world": _world_note(seed), "quick": quick}, out, held)
    return held


def _world_note(seed: int) -> str:
    """How the world was made, as the results file records it."""
    return f"data synth --profile shifted --seed {seed}"


def goals(rows: dict[str, dict[str, object]]) -> list[Goal]:
    """The goals the shipped defaults are held to, from their row.

    Args:
        rows: Variant name to table row.

    Returns:
        The goals (none without a ``defaults`` row).
    """
    found: list[Goal] = []
    defaults = rows.get("defaults")
    if defaults is not None:
        found = [
            Goal(
                "shifted",
                f"lowest per-class IoU on the {split} tiles, configs/cpu.yaml defaults",
                defaults[f"{split}_min"],  # type: ignore[arg-type]
                f">= {MIN_CLASS_IOU}",
                defaults[f"{split}_min"] >= MIN_CLASS_IOU,  # type: ignore[operator]
                f"training {defaults['train_s']} s on this machine",
            )
            for split in ("test", "reflown")
        ]
        gap = abs(defaults["test_last_minus_best"])  # type: ignore[arg-type]
        found.append(
            Goal(
                "shifted",
                "|test mIoU of last.pt - best.pt|, configs/cpu.yaml defaults",
                gap,
                f"<= {MAX_LAST_GAP}",
                gap <= MAX_LAST_GAP,
            )
        )
    return found


CLASSES = ("water", "tree_canopy", "low_vegetation", "barren", "impervious", "road")
SHORT = ("water", "forest", "field", "barren", "buildings", "road")


def markdown(rows: list[dict[str, object]]) -> str:
    """The table in docs/guide/training.md: per-class IoU on test flights and reflown ground.

    Args:
        rows: The rows of ``shifted.json``.

    Returns:
        A Markdown table, one line per variant.
    """
    head = ["variant", "train s", "test mIoU", "test acc"]
    head += [f"test {c}" for c in SHORT] + ["reflown mIoU", "reflown min", "reflown acc"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [f"`{r['variant']}`", f"{r['train_s']:.0f}", r["test_miou"], r["test_acc"]]
        cells += [r[f"test_{c}"] for c in CLASSES]
        cells += [r["reflown_miou"], r["reflown_min"], r["reflown_acc"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--variants", default="", help=f"comma-separated, of {list(VARIANTS)}")
    parser.add_argument(
        "--try",
        dest="tries",
        action="append",
        default=[],
        metavar="NAME=KEY=V[;KEY=V]",
        help="an extra variant: a name and --set overrides separated by ';'",
    )
    parser.add_argument("--out", type=Path, help=f"results folder (default {RESULTS})")
    parser.add_argument(
        "--markdown", action="store_true", help="print the results file as a Markdown table"
    )
    parser.add_argument("--keep", type=Path, help="keep the runs and evaluations in this folder")
    parser.add_argument(
        "--seed", type=int, default=WORLD_SEED, help=f"the world's seed (default {WORLD_SEED})"
    )
    args = parser.parse_args()
    names = [n for n in args.variants.split(",") if n]
    for spec in args.tries:
        name, _, sets = spec.partition("=")
        VARIANTS[name] = [s for s in sets.split(";") if s]
        names.append(name)
    names = names or None
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    if args.seed != WORLD_SEED and args.out is None:
        out = out / f"shifted_seed{args.seed}"
    if args.markdown:
        print(markdown(json.loads((out / "shifted.json").read_text())["rows"]))
        return
    run(args.quick, out, names, args.keep, args.seed)


if __name__ == "__main__":
    main()
