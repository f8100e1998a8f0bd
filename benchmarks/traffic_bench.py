"""Bytes a training step moves, by part: what bounds the trainer's CUDA-graph step at a large batch.

At batch 16 on a GPU the eager step is bound by kernel launches, which ``step_bench.py`` counts
(operations dispatched a step). As one CUDA graph (the default on CUDA) the launches are gone,
and at batch 64 the step is bound by the GPU's own work: on one H200 the graph step ran 33.4 ms
against the plain loop's 30.1 (0.90x, ``results/gpu/h200-2026-11-28``). What the trainer adds
there is elementwise work (the input's D4, photometric pass and normalisation, the CE + Dice
loss, the weights' moving average), bound by memory bandwidth, not arithmetic.

This part counts it on the CPU: every aten operation of one optimizer step of the default
config (``configs/default.yaml``: U-Net resnet34, 256 px), with each operation charged the bytes
of the tensors it reads and writes (a model of memory traffic: each input read and each output
written once, a copy's target and an ``out=`` tensor only written; views and allocations move
nothing), as the step a CUDA graph captures runs it (the photometric draw made on the host,
every patch through one pass), attributed to a part by where it was called from (the feed,
the loss and its backward, the moving average, the optimizer, the model forward, the model
backward), and the operations (views and allocations apart: as one CUDA graph each is a node
of the graph, a kernel of a few microseconds at least however little it does). The plain loop
(``step_bench.plain_loop``) is counted alike. On the CPU the model runs
in fp32 (bf16 on a GPU halves the model's bytes, not the trainer's fp32 extras); the parts of the
trainer beyond the plain loop are what a GPU's graph step pays for beyond the model. The table
gives each part's GB a step at the counted batch and at batch 64 (the per-sample parts scaled,
the optimizer's and the average's as they are), and the extra bytes' time at the H200's memory
bandwidth: a lower bound of what they cost there.

Usage: python benchmarks/run.py traffic [--quick]  (or: python benchmarks/traffic_bench.py --batch 8)
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import landcover.feed.photometric as photometric_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results
from step_bench import GPU_CONFIG, fed_trainer, plain_loop

H200_BANDWIDTH = 4.8e12
"""The H200's HBM3e bandwidth, bytes/s (NVIDIA's data sheet)."""

TARGET_BATCH = 64
"""The batch whose step the figures are scaled to (the GPU check's second batch)."""

PER_STEP_PARTS = ("optimizer", "moving average")
"""Parts whose bytes do not grow with the batch (they touch the weights, not the samples)."""

LOSS_GRAD_OPS = frozenset(
    {"nll_loss2d_backward", "nll_loss_backward", "_log_softmax_backward_data"}
)
"""The backward operations of torch's cross-entropy (autograd's, called from no Python frame)."""


def part_of(name: str, stack: list[traceback.FrameSummary], backward: bool) -> str:
    """The part of the step an operation belongs to.

    Args:
        name: The operation's name.
        stack: The Python frames it was called from.
        backward: Whether it ran in autograd's backward pass.

    Returns:
        One of input, loss, moving average, optimizer, model forward, model backward, other.
    """
    paths = [frame.filename.replace("\\", "/") for frame in reversed(stack)]  # innermost first
    for path in paths:  # ours first: the average steps through torch.optim's helpers
        if "/landcover/feed/" in path:
            return "input"
        if "/landcover/training/fusedloss" in path or "/landcover/training/loss" in path:
            return "loss"
        if "/landcover/training/ema" in path:
            return "moving average"
    for frame, path in zip(reversed(stack), paths, strict=True):
        if frame.name == "cross_entropy" and path.endswith("torch/nn/functional.py"):
            return "loss"
        if "/torch/optim/" in path or "/torch/nn/utils/clip_grad" in path:
            return "optimizer"
    if backward:
        return "loss" if name in LOSS_GRAD_OPS else "model backward"
    if any("segmentation_models_pytorch" in f.filename for f in stack):
        return "model forward"
    return "other"


def _nbytes(tree: Any) -> int:
    """The bytes of the tensors in a nest of arguments."""
    flat, _ = tree_flatten(tree)
    return sum(t.numel() * t.element_size() for t in flat if isinstance(t, torch.Tensor))


class TrafficCounter(TorchDispatchMode):
    """Charges each aten operation the bytes it reads and writes, by part of the step."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes: collections.Counter[str] = collections.Counter()
        self.ops: collections.Counter[tuple[str, str]] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Runs one operation and charges its tensors' bytes to its part."""
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if not func.is_view and not name.startswith("empty"):  # allocations move nothing
            kwargs = kwargs or {}
            # read: the inputs (not a copy's target, nor an out= tensor); written: the outputs
            read = (
                args[1:] if name == "copy_" else args,
                {k: v for k, v in kwargs.items() if k != "out"},
            )
            written = args[0] if out is None and name.endswith("_") else out  # _foreach_*_
            moved = _nbytes(read) + _nbytes(written)
            backward = torch._C._current_graph_task_id() != -1
            part = part_of(name, traceback.extract_stack(), backward)
            self.bytes[part] += moved
            self.calls[part] += 1
            self.ops[part, name] += moved
        return out


def graph_body_step(
    batch: int, work: Path
) -> tuple[Callable[[], torch.Tensor], Callable[[], None]]:
    """The trainer's step as a CUDA graph captures it, run eagerly on the CPU.

    The captured body (:meth:`~landcover.training.steprunner.StepRunner._graph_body`): the
    photometric draw made on the host and every patch through its one pass, the step, the
    average with its weight in a tensor; the eager trainer on the CPU takes other paths.

    Args:
        batch: Samples a step.
        work: Scratch folder.

    Returns:
        ``(step, close)``.
    """
    trainer, source = fed_trainer(GPU_CONFIG, batch, torch.device("cpu"), work, {})
    runner = trainer.step
    runner.ema_weight = torch.tensor(0.01)  # the graph runner's device tensor
    for group in runner.parts.optimizer.param_groups:
        group["lr"] = trainer.config.optim.lr
    prepare = runner.parts.prepare

    def step() -> torch.Tensor:
        sampled = next(source)
        draw = prepare.host_draw(sampled[0])
        return runner._graph_body(sampled if draw is None else (*sampled, draw))

    return step, source.close


def count(step: Callable[[], Any]) -> TrafficCounter:
    """Bytes of one step by part and operation, after two steps of warm-up."""
    step()
    step()
    counter = TrafficCounter()
    # a GPU's path through the photometric pass: the batch in one chunk
    chunk, photometric_module.CPU_CHUNK = photometric_module.CPU_CHUNK, 1 << 30
    try:
        with counter:
            step()
    finally:
        photometric_module.CPU_CHUNK = chunk
    return counter


def top_ops(counter: TrafficCounter, part: str, n: int = 6) -> str:
    """A part's operations that move the most, ``name:MB`` each."""
    mine = [(name, v) for (p, name), v in counter.ops.items() if p == part]
    return " ".join(f"{name}:{v / 1e6:.0f}" for name, v in sorted(mine, key=lambda kv: -kv[1])[:n])


def scaled(parts: collections.Counter[str], batch: int) -> dict[str, float]:
    """The parts' bytes at :data:`TARGET_BATCH`: the per-sample parts scaled, the rest kept."""
    factor = TARGET_BATCH / batch
    return {k: v * (1 if k in PER_STEP_PARTS else factor) for k, v in parts.items()}


def bench(batch: int, out: Path) -> list[dict[str, Any]]:
    """Counts the plain loop's and the trainer's step at the default config on the CPU.

    Args:
        batch: Samples a step counted.
        out: Results folder.

    Returns:
        The rows, one a part, and a total.
    """
    cpu = torch.device("cpu")
    plain_counter = count(plain_loop(GPU_CONFIG, batch, cpu))
    with tempfile.TemporaryDirectory() as tmp:
        step, close = graph_body_step(batch, Path(tmp))
        try:
            counter = count(step)
        finally:
            close()
    plain, ours = plain_counter.bytes, counter.bytes
    plain64, ours64 = scaled(plain, batch), scaled(ours, batch)
    names = sorted(set(plain) | set(ours), key=lambda k: -ours.get(k, 0))
    names = [k for k in names if plain.get(k, 0) or ours.get(k, 0)]
    rows = []
    for name in [*names, "total"]:
        if name == "total":
            p, t = sum(plain.values()), sum(ours.values())
            p64, t64 = sum(plain64.values()), sum(ours64.values())
        else:
            p, t = plain.get(name, 0), ours.get(name, 0)
            p64, t64 = plain64.get(name, 0.0), ours64.get(name, 0.0)
        rows.append(
            {
                "part": name,
                "batch": batch,
                "plain_ops": plain_counter.calls.get(name, 0)
                if name != "total"
                else sum(plain_counter.calls.values()),
                "trainer_ops": counter.calls.get(name, 0)
                if name != "total"
                else sum(counter.calls.values()),
                "plain_gb": round(p / 1e9, 3),
                "trainer_gb": round(t / 1e9, 3),
                f"plain_gb_at_{TARGET_BATCH}": round(p64 / 1e9, 2),
                f"trainer_gb_at_{TARGET_BATCH}": round(t64 / 1e9, 2),
                f"extra_ms_h200_at_{TARGET_BATCH}": round(1000 * (t64 - p64) / H200_BANDWIDTH, 2),
                "trainer_top_ops_mb": "" if name == "total" else top_ops(counter, name),
            }
        )
    total = rows[-1]
    extra = {
        "config": GPU_CONFIG.name,
        "bandwidth_bytes_per_s": H200_BANDWIDTH,
        "trainer_over_plain": round(total["trainer_gb"] / max(total["plain_gb"], 1e-9), 3),
        "ops_trainer_over_plain": round(total["trainer_ops"] / max(total["plain_ops"], 1), 3),
    }
    write_results("traffic", rows, extra, out, [])
    return rows


def run(quick: bool, out: Path) -> list[Goal]:
    """The part as ``benchmarks/run.py traffic`` runs it (batch 8; ``--quick``: 2)."""
    bench(2 if quick else 8, out)
    return []


def main() -> None:
    """Command line: the batch counted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = bench(args.batch, args.out)
    total = rows[-1]
    print(
        f"operations of the captured step {total['trainer_ops']} against the plain loop's "
        f"{total['plain_ops']}; trainer {total['trainer_gb']} GB a step against the plain loop's {total['plain_gb']} "
        f"(batch {args.batch}); at batch {TARGET_BATCH} the extra bytes take "
        f"{total[f'extra_ms_h200_at_{TARGET_BATCH}']} ms at the H200's bandwidth"
    )


if __name__ == "__main__":
    main()
