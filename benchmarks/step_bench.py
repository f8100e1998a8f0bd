"""The plain PyTorch loop as the yardstick of the training step (issue 43).

Side by side in one process, on one device:

- **plain loop**: the 40-line loop a user would write for the same model and batch: smp's
  ``Unet`` (the config's encoder, 4 bands, the classes), cross-entropy, ``AdamW`` (fused on a
  GPU), bf16 autocast and channels_last on a GPU, one fixed random batch already on the device;
- **trainer step**: :class:`~landcover.training.trainer.Trainer`'s own step on the built-in
  sample, as ``landcover train`` runs it (the feed's batches made model input on the device:
  D4, photometric and per-tile normalisation; weighted cross-entropy + Dice; the optimizer; the
  weights' moving average; the callbacks), in this process.

For each: samples/s and **aten operations dispatched per optimizer step** (a
``TorchDispatchMode`` counting every operator call that reaches the kernels, on the training
thread): on a GPU each one is at least one kernel launch, so at a small batch, where the step is
bound by launches, the ratio of the two counts predicts the ratio of the GPU step times. With
``--cli`` (on a GPU) it also runs ``landcover train`` itself at the same batch, eager and with
``run.compile_mode=reduce-overhead`` (CUDA graphs), and reads its samples/s from
``metrics.jsonl``.

Usage: python benchmarks/step_bench.py [--config configs/cpu.yaml] [--batch 8 ...] [--cli]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import landcover.feed.photometric as photometric_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, write_results

CPU_CONFIG = REPO / "configs" / "cpu.yaml"
GPU_CONFIG = REPO / "configs" / "default.yaml"
OPS_GOAL = 1.3
"""Aten operations a step of the trainer over the plain loop's, at most (issue 43)."""


class OpCounter(TorchDispatchMode):
    """Counts the aten operations dispatched to the kernels while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()
        self.views = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Counts one call and runs it."""
        self.counts[str(func.overloadpacket.__name__)] += 1
        self.views += bool(func.is_view)
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        """Operations counted."""
        return sum(self.counts.values())

    @property
    def launches(self) -> int:
        """Operations that compute (all but views, which only describe memory): on a GPU,
        a kernel launch each (or a host read); host-side operations are counted too."""
        return self.total - self.views


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    step: Callable[[], Any], device: torch.device, batch: int, seconds: float, count_steps: int
) -> dict[str, Any]:
    """Times a step function and counts its operations.

    Args:
        step: One optimizer step.
        device: Its device.
        batch: Samples a step.
        seconds: About how long to time.
        count_steps: Steps whose operations are counted (after the timing).

    Returns:
        ``samples_per_s``, ``ms_per_step``, ``ops_per_step`` and the ten most frequent ops.
    """

    def timed(n: int) -> float:
        _sync(device)
        start = time.perf_counter()
        for _ in range(n):
            step()
        _sync(device)
        return time.perf_counter() - start

    timed(3)  # warm-up: kernels chosen, allocator, optimizer state
    estimate = timed(2) / 2
    n = max(3, round(seconds / max(estimate, 1e-6)))
    wall = timed(n)
    counter = OpCounter()
    # the count follows a GPU's path through the photometric pass (the batch in one chunk;
    # the CPU's goes patch by patch, for its caches)
    chunk, photometric_module.CPU_CHUNK = photometric_module.CPU_CHUNK, 1 << 30
    try:
        with counter:
            for _ in range(count_steps):
                step()
    finally:
        photometric_module.CPU_CHUNK = chunk
    _sync(device)
    top = counter.counts.most_common(10)
    return {
        "samples_per_s": n * batch / wall,
        "ms_per_step": 1000 * wall / n,
        "ops_per_step": counter.total / count_steps,
        "launches_per_step": counter.launches / count_steps,
        "top_ops": {name: c / count_steps for name, c in top},
    }


def plain_loop(config_file: Path, batch: int, device: torch.device) -> Callable[[], None]:
    """The plain loop's step: the model a user builds with smp, data already on the device.

    Args:
        config_file: The config whose model, classes and patch size it copies.
        batch: Samples a step.
        device: The device.

    Returns:
        One optimizer step.
    """
    import segmentation_models_pytorch as smp

    from landcover.config import load_config

    cfg = load_config(config_file)
    classes = cfg.data.classes.num_classes
    patch, bands = cfg.data.patch_size, len(cfg.data.bands)
    torch.manual_seed(0)
    model = smp.Unet(
        encoder_name=cfg.model.encoder,
        encoder_weights=None,
        encoder_depth=cfg.model.encoder_depth,
        decoder_channels=list(cfg.model.decoder_channels),
        in_channels=bands,
        classes=classes,
    ).to(device)
    gpu = device.type == "cuda"
    x = torch.randn(batch, bands, patch, patch, device=device)
    y = torch.randint(0, classes, (batch, patch, patch), device=device)
    if gpu:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    criterion = torch.nn.CrossEntropyLoss()
    model.train()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

    return step


def bench_trainer(
    config_file: Path, batch: int, device: torch.device, work: Path, sets: dict[str, Any]
) -> Any:
    """A :class:`~landcover.training.trainer.Trainer` on the built-in sample, in this process.

    Args:
        config_file: The config.
        batch: Samples a step (``optim.batch_size``).
        device: The device.
        work: Scratch folder (the run folder).
        sets: Further ``section.key`` overrides.

    Returns:
        The trainer, ready to train (no validation tiles).
    """
    from landcover.config import load_config
    from landcover.parallel.engines import engine_for
    from landcover.parallel.env import DistEnv
    from landcover.training.trainer import Trainer

    overrides = {
        "optim.batch_size": batch,
        "data.val_fraction": 0,
        "run.out": str(work / "run"),
        "run.device": device.type,
        **sets,
    }
    config = load_config(config_file, overrides)
    return Trainer(config, DistEnv(), engine_for(config.run), device)


def fed_trainer(
    config_file: Path, batch: int, device: torch.device, work: Path, sets: dict[str, Any]
) -> tuple[Any, Generator[tuple, None, None]]:
    """:func:`bench_trainer` set to train, with its feed of the run's batches started.

    Args:
        config_file: The config.
        batch: Samples a step (``optim.batch_size``).
        device: The device.
        work: Scratch folder (the run folder).
        sets: Further ``section.key`` overrides.

    Returns:
        ``(trainer, feed)``: the feed is as long as a bench asks, as a run's; close it to end.
    """
    trainer = bench_trainer(config_file, batch, device, work, sets)
    trainer.replica.module.train()
    trainer.data.prepare.start_epoch(0, 0)
    return trainer, trainer.feed(0, epochs=1000)


def trainer_step(
    config_file: Path, batch: int, device: torch.device, work: Path, sets: dict[str, Any]
) -> tuple[Callable[[], None], Callable[[], None]]:
    """The trainer's own step, on the built-in sample, in this process.

    Args:
        config_file: The config.
        batch: Samples a step (``optim.batch_size``).
        device: The device.
        work: Scratch folder (the run folder).
        sets: Further ``section.key`` overrides.

    Returns:
        ``(step, close)``: one optimizer step, and what ends the feed.
    """
    trainer, source = fed_trainer(config_file, batch, device, work, sets)
    loss_sum = torch.zeros((), device=device)
    state: dict[str, int] = {"step": 0}
    steps = trainer.geometry.steps_per_epoch

    def step() -> None:
        trainer._train_step(0, state["step"] % steps, source, loss_sum)
        state["step"] += 1

    return step, source.close


def cli_samples_per_s(
    config_file: Path, batch: int, work: Path, sets: tuple[str, ...], epochs: int, samples: int
) -> float | str:
    """``landcover train`` at a batch on the GPU: the median samples/s after the first epoch.

    Args:
        config_file: The config.
        batch: ``--batch-size``.
        work: Scratch folder.
        sets: ``--set`` items.
        epochs: Epochs (the first is not counted: compilation, cuDNN's search).
        samples: ``--samples-per-epoch``.

    Returns:
        Samples/s, or the last line of the run's log when it failed.
    """
    from scaling_bench import train

    from landcover.synthetic.sample import ensure_sample

    run_dir = work / f"cli-{batch}-{len(sets)}-{int(time.time() * 1000) % 100000}"
    measured = train(
        ensure_sample(),
        run_dir,
        1,
        ["--batch-size", str(batch)],
        epochs,
        samples,
        config=config_file,
        device="cuda",
        sets=list(sets),
    )
    return measured.samples_per_s if measured.error is None else measured.error


def run(quick: bool, out: Path) -> list[Goal]:
    """The benchmark part as ``benchmarks/run.py step`` runs it (the CPU config on the CPU)."""
    return bench(CPU_CONFIG, [8], torch.device("cpu"), out, seconds=4 if quick else 10)


IN_PROCESS_GPU_ROWS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("trainer step, eager", {"run.cuda_graph": False}),
    ("trainer step, eager, no photometric", {"run.cuda_graph": False, "data.photometric": 0.0}),
)
"""Further in-process rows on a GPU, beside the defaults' (there one CUDA graph a step,
``run.cuda_graph: auto``): the step run eagerly, with and without the photometric pass."""

CLI_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("CLI", ()),
    ("CLI eager", ("run.cuda_graph=false",)),
    ("CLI compile reduce-overhead", ("run.compile=true", "run.compile_mode=reduce-overhead")),
)
"""``landcover train`` rows on a GPU (``--cli``): the defaults, the step run eagerly, and
the model under ``torch.compile``'s CUDA graphs instead of the whole step's."""


def _row(
    config_file: Path, device: torch.device, batch: int, name: str, m: dict[str, Any], plain: float
) -> dict[str, Any]:
    return {
        "config": config_file.name,
        "device": device.type,
        "batch": batch,
        "row": name,
        "samples_per_s": round(m["samples_per_s"], 1),
        "ms_per_step": round(m["ms_per_step"], 2),
        "ops_per_step": round(m["ops_per_step"], 1) if "ops_per_step" in m else "",
        "launches_per_step": round(m["launches_per_step"], 1) if "launches_per_step" in m else "",
        "vs_plain": round(m["samples_per_s"] / plain, 3),
        "top_ops": " ".join(f"{k}:{v:g}" for k, v in m.get("top_ops", {}).items()),
    }


def _failed(
    config_file: Path, device: torch.device, batch: int, name: str, why: str
) -> dict[str, Any]:
    row = _row(config_file, device, batch, name, {"samples_per_s": 0.0, "ms_per_step": 0.0}, 1.0)
    return {**row, "samples_per_s": f"failed: {why}"[:200], "ms_per_step": "", "vs_plain": ""}


def _in_process(
    config_file: Path, batch: int, device: torch.device, seconds: float, sets: dict[str, Any]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        step, close = trainer_step(config_file, batch, device, Path(tmp), sets)
        try:
            return measure(step, device, batch, seconds, 2)
        finally:
            close()


def bench(
    config_file: Path,
    batches: list[int],
    device: torch.device,
    out: Path,
    seconds: float,
    cli: bool = False,
    cli_epochs: int = 3,
    cli_samples: int = 4096,
) -> list[Goal]:
    """Runs the plain loop and the trainer's step (and on a GPU the CLI) at each batch.

    Args:
        config_file: The config.
        batches: Batch sizes.
        device: The device.
        out: Results folder.
        seconds: About how long each timing runs.
        cli: Also run ``landcover train`` on a GPU: :data:`CLI_ROWS` at the first batch, the
            first two at the others.
        cli_epochs: The CLI runs' epochs.
        cli_samples: The CLI runs' samples an epoch.

    Returns:
        The goals: operations that compute, a trainer step's over the plain loop's.
    """
    rows: list[dict[str, Any]] = []
    goals: list[Goal] = []
    gpu = device.type == "cuda"
    for batch in batches:
        # the yardstick at its best: measured twice, the second time after a warm GPU
        loop = plain_loop(config_file, batch, device)
        plain = max(
            (measure(loop, device, batch, seconds, 2) for _ in range(2)),
            key=lambda m: m["samples_per_s"],
        )
        base = plain["samples_per_s"]
        rows.append(_row(config_file, device, batch, "plain loop", plain, base))
        ours = _in_process(config_file, batch, device, seconds, {})
        rows.append(_row(config_file, device, batch, "trainer step", ours, base))
        for name, sets in IN_PROCESS_GPU_ROWS if gpu else ():
            try:
                m = _in_process(config_file, batch, device, seconds, sets)
            except Exception as exc:  # a row that fails says why; the others go on
                rows.append(_failed(config_file, device, batch, name, str(exc)))
                continue
            rows.append(_row(config_file, device, batch, name, m, base))
        cli_rows = CLI_ROWS if batch == batches[0] else CLI_ROWS[:2]
        for name, items in cli_rows if cli and gpu else ():
            with tempfile.TemporaryDirectory() as tmp:
                sps = cli_samples_per_s(
                    config_file, batch, Path(tmp), items, cli_epochs, cli_samples
                )
            if isinstance(sps, float):
                timing = {"samples_per_s": sps, "ms_per_step": 1000 * batch / sps}
                rows.append(_row(config_file, device, batch, name, timing, base))
            else:
                rows.append(_failed(config_file, device, batch, name, sps))
        ratio = ours["launches_per_step"] / plain["launches_per_step"]
        goals.append(
            Goal(
                part="step",
                goal=f"operations that compute a step, trainer / plain loop ({config_file.name}, "
                f"batch {batch}, {device.type})",
                value=round(ratio, 3),
                target=f"<= {OPS_GOAL}",
                holds=ratio <= OPS_GOAL,
                note=f"{ours['launches_per_step']:.0f} against {plain['launches_per_step']:.0f} "
                f"(with views {ours['ops_per_step']:.0f} against {plain['ops_per_step']:.0f}); "
                f"samples/s {ours['samples_per_s'] / base:.2f}x the plain loop's in-process",
            )
        )
    write_results("step", rows, {"seconds": seconds}, out, goals)
    return goals


def main() -> None:
    """Command line: the configs and batches to compare."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=None, help="default: cpu.yaml on the CPU")
    parser.add_argument("--batch", type=int, nargs="+", default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--cli", action="store_true", help="also landcover train (GPU)")
    parser.add_argument("--cli-epochs", type=int, default=3)
    parser.add_argument("--cli-samples", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    device = torch.device(args.device)
    config = args.config or (GPU_CONFIG if device.type == "cuda" else CPU_CONFIG)
    batches = args.batch or ([16, 64] if device.type == "cuda" else [8])
    goals = bench(
        config, batches, device, args.out, args.seconds, args.cli, args.cli_epochs, args.cli_samples
    )
    print("\n".join(f"{g.goal}: {g.value} ({g.note})" for g in goals))
    if device.type == "cpu":
        print(f"median ops ratio {statistics.median(g.value or 0 for g in goals):.3f}")


if __name__ == "__main__":
    main()
