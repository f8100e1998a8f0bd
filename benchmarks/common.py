"""Shared helpers for the benchmarks: machine description, result files, tables."""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def landcover_cli(*args: str) -> None:
    """Runs ``python -m landcover ARGS`` from the repository as a user would; fails on failure.

    Args:
        *args: The command and its options.

    Raises:
        subprocess.CalledProcessError: If the command exits non-zero.
    """
    subprocess.run([sys.executable, "-m", "landcover", *args], check=True, cwd=REPO)


@dataclass
class Goal:
    """One goal of the benchmark issue, as measured.

    Attributes:
        part: The benchmark part (io, train, scaling, predict, load, model).
        goal: What is measured, in words.
        value: The measured figure (a ratio, mostly), or None when not measurable here.
        target: The goal, e.g. ``>= 20``.
        holds: Whether the figure meets the goal (None when not measurable here).
        note: Context (what limits the figure on this machine, say).
    """

    part: str
    goal: str
    value: float | None
    target: str
    holds: bool | None
    note: str = ""

    def as_row(self) -> dict[str, Any]:
        """The goal as a table row."""
        row = asdict(self)
        row["holds"] = {True: "yes", False: "NO", None: "n/a"}[self.holds]
        row["value"] = "" if self.value is None else self.value
        return row


def machine() -> dict[str, Any]:
    """Describes the machine the figures come from."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    return info


def write_results(
    name: str,
    rows: list[dict[str, Any]],
    extra: dict[str, Any],
    out: Path,
    goals: list[Goal] | None = None,
) -> Path:
    """Writes ``{name}.json`` and ``{name}.csv`` with the date and machine, prints a table.

    Args:
        name: Benchmark name.
        rows: One dict per measurement.
        extra: Other figures (settings, ratios) for the JSON.
        out: Results folder.
        goals: The issue's goals this part measures (kept in the JSON as ``goals``).

    Returns:
        The JSON file.
    """
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    doc = {"benchmark": name, "date": stamp, "machine": machine(), "rows": rows, **extra}
    if goals is not None:
        doc["goals"] = [asdict(g) for g in goals]
    path = out / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    with (out / f"{name}.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print_table(name, rows)
    if goals:
        print_table(f"{name}: goals", [g.as_row() for g in goals])
    return path


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    """Prints rows as an aligned text table."""
    keys = list(rows[0])
    cells = [[_fmt(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print(f"\n{title}")
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def load_bench_config(path: Path, overrides: dict[str, Any] | None = None) -> Any:
    """A config for a benchmark that builds the training loss without training data.

    ``optim.loss.class_weights: auto`` is resolved from the data when training starts; here it
    becomes one weight of 1 per class (weights of the same length cost the same, whatever
    their values).

    Args:
        path: The YAML config.
        overrides: ``section.key`` overrides, as ``load_config`` takes them.

    Returns:
        The :class:`landcover.config.Config`.
    """
    from landcover.config import load_config

    config = load_config(path, overrides or {})
    if config.optim.loss.class_weights != "auto":
        return config
    loss = config.optim.loss.replace(class_weights=[1.0] * config.data.classes.num_classes)
    return config.replace(optim=config.optim.replace(loss=loss))
