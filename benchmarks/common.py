"""Shared helpers for the benchmarks: machine description, result files, tables."""

from __future__ import annotations

import csv
import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch


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


def write_results(name: str, rows: list[dict[str, Any]], extra: dict[str, Any], out: Path) -> Path:
    """Writes ``{name}.json`` and ``{name}.csv`` with the date and machine, prints a table.

    Args:
        name: Benchmark name.
        rows: One dict per measurement.
        extra: Other figures (goals, ratios) for the JSON.
        out: Results folder.

    Returns:
        The JSON file.
    """
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    doc = {"benchmark": name, "date": stamp, "machine": machine(), "rows": rows, **extra}
    path = out / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    with (out / f"{name}.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print_table(name, rows)
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
