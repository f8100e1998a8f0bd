"""Scaling benchmark: data-parallel training throughput for 1 and 2 workers, and 1-GPU precision.

CPU section: runs the real CLI (``python -m landcover train --config configs/cpu.yaml``) as
subprocesses with 1 and 2 workers on this machine, one thread per worker
(``--set run.threads_per_worker=1``, ``OMP_NUM_THREADS=1``), on synthetic NAIP-like tiles, and
reads ``samples_per_s`` / ``epoch_s`` (training time only; validation is off with
``data.val_fraction=0``, checkpoint writing is outside ``epoch_s``) from the run's
``metrics.jsonl``. The first epoch is a warm-up and is skipped; the figure is the median of the
other epochs. 2-worker settings: plain all-reduce (DDP over Gloo), ``--grad-compression fp16``,
``--grad-compression powersgd`` (only when ``landcover train --help`` lists it),
``--accumulate 2``, ``--local-sgd-period 4`` and ``--engine horovod``. They share one 1-worker
baseline (the plain single-worker run): with one worker none of the options sends anything (DDP
hooks and local SGD are not installed, Horovod's optimizer skips its all-reduce hooks at size 1),
so their single-worker runs are the same computation.

- efficiency = 2-worker samples/s / (2 x 1-worker samples/s); goal >= 0.85 with plain
  all-reduce, reported for the other settings;
- communication cost of an option relative to plain: its 2-worker epoch time / plain's.

GPU section (only where ``torch.cuda.is_available()``): 1-GPU training (``--device cuda``,
configs/default.yaml) in fp32 versus bf16 autocast + channels_last (``run.bf16``,
``run.channels_last``), through the CLI and as a bare model step loop (no input pipeline), and
model FLOPs utilisation: FLOPs of one training step counted with ``FlopCounterMode`` (on the
meta device), x achieved steps/s, / the GPU's peak dense bf16 FLOP/s.

The JSON's top level also holds what the scaling cost model reads: ``single_worker_step_s``
(seconds per optimizer step of one worker at ``batch_per_worker``, 1 thread), ``params`` and
``trainable_params`` (of the CPU config's model), ``grad_bytes_fp32`` and
``train_flops_per_sample``.

Usage: python benchmarks/scaling_bench.py [--quick] [--out benchmarks/results] [--gpu-only]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, load_bench_config, write_results

CPU_CONFIG = REPO / "configs" / "cpu.yaml"
GPU_CONFIG = REPO / "configs" / "default.yaml"
PART = "scaling"
GOAL_EFFICIENCY = 0.85
RUN_TIMEOUT_S = 600.0

GPU_VARIANTS: tuple[tuple[str, bool, str | None], ...] = (
    ("fp32", False, None),
    ("bf16+channels_last", True, None),
    ("bf16+channels_last+compile", True, "default"),
    ("bf16+channels_last+compile reduce-overhead", True, "reduce-overhead"),
)
"""The 1-GPU training variants: label, bf16 autocast + channels_last, ``torch.compile``'s
mode (``run.compile_mode``; ``None``: eager). ``reduce-overhead`` replays the step's kernels
as CUDA graphs: the step is bound by kernel launches at batch 32 (one H100, 2026-11-27)."""

GPU_MODEL_BATCHES = (64, 128)
"""Larger batches of the bare model's step in bf16 + channels_last (eager), beside the runs'
batch: at batch 32 one H100 ran the default model at 5.4 % of its peak (2026-11-27). Samples/s
that grow with the batch say the step is bound by kernel launches and host work, not by the
GPU's arithmetic."""

GPU_CLI_BATCHES = (64,)
"""CLI training in bf16 + channels_last with the defaults at a larger batch (the learning rate
follows the sqrt rule): does the input path keep up with a bare step that ran 1.69x the
samples/s at batch 64 (one H100, 2026-11-27)?"""

GPU_INPUT_VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("no D4", ("data.augment=false",)),
    ("no photometric", ("data.photometric=0",)),
    ("D4 on the host", ("data.augment_on=host",)),
    ("feed in a thread", ("data.loader_workers=0",)),
)
"""CLI training in bf16 + channels_last with one part of the input path off or moved: label,
overrides. The defaults on a GPU: D4 as one gather on the GPU (``data.augment_on: auto``) and
the batches drawn by 2 processes (``data.loader_workers: auto``). On one H100 D4 on the GPU
with 2 processes was the fastest input setting of both runs (812 and 798 samples/s,
2026-11-27); the thread with D4 on the GPU ran 573. These rows check both choices
again and tell the parts' costs apart (photometric runs on the GPU in the training thread)."""

# Peak dense bf16 tensor-core FLOP/s by device name (first match wins).
PEAK_BF16_FLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989e12),
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),  # SXM
    ("A100", 312e12),
)

# (label, CLI flags) of the 2-worker settings; "plain" first (the others are compared with it).
OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("plain", ("--grad-compression", "none")),
    ("fp16", ("--grad-compression", "fp16")),
    # PowerSGD after 2 plain steps (torch's minimum), so it runs through the counted epochs
    ("powersgd", ("--grad-compression", "powersgd", "--set", "run.powersgd_warmup_steps=2")),
    ("accumulate 2", ("--accumulate", "2")),
    ("local SGD 4", ("--local-sgd-period", "4")),
    ("horovod", ("--engine", "horovod")),
)


@dataclass
class Sizes:
    """Run sizes of one benchmark mode.

    Attributes:
        tiles: Synthetic tiles written (each worker holds its share).
        tile_size: Tile height and width in pixels.
        samples_per_epoch: Global samples per epoch (CPU runs).
        epochs: Epochs per CPU run; the first is a warm-up and is not counted.
        options: Labels of the 2-worker settings to run.
        gpu_batch: Per-GPU batch of the GPU runs.
        gpu_samples_per_epoch: Samples per epoch of the GPU runs.
        gpu_epochs: Epochs per GPU run (the first is a warm-up).
        gpu_model_seconds: Timed seconds of the bare-model step loop per precision.
    """

    tiles: int
    tile_size: int
    samples_per_epoch: int
    epochs: int
    options: tuple[str, ...]
    gpu_batch: int = 32
    gpu_samples_per_epoch: int = 4096
    gpu_epochs: int = 3
    gpu_model_seconds: float = 10.0


FULL = Sizes(8, 512, 96, 3, tuple(label for label, _ in OPTIONS))
QUICK = Sizes(
    4,
    512,
    48,
    2,
    ("plain",),
    gpu_samples_per_epoch=2048,
    gpu_epochs=2,
    gpu_model_seconds=5.0,
)


@dataclass
class Measured:
    """What one ``landcover train`` run measured.

    Attributes:
        samples_per_s: Median over the counted epochs (global samples per second).
        epoch_s: Median training seconds per epoch over the counted epochs.
        epochs_s: Training seconds of every epoch, warm-up included.
        steps: Optimizer steps per epoch.
        global_batch: Samples per optimizer step over all workers.
        wall_s: Wall-clock seconds of the whole command (start-up and checkpoints included).
        load1: The machine's 1-minute load average just before the run.
        error: The failure, when the run failed (the other fields are then zero).
    """

    samples_per_s: float = 0.0
    epoch_s: float = 0.0
    epochs_s: list[float] = field(default_factory=list)
    steps: int = 0
    global_batch: int = 0
    wall_s: float = 0.0
    load1: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return self.error is None

    @property
    def spread(self) -> float | None:
        """(max - min) / median of the counted epochs' times (None with one counted epoch)."""
        counted = self.epochs_s[1:]
        if len(counted) < 2:
            return None
        return (max(counted) - min(counted)) / statistics.median(counted)


def train(
    data: Path,
    run_dir: Path,
    workers: int,
    flags: tuple[str, ...] | list[str],
    epochs: int,
    samples_per_epoch: int,
    config: Path = CPU_CONFIG,
    device: str = "cpu",
    sets: tuple[str, ...] | list[str] = ("run.threads_per_worker=1",),
) -> Measured:
    """Runs ``landcover train`` in a subprocess and reads its per-epoch figures.

    Args:
        data: Folder of synthetic pairs.
        run_dir: Run folder (must not exist, so the run does not resume).
        workers: Worker processes.
        flags: Extra CLI flags (communication options, engine).
        epochs: Epochs to train; the first is a warm-up and is not counted.
        samples_per_epoch: Global samples per epoch.
        config: YAML config.
        device: ``cpu`` or ``cuda``.
        sets: ``section.key=value`` overrides (validation is always switched off).

    Returns:
        The medians over the counted epochs, or the failure.
    """
    cmd = [
        sys.executable,
        "-m",
        "landcover",
        "train",
        "--config",
        str(config),
        "--data",
        str(data),
        "--out",
        str(run_dir),
        "--workers",
        str(workers),
        "--epochs",
        str(epochs),
        "--samples-per-epoch",
        str(samples_per_epoch),
        "--device",
        device,
        *flags,
        "--set",
        "data.val_fraction=0",
        "--set",
        "run.val_every=1000",
    ]
    for item in sets:
        cmd += ["--set", item]
    env = dict(os.environ)
    if device == "cpu":
        env["OMP_NUM_THREADS"] = "1"
    load1 = os.getloadavg()[0]
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = run_dir.parent / f"{run_dir.name}.log"
    start = time.perf_counter()
    with log_path.open("wb") as log:
        # own session: on a timeout the whole group (agent and workers) is ended together
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    wall = time.perf_counter() - start
    records = _read_metrics(run_dir / "metrics.jsonl")
    if code != 0 or len(records) < epochs:
        why = f"timed out after {RUN_TIMEOUT_S:.0f} s" if code is None else _last_line(log_path)
        return Measured(wall_s=wall, load1=load1, error=why)
    counted = records[1:] if len(records) > 1 else records
    return Measured(
        samples_per_s=statistics.median(r["samples_per_s"] for r in counted),
        epoch_s=statistics.median(r["epoch_s"] for r in counted),
        epochs_s=[r["epoch_s"] for r in records],
        steps=int(records[-1]["steps"]),
        global_batch=int(records[-1]["global_batch"]),
        wall_s=wall,
        load1=load1,
    )


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _last_line(log_path: Path) -> str:
    lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[:300]


def cli_lists_powersgd() -> bool:
    """Whether ``landcover train --help`` offers ``powersgd`` gradient compression."""
    out = subprocess.run(
        [sys.executable, "-m", "landcover", "train", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    return "powersgd" in out.stdout.lower()


def model_size(config_file: Path) -> dict[str, int]:
    """Parameter counts of a config's model.

    Args:
        config_file: YAML config.

    Returns:
        ``params``, ``trainable_params`` and ``grad_bytes_fp32`` (what DDP all-reduces per step).
    """
    from landcover.config import load_config
    from landcover.models import build_model

    config = load_config(config_file)
    model = build_model(config.model, len(config.data.bands), config.data.classes.num_classes)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "trainable_params": trainable,
        "grad_bytes_fp32": 4 * trainable,
    }


def train_flops_per_sample(config_file: Path) -> float:
    """FLOPs of one training sample (forward, loss and backward) at the config's patch size.

    Counted with ``torch.utils.flop_counter.FlopCounterMode`` on the meta device (shapes only,
    no arithmetic, any machine); the counts do not depend on dtype or memory format.

    Args:
        config_file: YAML config.

    Returns:
        FLOPs per sample of a training step (the optimizer update is not counted).
    """
    from torch.utils.flop_counter import FlopCounterMode

    from landcover.models import build_model
    from landcover.training.losses import SegmentationLoss

    config = load_bench_config(config_file)
    classes = config.data.classes.num_classes
    model = build_model(config.model, len(config.data.bands), classes).to("meta")
    criterion = SegmentationLoss(config.optim.loss, classes).to("meta")
    batch, patch = 2, config.data.patch_size
    x = torch.empty(batch, len(config.data.bands), patch, patch, device="meta")
    y = torch.zeros(batch, patch, patch, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as counter:
        criterion(model(x), y).backward()
    return counter.get_total_flops() / batch


def peak_bf16_flops(device_name: str) -> float | None:
    """Peak dense bf16 FLOP/s of a GPU from the small table, or None when not in it.

    Args:
        device_name: ``torch.cuda.get_device_name()``.

    Returns:
        FLOP/s, or None.
    """
    for key, flops in PEAK_BF16_FLOPS:
        if key.lower() in device_name.lower():
            return flops
    return None


def model_samples_per_s(
    config_file: Path,
    device: torch.device,
    bf16: bool,
    channels_last: bool,
    batch: int,
    seconds: float,
    compile_mode: str | None = None,
) -> float:
    """Training samples/s of the bare model on one device, without the input pipeline.

    Uses the trainer's own step (``accumulation_step``: autocast forward, loss, backward,
    optimizer step) on a fixed random batch.

    Args:
        config_file: YAML config (model, loss, optimizer, patch size).
        device: The device.
        bf16: bf16 autocast.
        channels_last: channels_last model and input.
        batch: Samples per step.
        seconds: About how long to time.
        compile_mode: The model under ``torch.compile`` in this mode (``run.compile_mode``;
            ``None``: eager); the warm-up steps pay the compile time.

    Returns:
        Samples per second.
    """
    from landcover.models import build_model, compile_model
    from landcover.training.losses import SegmentationLoss
    from landcover.training.step import accumulation_step, build_optimizer

    config = load_bench_config(config_file)
    classes = config.data.classes.num_classes
    patch, bands = config.data.patch_size, len(config.data.bands)
    torch.manual_seed(0)
    model = build_model(config.model, bands, classes).to(device)
    x = torch.randn(batch, bands, patch, patch, device=device)
    if channels_last:
        model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if compile_mode is not None:
        model = compile_model(model, "training", compile_mode)
    y = torch.randint(0, classes, (batch, patch, patch), device=device)
    criterion = SegmentationLoss(config.optim.loss, classes).to(device)
    optimizer = build_optimizer(model.parameters(), config)
    dtype = torch.bfloat16 if bf16 else None
    model.train()

    def steps(n: int) -> float:
        _sync(device)
        start = time.perf_counter()
        for _ in range(n):
            accumulation_step(model, criterion, optimizer, [(x, y)], dtype, config.optim.grad_clip)
        _sync(device)
        return time.perf_counter() - start

    steps(3)  # warm-up: kernels, allocator, optimizer state
    estimate = steps(3) / 3
    n = max(5, round(seconds / max(estimate, 1e-6)))
    return n * batch / steps(n)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_cpu(sizes: Sizes, work: Path) -> dict[str, Any]:
    """Runs the 1-worker baseline and the 2-worker settings on the CPU.

    Args:
        sizes: Run sizes.
        work: Scratch folder (data and run folders).

    Returns:
        ``baseline`` (a Measured), ``two`` (label -> Measured or None when skipped) and
        ``skipped`` (label -> why).
    """
    from landcover.synthetic.synthetic import write_synthetic_dataset

    data = work / "data"
    write_synthetic_dataset(data, sizes.tiles, sizes.tile_size, seed=0, prefix="scaling")
    skipped: dict[str, str] = {}
    if "powersgd" in sizes.options and not cli_lists_powersgd():
        skipped["powersgd"] = "not offered by this landcover train (--help)"

    def one(name: str, workers: int, flags: tuple[str, ...]) -> Measured:
        print(f"  {name}, {workers} worker(s) ...", end=" ", flush=True)
        m = train(data, work / name, workers, flags, sizes.epochs, sizes.samples_per_epoch)
        print(
            f"{m.samples_per_s:.2f} samples/s, {m.epoch_s:.1f} s/epoch (wall {m.wall_s:.0f} s)"
            if m.ok
            else f"FAILED: {m.error}",
            flush=True,
        )
        return m

    baseline = one("w1-plain", 1, ("--grad-compression", "none"))
    two: dict[str, Measured | None] = {}
    for label, flags in OPTIONS:
        if label not in sizes.options:
            continue
        if label in skipped:
            two[label] = None
            continue
        two[label] = one("w2-" + label.replace(" ", "-"), 2, flags)
    return {"baseline": baseline, "two": two, "skipped": skipped}


def measure_gpu(sizes: Sizes, work: Path, device: str = "cuda") -> dict[str, Any]:
    """1-GPU training throughput, fp32 versus bf16 autocast + channels_last (eager and
    compiled, ``run.compile``), and MFU.

    Args:
        sizes: Run sizes.
        work: Scratch folder.
        device: ``cuda`` (``cpu`` only to try the code path on a machine without a GPU).

    Returns:
        The GPU figures (``name``, ``peak_bf16_flops``, ``train_flops_per_sample``, and per
        precision: CLI and bare-model samples/s, achieved FLOP/s and MFU).
    """
    from landcover.synthetic.synthetic import write_synthetic_dataset

    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu (code-path test)"
    peak = peak_bf16_flops(name)
    flops = train_flops_per_sample(GPU_CONFIG)
    data = work / "gpu-data"
    write_synthetic_dataset(data, 8, 1024, seed=0, prefix="scaling")
    result: dict[str, Any] = {
        "name": name,
        "config": str(GPU_CONFIG.relative_to(REPO)),
        "batch": sizes.gpu_batch,
        "samples_per_epoch": sizes.gpu_samples_per_epoch,
        "peak_bf16_flops": peak,
        "train_flops_per_sample": flops,
        "precisions": {},
    }

    def one_gpu(name: str, sets: tuple[str, ...], batch: int = sizes.gpu_batch) -> Measured:
        """``landcover train`` with one worker on the device, GPU run sizes, these overrides."""
        return train(
            data,
            work / name,
            1,
            ("--batch-size", str(batch)),
            sizes.gpu_epochs,
            sizes.gpu_samples_per_epoch,
            config=GPU_CONFIG,
            device=device,
            sets=sets,
        )

    def one_bare(
        on: bool, batch: int, compile_mode: str | None = None
    ) -> tuple[float | None, str | None]:
        """The bare model's samples/s (bf16 + channels_last ``on``), or why it failed."""
        try:
            sps = model_samples_per_s(
                GPU_CONFIG,
                torch.device(device),
                on,
                on,
                batch,
                sizes.gpu_model_seconds,
                compile_mode,
            )
            return sps, None
        except (RuntimeError, ValueError) as exc:  # out of memory, unsupported kernel
            return None, str(exc).splitlines()[0][:300]
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()

    for label, on, mode in GPU_VARIANTS:
        flag = str(on).lower()
        compiled = (f"run.compile_mode={mode}",) if mode else ()
        m = one_gpu(
            f"gpu-{label.replace('+', '-').replace(' ', '-')}",
            (
                f"run.bf16={flag}",
                f"run.channels_last={flag}",
                f"run.compile={str(mode is not None).lower()}",
                *compiled,
            ),
        )
        bare, bare_error = one_bare(on, sizes.gpu_batch, mode)
        train_sps = m.samples_per_s if m.ok else None
        result["precisions"][label] = {
            "train_samples_per_s": train_sps,
            "train_epoch_s": m.epoch_s if m.ok else None,
            "train_error": m.error,
            "model_samples_per_s": bare,
            "model_error": bare_error,
            "train_flops_per_s": train_sps * flops if train_sps else None,
            "model_flops_per_s": bare * flops if bare else None,
            "train_mfu": train_sps * flops / peak if train_sps and peak else None,
            "model_mfu": bare * flops / peak if bare and peak else None,
        }
        print(
            f"  gpu {label}: CLI train {train_sps or m.error} samples/s, "
            f"model only {bare or bare_error} samples/s",
            flush=True,
        )
    result["batches"] = {}
    for batch in GPU_MODEL_BATCHES:
        sps, error = one_bare(True, batch)
        result["batches"][str(batch)] = {"model_samples_per_s": sps, "model_error": error}
        print(
            f"  gpu bf16+channels_last, model only, batch {batch}: {sps or error} samples/s",
            flush=True,
        )
    result["inputs"] = {}
    variants = [(label, sets, sizes.gpu_batch) for label, sets in GPU_INPUT_VARIANTS]
    variants += [(f"batch {b}", (), b) for b in GPU_CLI_BATCHES]
    for label, sets, batch in variants:
        m = one_gpu(
            f"gpu-input-{label.replace(' ', '-')}",
            ("run.bf16=true", "run.channels_last=true", *sets),
            batch,
        )
        result["inputs"][label] = {
            "sets": list(sets) or [f"--batch-size {batch}"],
            "batch": batch,
            "train_samples_per_s": m.samples_per_s if m.ok else None,
            "train_epoch_s": m.epoch_s if m.ok else None,
            "train_error": m.error,
        }
        print(
            f"  gpu bf16+channels_last, {label}: CLI train {m.samples_per_s if m.ok else m.error}"
        )
    return result


def run(quick: bool, out: Path, gpu_only: bool = False) -> list[Goal]:
    """Runs the scaling benchmark, prints its table, writes ``{out}/scaling.json`` / ``.csv``.

    Args:
        quick: 1-worker and plain 2-worker runs only, 2 epochs of 48 samples (about a minute).
        out: Results folder.
        gpu_only: The GPU section alone (``scripts/gpu-check.sh``: a lent GPU's minutes go
            to what only it can measure; the CPU rows come from a CPU machine's run).

    Returns:
        The part's goals.

    Raises:
        SystemExit: ``gpu_only`` where torch sees no CUDA GPU.
    """
    from landcover.config import load_config

    sizes = QUICK if quick else FULL
    if gpu_only:
        if not torch.cuda.is_available():
            raise SystemExit("error: --gpu-only needs a CUDA GPU; torch sees none here")
        with tempfile.TemporaryDirectory(prefix="landcover-scaling-") as tmp:
            gpu = measure_gpu(sizes, Path(tmp))
        goals = _gpu_goals(gpu)
        write_results(PART, _gpu_rows(gpu), {"quick": quick, "gpu": gpu}, out, goals)
        return goals
    model = model_size(CPU_CONFIG)
    flops = train_flops_per_sample(CPU_CONFIG)
    cpu_config = load_config(CPU_CONFIG)
    batch = cpu_config.optim.batch_size
    with tempfile.TemporaryDirectory(prefix="landcover-scaling-") as tmp:
        cpu = measure_cpu(sizes, Path(tmp))
        gpu = measure_gpu(sizes, Path(tmp)) if torch.cuda.is_available() else None

    base: Measured = cpu["baseline"]
    two: dict[str, Measured | None] = cpu["two"]
    plain = two.get("plain")
    rows = [_row("cpu", "1 worker (baseline)", 1, base)]
    efficiency: dict[str, float | None] = {}
    vs_plain: dict[str, float | None] = {}
    for label, m in two.items():
        if m is None:
            rows.append(_row("cpu", label, 2, None, note=cpu["skipped"][label]))
            efficiency[label] = vs_plain[label] = None
            continue
        eff = m.samples_per_s / (2 * base.samples_per_s) if m.ok and base.ok else None
        ratio = m.epoch_s / plain.epoch_s if m.ok and plain is not None and plain.ok else None
        efficiency[label], vs_plain[label] = eff, ratio
        rows.append(_row("cpu", label, 2, m, eff, ratio))
    rows += _gpu_rows(gpu)

    goals = _cpu_goals(base, two, efficiency, vs_plain, cpu["skipped"]) + _gpu_goals(gpu)
    step_s = base.epoch_s / base.steps if base.ok else None
    extra = {
        "quick": quick,
        "settings": {
            "config": str(CPU_CONFIG.relative_to(REPO)),
            "encoder": cpu_config.model.encoder,
            "patch_size": cpu_config.data.patch_size,
            "batch_per_worker": batch,
            "samples_per_epoch": sizes.samples_per_epoch,
            "epochs": sizes.epochs,
            "warmup_epochs_skipped": 1,
            "statistic": "median of the epochs after the first",
            "threads_per_worker": 1,
            "tiles": sizes.tiles,
            "tile_size": sizes.tile_size,
            "validation": "off (data.val_fraction=0)",
        },
        "single_worker_step_s": step_s,
        "single_worker_samples_per_s": base.samples_per_s if base.ok else None,
        "single_worker_flops_per_s": base.samples_per_s * flops if base.ok else None,
        "batch_per_worker": batch,
        **model,
        "train_flops_per_sample": flops,
        "efficiency": efficiency,
        "epoch_vs_plain": vs_plain,
        "skipped": cpu["skipped"],
        "runs": {
            "1 worker": _run_doc(base),
            **{f"2 workers {k}": _run_doc(m) for k, m in two.items() if m is not None},
        },
        "gpu": gpu,
    }
    write_results(PART, rows, extra, out, goals)
    return goals


def _row(
    section: str,
    setting: str,
    workers: int,
    m: Measured | None,
    efficiency: float | None = None,
    vs_plain: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    ok = m is not None and m.ok
    if m is not None and not m.ok:
        note = f"failed: {m.error}"
    return {
        "section": section,
        "setting": setting,
        "workers": workers,
        "samples_per_s": round(m.samples_per_s, 3) if ok else "",
        "epoch_s": round(m.epoch_s, 2) if ok else "",
        "epoch_spread": round(m.spread, 3) if ok and m.spread is not None else "",
        "steps": m.steps if ok else "",
        "global_batch": m.global_batch if ok else "",
        "efficiency": round(efficiency, 3) if efficiency is not None else "",
        "epoch_vs_plain": round(vs_plain, 3) if vs_plain is not None else "",
        "mfu": "",
        "load1": round(m.load1, 2) if m is not None else "",
        "note": note,
    }


def _gpu_rows(gpu: dict[str, Any] | None) -> list[dict[str, Any]]:
    blank = {k: "" for k in _row("gpu", "", 1, None)}
    if gpu is None:
        return [{**blank, "section": "gpu", "setting": "n/a: no GPU", "workers": ""}]
    rows = []
    for label, p in gpu["precisions"].items():
        for kind in ("train", "model"):
            sps, mfu, error = p[f"{kind}_samples_per_s"], p[f"{kind}_mfu"], p[f"{kind}_error"]
            rows.append(
                {
                    **blank,
                    "section": "gpu",
                    "setting": f"{'CLI train' if kind == 'train' else 'model only'} {label}",
                    "workers": 1,
                    "samples_per_s": round(sps, 1) if sps else "",
                    "epoch_s": round(p["train_epoch_s"], 2)
                    if kind == "train" and p["train_epoch_s"]
                    else "",
                    "global_batch": gpu["batch"],
                    "mfu": round(mfu, 4) if mfu is not None else "",
                    "note": f"failed: {error}" if error else gpu["name"],
                }
            )
    for batch, p in gpu.get("batches", {}).items():
        sps, error = p["model_samples_per_s"], p["model_error"]
        peak = gpu["peak_bf16_flops"]
        mfu = sps * gpu["train_flops_per_sample"] / peak if sps and peak else None
        rows.append(
            {
                **blank,
                "section": "gpu",
                "setting": f"model only bf16+channels_last, batch {batch}",
                "workers": 1,
                "samples_per_s": round(sps, 1) if sps else "",
                "global_batch": int(batch),
                "mfu": round(mfu, 4) if mfu is not None else "",
                "note": f"failed: {error}" if error else gpu["name"],
            }
        )
    for label, p in gpu.get("inputs", {}).items():
        sps, error = p["train_samples_per_s"], p["train_error"]
        rows.append(
            {
                **blank,
                "section": "gpu",
                "setting": f"CLI train bf16+channels_last, {label}",
                "workers": 1,
                "samples_per_s": round(sps, 1) if sps else "",
                "epoch_s": round(p["train_epoch_s"], 2) if p["train_epoch_s"] else "",
                "global_batch": p.get("batch", gpu["batch"]),
                "note": f"failed: {error}" if error else f"{gpu['name']}; {' '.join(p['sets'])}",
            }
        )
    return rows


def _cpu_goals(
    base: Measured,
    two: dict[str, Measured | None],
    efficiency: dict[str, float | None],
    vs_plain: dict[str, float | None],
    skipped: dict[str, str],
) -> list[Goal]:
    goals = []
    for label, m in two.items():
        eff = efficiency[label]
        if label == "plain":
            what = "2-worker efficiency, plain all-reduce (DDP/Gloo, CPU, 1 thread/worker)"
            target = f">= {GOAL_EFFICIENCY}"
        else:
            what = f"2-worker efficiency, {label} (CPU, 1 thread/worker)"
            target = f"report (>= {GOAL_EFFICIENCY} is the plain goal)"
        if m is None:
            goals.append(Goal(PART, what, None, target, None, f"n/a: {skipped[label]}"))
            continue
        if eff is None:
            error = base.error if not base.ok else m.error
            goals.append(Goal(PART, what, None, target, False, f"run failed: {error}"))
            continue
        note = (
            f"1 worker {base.samples_per_s:.2f} samples/s, 2 workers {m.samples_per_s:.2f}; "
            f"load {m.load1:.1f} before the run"
        )
        if label != "plain" and vs_plain[label] is not None:
            note += f"; 2-worker epoch time {vs_plain[label]:.2f}x plain's"
        holds = eff >= GOAL_EFFICIENCY if label == "plain" else None
        goals.append(Goal(PART, what, round(eff, 3), target, holds, note))
    return goals


def _gpu_goals(gpu: dict[str, Any] | None) -> list[Goal]:
    speed = "1-GPU training speed-up, bf16 autocast + channels_last over fp32"
    compiled = "1-GPU training speed-up, torch.compile over eager (bf16 + channels_last)"
    graphs = (
        "1-GPU training speed-up, torch.compile reduce-overhead (CUDA graphs) over eager "
        "(bf16 + channels_last)"
    )
    util = "1-GPU model FLOPs utilisation ({}, of peak dense bf16)"
    labels = ("bf16 + channels_last", "bf16 + channels_last + compile")
    if gpu is None:
        return [
            Goal(PART, what, None, "report", None, "n/a: no GPU")
            for what in (speed, compiled, graphs, *(util.format(label) for label in labels))
        ]
    p = gpu["precisions"]
    fp32, bf16, comp = p["fp32"], p["bf16+channels_last"], p["bf16+channels_last+compile"]
    # results of a run before the row existed have none
    cuda_graphs = p.get("bf16+channels_last+compile reduce-overhead")

    def ratio(a: dict[str, Any], b: dict[str, Any], kind: str) -> float | None:
        over, under = a[f"{kind}_samples_per_s"], b[f"{kind}_samples_per_s"]
        return over / under if over and under else None

    def also(value: float | None) -> str:
        return f"{value:.2f}x" if value else "n/a"

    peak = gpu["peak_bf16_flops"]
    peak_note = f"peak {peak / 1e12:.0f} TFLOP/s" if peak else "GPU not in the peak table"
    where = f"{gpu['name']}, batch {gpu['batch']}, {gpu['config']}"
    goals = []
    pairs = [(speed, bf16, fp32), (compiled, comp, bf16)]
    pairs += [(graphs, cuda_graphs, bf16)] if cuda_graphs else []
    for what, a, b in pairs:
        value = ratio(a, b, "train")
        goals.append(
            Goal(
                PART,
                what,
                round(value, 2) if value else None,
                "report",
                None,
                f"{where}; CLI training; model only {also(ratio(a, b, 'model'))}",
            )
        )
    for label, p_in in gpu.get("inputs", {}).items():
        value = ratio(p_in, bf16, "train")
        goals.append(
            Goal(
                PART,
                f"1-GPU CLI training speed-up with {label}, over the defaults (bf16 + "
                "channels_last)",
                round(value, 2) if value else None,
                "report",
                None,
                f"{where}; {' '.join(p_in['sets'])}"
                + (f"; failed: {p_in['train_error']}" if p_in["train_error"] else ""),
            )
        )
    for label, prec in zip(labels, (bf16, comp), strict=True):
        mfu, bare = prec["train_mfu"], prec["model_mfu"]
        goals.append(
            Goal(
                PART,
                util.format(label),
                round(mfu, 4) if mfu is not None else None,
                "report",
                None,
                f"{gpu['name']}, {peak_note}; CLI training (input pipeline included); model only "
                + (f"{bare:.3f}" if bare is not None else "n/a"),
            )
        )
    return goals


def _run_doc(m: Measured) -> dict[str, Any]:
    return {
        "samples_per_s": m.samples_per_s,
        "epoch_s": m.epoch_s,
        "epochs_s": m.epochs_s,
        "steps": m.steps,
        "global_batch": m.global_batch,
        "wall_s": round(m.wall_s, 1),
        "load1": m.load1,
        "error": m.error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 2 workers, plain only")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    parser.add_argument(
        "--gpu-only", action="store_true", help="the GPU section alone (needs a CUDA GPU)"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    run(args.quick, args.out, args.gpu_only)
    print(f"\nscaling benchmark took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
