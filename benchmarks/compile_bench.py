"""Compiled models: ``torch.compile`` against eager on the CPU, training step and predict's forward.

What ``run.compile: true`` and ``landcover predict --compile`` buy on the CPU, and what the
compilation costs. Both go through the product's own path,
:func:`landcover.models.compile_model` (``torch.compile``, default mode, TorchInductor):

- ``train-cpu``: one training step of ``configs/cpu.yaml`` (its model, patch and batch):
  :func:`landcover.training.step.train_step` (forward, loss, backward, AdamW step) through the
  compiled model, as one worker's trainer does (with several workers the trainer compiles the
  DDP wrapper, whose graph is split at the gradient buckets; not measured here). Class weights
  stand in for ``auto`` (resolved from the data in a real run).
- ``predict-cpu`` and ``predict-default``: the model's forward in eval mode without gradients
  on a batch of windows at predict's window and batch for ``configs/cpu.yaml`` and
  ``configs/default.yaml`` (:func:`~landcover.inference.sliding.resolve_geometry`); fp32, as
  predict runs on the CPU. Normalisation, softmax and blending are the same either way and left
  out.

The eager and the compiled call share the same module (the compiled wrapper holds the same
parameters; training: the same optimizer) and alternate in rounds in one process (the first
of each round swapped every round). ``speedup`` is the median over the rounds of each round's
eager seconds / compiled seconds per call (compiled throughput over eager's; a round's two
halves run back to back, so other jobs on the machine slow both alike), ``eager_s`` and
``compiled_s`` the medians of the rounds' wall seconds per call. ``speedup_cpu`` is the same
ratio in the process's CPU seconds: on 1 core the time the model computed, whatever else ran on
the core; on 2 cores it also counts the threads' spinning at their barriers.

Compile time: the wall seconds of the first compiled call (tracing, the inductor's code
generation and C++ compilation, and the call itself), in a fresh process with a fresh
``TORCHINDUCTOR_CACHE_DIR`` (cold), then again in another fresh process on the cache the cold
one left (warm: dynamo still traces, the compiled code comes from the cache).
``break_even_calls`` is the number of calls after which the compiled model has paid its cold
compile time back (cold compile seconds / the median of the rounds' eager - compiled seconds).

Every measurement runs in its own process pinned to 1 or 2 cores (``sched_setaffinity``, the
last cores of the machine; torch's threads set to match). The load average is kept with each
row (other jobs on the machine slow eager and compiled alike, not their ratio). A compile that
fails (no C++ compiler, say) is one row and one goal line. ``--quick``: 1 core, smaller
batches and windows, the default model's window 256 px, two rounds.

Usage: python benchmarks/run.py compile [--quick]
       python benchmarks/compile_bench.py [--quick] [--threads 1,2] [--rounds N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, write_results

PART = "compile"
CPU_CONFIG = REPO / "configs" / "cpu.yaml"
DEFAULT_CONFIG = REPO / "configs" / "default.yaml"
CHILD_TIMEOUT_S = 1800
"""A measurement that takes longer than this is reported as failed."""


@dataclass(frozen=True)
class Workload:
    """One thing timed eager and compiled.

    Attributes:
        key: Short name (rows, goals).
        kind: ``train`` (a training step) or ``predict`` (a forward without gradients).
        config: The config whose model is built.
        batch: Samples (training) or windows (predict) per call.
        size: Patch (training) or window (predict) side, pixels.
        calls: Calls per round, per mode.
        note: How the sizes were chosen.
    """

    key: str
    kind: str
    config: str
    batch: int
    size: int
    calls: int
    note: str


def workloads(quick: bool) -> list[Workload]:
    """The training step of the CPU config and predict's forward for both configs.

    Args:
        quick: Smaller batches and windows.

    Returns:
        The workloads, training first.
    """
    from landcover.config import load_config
    from landcover.inference.sliding import resolve_geometry

    cpu = load_config(CPU_CONFIG)
    default = load_config(DEFAULT_CONFIG)
    cpu_window, _, cpu_batch = resolve_geometry(cpu.data.patch_size)
    default_window, _, default_batch = resolve_geometry(default.data.patch_size)
    rel = {c: str(c.relative_to(REPO)) for c in (CPU_CONFIG, DEFAULT_CONFIG)}
    if quick:
        return [
            Workload("train-cpu", "train", rel[CPU_CONFIG], 2, cpu.data.patch_size, 3,
                     "quick: batch 2"),
            Workload("predict-cpu", "predict", rel[CPU_CONFIG], 1, cpu_window, 2,
                     "quick: 1 window"),
            Workload("predict-default", "predict", rel[DEFAULT_CONFIG], 1, 256, 2,
                     "quick: 1 window of 256 px"),
        ]  # fmt: skip
    return [
        Workload("train-cpu", "train", rel[CPU_CONFIG], cpu.optim.batch_size,
                 cpu.data.patch_size, 4, "optim.batch_size, data.patch_size"),
        Workload("predict-cpu", "predict", rel[CPU_CONFIG], cpu_batch, cpu_window, 2,
                 "predict's default window and batch"),
        Workload("predict-default", "predict", rel[DEFAULT_CONFIG], default_batch,
                 default_window, 2, "predict's default window and batch"),
    ]  # fmt: skip


# --- in the child process ----------------------------------------------------------------


def _pin(threads: int) -> None:
    """Pins this process to the last ``threads`` cores and sizes torch's pool to match."""
    import torch

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < threads:
        raise SystemExit(f"{threads} threads asked, {len(cores)} cores available")
    os.sched_setaffinity(0, cores[-threads:])
    torch.set_num_threads(threads)


def _calls(w: Workload) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Builds the workload's model and returns its eager and its compiled call.

    Args:
        w: The workload.

    Returns:
        ``(eager, compiled)``: each runs one call (a training step, or a forward).
    """
    import torch

    from landcover.config import load_config
    from landcover.models import build_model, compile_model

    config = load_config(REPO / w.config)
    classes = config.data.classes.num_classes
    bands = len(config.data.bands)
    if w.kind == "train":  # class weights stand in for "auto" (resolved from the data)
        weights = [1.0 + 0.5 * i for i in range(classes)]
        config = load_config(REPO / w.config, {"optim.loss.class_weights": weights})
    torch.manual_seed(0)
    model = build_model(config.model, bands, classes, config.data.patch_size)
    compiled = compile_model(model, "training" if w.kind == "train" else "predict")
    x = torch.randn(w.batch, bands, w.size, w.size)
    if w.kind == "predict":
        model.eval()

        def forward(m: torch.nn.Module) -> Callable[[], Any]:
            def call() -> Any:
                with torch.no_grad():
                    return m(x)

            return call

        return forward(model), forward(compiled)

    from landcover.training.losses import SegmentationLoss
    from landcover.training.step import build_optimizer, train_step

    model.train()
    y = torch.randint(0, classes, (w.batch, w.size, w.size))
    criterion = SegmentationLoss(config.optim.loss, classes)
    optimizer = build_optimizer(model.parameters(), config)

    def step(m: torch.nn.Module) -> Callable[[], Any]:
        return lambda: train_step(m, criterion, optimizer, x, y, None, config.optim.grad_clip)

    return step(model), step(compiled)


def _timed(fn: Callable[[], Any], n: int = 1) -> tuple[float, float]:
    """Wall and CPU seconds (this process, all its threads) per call, over ``n`` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


def _paired(eager: list[float], compiled: list[float]) -> dict[str, float]:
    """Medians of the rounds, and the median of each round's ratio and saving.

    A round's eager and compiled calls run back to back, so what slows one (other jobs on
    the machine) mostly slows the other: each round's own ratio is steadier than the ratio
    of the medians.
    """
    return {
        "eager": statistics.median(eager),
        "compiled": statistics.median(compiled),
        "speedup": statistics.median(e / c for e, c in zip(eager, compiled, strict=True)),
        "saving": statistics.median(e - c for e, c in zip(eager, compiled, strict=True)),
    }


def measure(w: Workload, rounds: int, compile_only: bool) -> dict[str, Any]:
    """Times the first compiled call, then eager and compiled calls in alternating rounds.

    Args:
        w: The workload.
        rounds: Rounds of ``w.calls`` calls per mode.
        compile_only: Only time the first compiled call (the warm-cache measurement).

    Returns:
        ``compile_s`` (the first compiled call, wall seconds), ``eager_first_s``, and unless
        ``compile_only`` per call: ``eager_s`` / ``compiled_s`` (median wall seconds of the
        rounds), ``speedup`` (median of the rounds' eager / compiled), ``saving_s`` (median of
        the rounds' eager - compiled), the same in CPU seconds (``*_cpu*``), each round's
        figures, and dynamo's count of compiled graphs and graph breaks; ``error`` instead
        when compilation fails.
    """
    from landcover.models.factory import first_line

    start = time.perf_counter()
    eager, compiled = _calls(w)
    found: dict[str, Any] = {"setup_s": time.perf_counter() - start}
    if not compile_only:
        found["eager_first_s"] = _timed(eager)[0]
    try:
        found["compile_s"] = _timed(compiled)[0]
    except Exception as exc:  # torch's compile errors have no common base class
        return {**found, "error": f"{type(exc).__name__}: {first_line(exc)[:300]}"}
    if compile_only:
        return found
    eager()  # one more of each: allocator, optimizer state, lazily compiled pieces
    compiled()
    wall: dict[str, list[float]] = {"eager": [], "compiled": []}
    cpu: dict[str, list[float]] = {"eager": [], "compiled": []}
    modes = {"eager": eager, "compiled": compiled}
    for r in range(rounds):
        for name in ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager"):
            seconds, cpu_seconds = _timed(modes[name], w.calls)
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    from torch._dynamo.utils import counters

    by_wall = _paired(wall["eager"], wall["compiled"])
    by_cpu = _paired(cpu["eager"], cpu["compiled"])
    return {
        **found,
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "eager_s": by_wall["eager"],
        "compiled_s": by_wall["compiled"],
        "speedup": by_wall["speedup"],
        "saving_s": by_wall["saving"],
        "eager_cpu_s": by_cpu["eager"],
        "compiled_cpu_s": by_cpu["compiled"],
        "speedup_cpu": by_cpu["speedup"],
        "rounds_eager_s": [round(t, 4) for t in wall["eager"]],
        "rounds_compiled_s": [round(t, 4) for t in wall["compiled"]],
        "rounds_eager_cpu_s": [round(t, 4) for t in cpu["eager"]],
        "rounds_compiled_cpu_s": [round(t, 4) for t in cpu["compiled"]],
    }


def _child(spec: str, threads: int, rounds: int, compile_only: bool) -> None:
    """One measurement, in a process of its own: prints its result as JSON.

    Args:
        spec: The workload, as JSON.
        threads: Cores to pin to (and torch threads).
        rounds: Rounds per mode.
        compile_only: Only time the first compiled call.
    """
    _pin(threads)
    print(json.dumps(measure(Workload(**json.loads(spec)), rounds, compile_only)))


# --- in the parent -----------------------------------------------------------------------


def _measure(
    w: Workload, threads: int, rounds: int, cache: Path, compile_only: bool = False
) -> dict[str, Any]:
    """Runs one measurement in a fresh process with its inductor cache in ``cache``."""
    command = [sys.executable, __file__, "--child", json.dumps(asdict(w))]
    command += ["--threads", str(threads), "--rounds", str(rounds)]
    command += ["--compile-only"] if compile_only else []
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, cwd=REPO, env=env, check=False,
            timeout=CHILD_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {CHILD_TIMEOUT_S} s"}
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {result.returncode}: {tail[:300]}"}
    found = json.loads(lines[-1])
    found["process_s"] = time.perf_counter() - start
    return found


def _row(w: Workload, threads: int, rounds: int, scratch: Path) -> dict[str, Any]:
    """Measures one workload on ``threads`` cores: cold (with the rounds), then warm."""
    load_before = os.getloadavg()[0]
    cache = Path(tempfile.mkdtemp(prefix=f"inductor-{w.key}-{threads}-", dir=scratch))
    print(f"  {w.key}, {threads} core(s): cold compile + {rounds} rounds ...", end=" ", flush=True)
    cold = _measure(w, threads, rounds, cache)
    warm: dict[str, Any] = {}
    if "error" not in cold:
        print("warm compile ...", end=" ", flush=True)
        warm = _measure(w, threads, rounds, cache, compile_only=True)
    shutil.rmtree(cache, ignore_errors=True)
    print(cold.get("error") or f"done ({cold['process_s'] + warm.get('process_s', 0):.0f} s)")
    pixels = w.batch * w.size * w.size
    row: dict[str, Any] = {
        "workload": w.key,
        "kind": w.kind,
        "config": w.config,
        "threads": threads,
        "batch": w.batch,
        "size": w.size,
        "eager_s": None,
        "compiled_s": None,
        "eager_per_s": None,
        "compiled_per_s": None,
        "eager_mpx_s": None,
        "compiled_mpx_s": None,
        "speedup": None,
        "eager_cpu_s": None,
        "compiled_cpu_s": None,
        "speedup_cpu": None,
        "compile_cold_s": None,
        "compile_warm_s": None,
        "eager_first_s": None,
        "break_even_calls": None,
        "graphs": None,
        "graph_breaks": None,
        "load_1m": round(max(load_before, os.getloadavg()[0]), 2),
        "error": cold.get("error") or warm.get("error") or "",
    }
    if "error" in cold:
        return row
    e, c = cold["eager_s"], cold["compiled_s"]
    row.update(
        eager_s=round(e, 4),
        compiled_s=round(c, 4),
        eager_per_s=round(w.batch / e if w.kind == "predict" else 1 / e, 3),
        compiled_per_s=round(w.batch / c if w.kind == "predict" else 1 / c, 3),
        eager_mpx_s=round(pixels / e / 1e6, 3),
        compiled_mpx_s=round(pixels / c / 1e6, 3),
        speedup=round(cold["speedup"], 3),
        eager_cpu_s=round(cold["eager_cpu_s"], 4),
        compiled_cpu_s=round(cold["compiled_cpu_s"], 4),
        speedup_cpu=round(cold["speedup_cpu"], 3),
        compile_cold_s=round(cold["compile_s"], 1),
        compile_warm_s=round(warm["compile_s"], 1) if "compile_s" in warm else None,
        eager_first_s=round(cold["eager_first_s"], 3),
        break_even_calls=(
            round(cold["compile_s"] / cold["saving_s"]) if cold["saving_s"] > 0 else None
        ),
        graphs=cold["graphs"],
        graph_breaks=cold["graph_breaks"],
    )
    for key in (
        "rounds_eager_s",
        "rounds_compiled_s",
        "rounds_eager_cpu_s",
        "rounds_compiled_cpu_s",
    ):
        row[key] = cold[key]
    return row


def goals(rows: list[dict[str, Any]], found: list[Workload]) -> list[Goal]:
    """The figures the issue asks for, as report lines (there is no goal to hold).

    Args:
        rows: The measured rows.
        found: The workloads.

    Returns:
        One line per workload (its 1-core speed-up; the 2-core one and the compile times in
        the note), or one line saying compilation fails here.
    """
    failed = [r for r in rows if r["error"]]
    if failed and all(r["speedup"] is None for r in rows):
        return [
            Goal(PART, "torch.compile (TorchInductor) works on this machine's CPU", None,
                 "report", None, f"fails: {failed[0]['error']}"),
        ]  # fmt: skip
    result = []
    for w in found:
        mine = sorted((r for r in rows if r["workload"] == w.key), key=lambda r: r["threads"])
        done = [r for r in mine if r["speedup"] is not None]
        if not done:
            continue
        what = (
            f"training step (batch {w.batch}, {w.size} px)"
            if w.kind == "train"
            else f"predict's forward ({w.batch} x {w.size} px windows)"
        )
        note = "; ".join(
            f"{r['threads']} core(s): x{r['speedup']} (CPU s: x{r['speedup_cpu']}), "
            f"{r['eager_s']} -> {r['compiled_s']} s per call, "
            f"compile {r['compile_cold_s']} s cold / {r['compile_warm_s']} s warm, "
            f"break-even {r['break_even_calls'] or 'never'} calls, load {r['load_1m']}"
            for r in done
        )
        first = done[0]
        result.append(
            Goal(
                PART,
                f"{w.config} {what}: compiled / eager calls per s, {first['threads']} CPU core(s)",
                first["speedup"],
                "report",
                None,
                note + (f"; {w.note}" if w.note.startswith("quick") else ""),
            )
        )
    return result


def run(
    quick: bool, out: Path, threads: tuple[int, ...] | None = None, rounds: int | None = None
) -> list[Goal]:
    """Runs the compile part: every workload cold and warm on 1 (and 2) cores.

    Args:
        quick: Smaller workloads, 1 core, two rounds.
        out: Results folder.
        threads: Core counts to measure (default: 1, and 2 where the machine has them;
            quick: 1).
        rounds: Rounds per mode (default 5; quick 2).

    Returns:
        The part's report lines.
    """
    available = len(os.sched_getaffinity(0))
    threads = threads or ((1,) if quick else tuple(t for t in (1, 2) if t <= available))
    rounds = rounds or (2 if quick else 5)
    found = workloads(quick)
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lc-compile-") as scratch:
        for w in found:
            for t in threads:
                rows.append(_row(w, t, rounds, Path(scratch)))
    table = [{k: v for k, v in r.items() if not k.startswith("rounds_")} for r in rows]
    extra = {
        "settings": {"quick": quick, "threads": threads, "rounds": rounds},
        "workloads": [asdict(w) for w in found],
        "rounds": [
            {k: v for k, v in r.items() if k in ("workload", "threads") or k.startswith("rounds_")}
            for r in rows
            if "rounds_eager_s" in r
        ],
        "loadavg_end": os.getloadavg(),
        "seconds": round(time.perf_counter() - start, 1),
    }
    held = goals(rows, found)
    write_results(PART, table, extra, out, held)
    return held


def main() -> None:
    """Runs the part from the command line (or, with ``--child``, one measurement)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workloads, 1 core")
    parser.add_argument("--threads", default=None, help="core counts, e.g. 1,2")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per mode")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--compile-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child, int(args.threads or 1), args.rounds or 1, args.compile_only)
        return
    threads = tuple(int(t) for t in args.threads.split(",")) if args.threads else None
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    start = time.perf_counter()
    run(args.quick, out, threads, args.rounds)
    print(f"\ncompile benchmark took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
