"""The benchmark suite's one entry point: runs the parts, prints their tables and the goals.

Usage: python benchmarks/run.py [all|io|train|scaling|predict|ceiling|latency|load|model|quality|augment|feed|shifted|compile|storage|step|epochstart|traffic|onnx|fringe ...]
                                [--quick] [--out benchmarks/results]

Each part is a module ``benchmarks/{part}_bench.py`` with ``run(quick, out) -> list[Goal]``;
it prints its table and writes ``{out}/{part}.json`` / ``.csv`` (with the date and machine).
This script adds ``{out}/summary.json`` / ``.csv``: every goal of the benchmark issues with the
measured figure and whether it holds, and how long each part took. Parts not run this time
keep their latest goals in the summary (read from their ``{part}.json``, with its date), so
running one part updates its rows and leaves the others; ``--summary`` only rebuilds it. ``--quick`` runs smaller
versions of every part; the shifted-world part trains eight models (about 75 minutes on 2 CPU
cores; ``--quick``: two, about 10) and the compile part about 16 (``--quick``: 4), the others
together take under 30.
``bash scripts/bench.sh`` installs the benchmark extras (torchgeo) and runs this.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, machine, print_table

PARTS = (
    "io",
    "train",
    "scaling",
    "predict",
    "ceiling",
    "latency",
    "load",
    "model",
    "quality",
    "augment",
    "blend",
    "publish",
    "feed",
    "gil",
    "shifted",
    "compile",
    "storage",
    "step",
    "epochstart",
    "traffic",
    "onnx",
    "fringe",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=["all"], help=f"all or any of {PARTS}")
    parser.add_argument("--quick", action="store_true", help="smaller runs (< 5 min in all)")
    parser.add_argument(
        "--summary", action="store_true", help="run nothing: rebuild the summary from the results"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"results folder (default {RESULTS}, --quick: /quick)",
    )
    args = parser.parse_args()
    # quick figures never overwrite the full run's
    args.out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    wanted = [] if args.summary else list(PARTS) if "all" in args.parts else args.parts
    unknown = [p for p in wanted if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from all, {', '.join(PARTS)}")
    goals: list[Goal] = []
    timings = []
    for part in wanted:
        print(f"\n=== {part} {'(quick)' if args.quick else ''}", flush=True)
        start = time.perf_counter()
        module = importlib.import_module(f"{part}_bench")
        goals += module.run(args.quick, args.out)
        timings.append({"part": part, "seconds": round(time.perf_counter() - start, 1)})
    write_summary(goals + earlier_goals(args.out, wanted), timings, args.quick, args.out)


def earlier_goals(out: Path, skip: list[str]) -> list[Goal]:
    """The latest goals of the parts not run now, from their results files.

    Args:
        out: The results folder.
        skip: Parts run now (their new goals are used instead).

    Returns:
        The goals, each note saying the date it was measured.
    """
    import json

    found: list[Goal] = []
    for part in PARTS:
        path = out / f"{part}.json"
        if part in skip or not path.is_file():
            continue
        doc = json.loads(path.read_text())
        day = str(doc.get("date", ""))[:10]
        for goal in doc.get("goals", []):
            note = goal.get("note") or ""
            found.append(Goal(**{**goal, "note": f"{note}; {day}".strip("; ")}))
    return found


def write_summary(goals: list[Goal], timings: list[dict], quick: bool, out: Path) -> None:
    """Prints the goals table and writes ``summary.json`` / ``summary.csv``."""
    import csv
    import json

    out.mkdir(parents=True, exist_ok=True)
    name = "summary-quick" if quick else "summary"
    doc = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "quick": quick,
        "goals": [asdict(g) for g in goals],
        "timings": timings,
        "total_s": round(sum(t["seconds"] for t in timings), 1),
    }
    (out / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    rows = [g.as_row() for g in goals]
    if rows:
        with (out / f"{name}.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print_table("goals", rows)
    print_table("time per part", [*timings, {"part": "total", "seconds": doc["total_s"]}])


if __name__ == "__main__":
    main()
