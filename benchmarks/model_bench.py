"""Model benchmark: the scaling cost model's epoch time and efficiency versus GPU count.

Predicts, with :mod:`landcover.cluster.costmodel` (ring / hierarchical all-reduce, DDP
overlap), epoch time and scaling efficiency for 1 to 256 GPUs in the original large run's
setting (Azure/pixel_level_land_classification, 2017: 740 tile pairs, 148 GPUs, 250 epochs;
minibatch 10 per GPU and 16,000 samples per epoch, as in its ``train_distributed.py``), and
sets them beside the published curve of that run (read off its figure) and its power-law fit.

Scenarios (the default ResNet-34 U-Net unless said otherwise):

- the VM sizes with InfiniBand: ND H100 v5 (8 x NDR 400 Gb/s per node, NVLink 4) and
  ND A100 v4 (8 x HDR 200 Gb/s, NVLink 3), and one without: NC96ads A100 v4 (Ethernet
  80 Gb/s per node, PCIe 4.0 inside);
- a hindcast: the ring model on the original hardware (NC24: K80 over 10 Gb/s Ethernet) with
  the original model (314 k parameters) and no overlap, compute calibrated to the published
  1-GPU 1,250 s/epoch: what gradient traffic alone costs that run;
- this machine: the measured single-worker step time (``{out}/scaling.json`` from
  ``benchmarks/scaling_bench.py`` when it exists, else one training step of the default model
  measured here) with workers on 10 Gb/s Ethernet, one per node.

A GPU measurement in ``scaling.json`` (its ``gpu`` section, bf16 + channels_last) replaces
the reference compute time of the matching GPU model. The model's size is counted here:
parameters of ``build_model`` for ``configs/default.yaml`` (fp32 gradients, 4 bytes each) and
FLOPs of one training sample (``torch.utils.flop_counter`` on the meta device).

Writes ``{out}/model.json`` / ``.csv`` (one row per scenario and GPU count, plus the published
points) and ``{out}/scaling_model.png`` (log-log epoch time, and efficiency, versus GPUs).
Goal (issue, goal 6): the predicted exponent over 1..64 GPUs is steeper than the published
-0.80 (closer to -1) for the InfiniBand VM sizes. Quick and full runs are the same (seconds).

Usage: python benchmarks/model_bench.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, load_bench_config, write_results

from landcover.cluster import costmodel as cm
from landcover.cluster import gpus
from landcover.cluster.vmsizes import VM_SIZES, VmSize

PART = "model"
CONFIG = REPO / "configs" / "default.yaml"
COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 148, 256)
PLOT = "scaling_model.png"


@dataclass(frozen=True)
class Scenario:
    """One predicted curve.

    Attributes:
        key: Short name (rows, JSON).
        label: Legend text.
        vm: The VM size, or None for this machine.
        fabric: How its GPUs are connected.
        workload: The per-step work.
        compute_source: Where the compute time per sample comes from.
        style: matplotlib line style.
        colour: matplotlib colour.
        plotted: Whether the plot shows it.
    """

    key: str
    label: str
    vm: VmSize | None
    fabric: cm.Fabric
    workload: cm.Workload
    compute_source: str
    style: str = "-"
    colour: str = "C0"
    plotted: bool = True


# --- what is measured or counted --------------------------------------------------------


def default_model() -> nn.Module:
    """The default config's model (``configs/default.yaml``), with random weights, on the CPU."""
    from landcover.config import load_config
    from landcover.models import build_model

    config = load_config(CONFIG)
    torch.manual_seed(0)
    return build_model(config.model, len(config.data.bands), config.data.classes.num_classes)


def model_cost(model: nn.Module, name: str, bands: int = 4, patch: int = 256) -> gpus.ModelCost:
    """Counts a model's trainable parameters and training FLOPs per sample.

    FLOPs of forward + backward, counted with ``torch.utils.flop_counter`` on a meta-device
    copy (shapes only: no arithmetic).

    Args:
        model: The model (left as it is).
        name: Its name in the cost model.
        bands: Input bands.
        patch: Patch side, pixels.

    Returns:
        The model's cost.
    """
    from torch.utils.flop_counter import FlopCounterMode

    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    meta = copy.deepcopy(model).to("meta")
    x = torch.empty(2, bands, patch, patch, device="meta")
    with FlopCounterMode(display=False) as counter:
        meta(x).float().mean().backward()
    return gpus.ModelCost(name, params, counter.get_total_flops() / 2 / 1e9, patch)


class _ConvBn(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int = 3, stride: int = 1, relu: bool = True):
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False),
            nn.BatchNorm2d(cout),
        ]
        super().__init__(*layers, *([nn.ReLU()] if relu else []))


def _basic(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(_ConvBn(cin, cout, 3, stride), _ConvBn(cout, cout, relu=False), nn.ReLU())


class OriginalModel(nn.Module):
    """A PyTorch replica of the layer shapes of the 2017 run's model, to count its cost.

    From the description of ``model_mini_pub.model(5, 256, 2, [64, 32, 32, 32])`` in
    Azure/pixel_level_land_classification: a 3x3 stem, four stages of two basic blocks
    (64 filters at full resolution, then 32 at 1/2, 1/4, 1/8; the residual additions are
    commented out there), transposed-convolution upsampling with 1x1 lateral sums and a
    3x3 five-class head. Only its parameter count and FLOPs are used.
    """

    def __init__(self, c: tuple[int, int, int, int] = (64, 32, 32, 32), classes: int = 5):
        super().__init__()
        self.stem = _ConvBn(4, c[0], relu=False)
        self.r1 = nn.Sequential(_basic(c[0], c[0]), _basic(c[0], c[0]))
        self.r2 = nn.Sequential(_basic(c[0], c[1], 2), _basic(c[1], c[1]))
        self.r3 = nn.Sequential(_basic(c[1], c[2], 2), _basic(c[2], c[2]))
        self.r4 = nn.Sequential(_basic(c[2], c[3], 2), _basic(c[3], c[3]))

        def up(ch: int) -> nn.ConvTranspose2d:
            return nn.ConvTranspose2d(ch, ch, 3, 2, 1, output_padding=1, bias=False)

        self.up4, self.up3, self.up2 = up(c[3]), up(c[2]), up(c[1])
        self.l3, self.t3 = nn.Conv2d(c[2], c[2], 1), nn.Conv2d(c[3], c[2], 1)
        self.l2, self.t2 = nn.Conv2d(c[1], c[1], 1), nn.Conv2d(c[2], c[1], 1)
        self.i1, self.l1 = nn.Conv2d(4, c[0], 3, padding=1), nn.Conv2d(c[0], c[0], 1)
        self.t1 = nn.Conv2d(c[1], c[0], 1)
        self.head = nn.Conv2d(c[0], classes, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores for a ``(B, 4, H, W)`` batch."""
        r1 = self.r1(self.stem(x))
        r2 = self.r2(r1)
        r3 = self.r3(r2)
        r4 = self.r4(r3)
        o3 = torch.relu(self.l3(r3) + self.t3(self.up4(r4)))
        o2 = torch.relu(self.l2(r2) + self.t2(self.up3(o3)))
        o1 = torch.relu(self.i1(x) + self.l1(r1) + self.t1(self.up2(o2)))
        return torch.relu(self.head(o1))


def original_model_cost() -> gpus.ModelCost:
    """Counts the replica of the original model (parameters, training FLOPs at 256 px)."""
    return model_cost(OriginalModel(), gpus.ORIGINAL_MODEL.name)


def measure_step_here(model: nn.Module, batch: int = 2) -> dict[str, Any]:
    """Times one training step (forward, loss, backward, AdamW) of the default model here.

    Args:
        model: The default model (trained in place for two steps).
        batch: Samples per step.

    Returns:
        ``step_s``, ``batch``, ``params`` and the source, for this machine's CPU (or GPU).
    """
    from landcover.training.losses import SegmentationLoss

    config = load_bench_config(CONFIG)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    classes, bands, patch = (
        config.data.classes.num_classes,
        len(config.data.bands),
        config.data.patch_size,
    )
    model = model.to(device).train()
    criterion = SegmentationLoss(config.optim.loss, classes).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, bands, patch, patch, device=device)
    y = torch.randint(0, classes, (batch, patch, patch), device=device)

    def step() -> float:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        criterion(model(x), y).backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    step()  # warm-up: allocator, optimizer state
    seconds = step()
    return {
        "source": f"one step of {CONFIG.relative_to(REPO)} measured here ({device.type})",
        "device": device.type,
        "step_s": seconds,
        "batch": batch,
        "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }


def read_scaling(out: Path) -> dict[str, Any] | None:
    """The scaling benchmark's results (``{out}/scaling.json``), when they exist and parse."""
    path = out / "scaling.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def measured_step(scaling: dict[str, Any] | None, model: nn.Module) -> dict[str, Any]:
    """This machine's single-worker step: from ``scaling.json``, else measured now.

    Args:
        scaling: The scaling benchmark's JSON, or None.
        model: The default model, to measure when ``scaling.json`` has no step time.

    Returns:
        ``step_s``, ``batch``, ``params`` (of the measured model) and ``source``.
    """
    if scaling and scaling.get("single_worker_step_s") and scaling.get("trainable_params"):
        config = scaling.get("settings", {}).get("config", "configs/cpu.yaml")
        return {
            "source": f"scaling.json: single worker, {config}, 1 thread",
            "device": "cpu",
            "step_s": float(scaling["single_worker_step_s"]),
            "batch": int(scaling.get("batch_per_worker", 1)),
            "params": int(scaling["trainable_params"]),
        }
    return measure_step_here(model)


def gpu_key(device_name: str) -> str | None:
    """The :data:`gpus.GPU_SPEEDS` key for a CUDA device name, if there is one."""
    name = device_name.upper()
    for needle, key in (
        ("H200", "NVIDIA H200 SXM"),
        ("H100 NVL", "NVIDIA H100 NVL"),
        ("H100", "NVIDIA H100 SXM"),
        ("A100-PCIE", "NVIDIA A100 PCIe"),
        ("A100 PCIE", "NVIDIA A100 PCIe"),
        ("A100", "NVIDIA A100 SXM"),
        ("V100", "NVIDIA Tesla V100"),
        ("T4", "NVIDIA T4"),
    ):
        if needle in name:
            return key
    return None


def measured_gpu_sample_s(scaling: dict[str, Any] | None) -> tuple[str, float, str] | None:
    """A GPU measurement of the default model in ``scaling.json``, as seconds per sample.

    Args:
        scaling: The scaling benchmark's JSON, or None.

    Returns:
        ``(GPU_SPEEDS key, seconds per sample, source)``, or None without a usable one.
    """
    gpu = (scaling or {}).get("gpu")
    if not gpu:
        return None
    key = gpu_key(str(gpu.get("name", "")))
    fast = gpu.get("precisions", {}).get("bf16+channels_last", {})
    sps = fast.get("train_samples_per_s") or fast.get("model_samples_per_s")
    if key is None or not sps:
        return None
    return key, 1.0 / float(sps), f"scaling.json: {gpu['name']}, bf16, batch {gpu.get('batch')}"


# --- scenarios, rows, plot ------------------------------------------------------------------


def scenarios(
    model: gpus.ModelCost,
    original: gpus.ModelCost,
    cpu_step: dict[str, Any],
    gpu_measured: tuple[str, float, str] | None,
) -> list[Scenario]:
    """The curves: InfiniBand and Ethernet VM sizes, the hindcast, this machine."""
    run = gpus.ORIGINAL_RUN
    found: list[Scenario] = []
    for key, name, style, colour in (
        ("nd-h100-v5", "standard_nd96isr_h100_v5", "-", "C0"),
        ("nd-a100-v4", "standard_nd96asr_v4", "-", "C2"),
        ("nc-a100-v4", "standard_nc96ads_a100_v4", "-", "C3"),
    ):
        vm = VM_SIZES[name]
        fabric = gpus.fabric_for(vm)
        sample_s = model.train_gflop / (gpus.gpu_speed(vm.gpu_model).tflops * 1000)
        source = f"reference: {vm.gpu_model} ({gpus.gpu_speed(vm.gpu_model).source})"
        if gpu_measured is not None and gpu_measured[0] == vm.gpu_model:
            sample_s, source = gpu_measured[1], gpu_measured[2]
        workload = cm.Workload(run.samples_per_epoch, run.batch, sample_s, model.grad_bytes)
        found.append(
            Scenario(
                key,
                f"{vm.family} ({vm.gpus} x {vm.gpu_model.removeprefix('NVIDIA ')}, "
                f"{fabric.inter.name}{' x 8' if fabric.nics_per_node == 8 else ''})",
                vm,
                fabric,
                workload,
                source,
                style,
                colour,
            )
        )
    nc24 = VM_SIZES["standard_nc24"]
    calibrated = gpus.PUBLISHED_EPOCH_S[1] / run.samples_per_epoch  # s per sample on a K80
    found.append(
        Scenario(
            "hindcast-nc24",
            "ring model, original run's hardware and model (NC24: K80, 10 Gb/s Ethernet)",
            nc24,
            gpus.fabric_for(nc24),
            cm.Workload(
                run.samples_per_epoch,
                run.batch,
                calibrated,
                original.grad_bytes,
                overlap=0.0,
            ),
            "calibrated: published 1-GPU 1,250 s/epoch",
            ":",
            "0.45",
        )
    )
    here = cm.Fabric(
        "Ethernet 10 Gb/s, 1 worker per node",
        1,
        cm.LINKS["ethernet-10"],
        cm.LINKS["ethernet-10"],
    )
    found.append(
        Scenario(
            "this-machine",
            f"this machine's measured step ({cpu_step['device']}) over 10 Gb/s Ethernet",
            None,
            here,
            cm.Workload(
                run.samples_per_epoch,
                run.batch,
                cpu_step["step_s"] / cpu_step["batch"],
                4 * cpu_step["params"],
            ),
            cpu_step["source"],
            plotted=False,
        )
    )
    return found


def rows_for(s: Scenario) -> list[dict[str, Any]]:
    """One row per GPU count of a scenario."""
    rows = []
    for p in cm.predict_curve(s.workload, s.fabric, COUNTS):
        rows.append(
            {
                "scenario": s.key,
                "gpus": p.workers,
                "nodes": p.nodes,
                "steps": p.steps,
                "compute_ms": round(p.compute_s * 1e3, 2),
                "allreduce_ms": round(p.allreduce_s * 1e3, 2),
                "exposed_ms": round(p.exposed_s * 1e3, 2),
                "step_ms": round(p.step_s * 1e3, 2),
                "epoch_s": round(p.epoch_s, 3),
                "efficiency": round(p.efficiency, 3),
                "interconnect": s.fabric.name,
            }
        )
    return rows


def published_rows() -> list[dict[str, Any]]:
    """The published points, with the step time and per-step overhead they imply."""
    run = gpus.ORIGINAL_RUN
    t1 = gpus.PUBLISHED_EPOCH_S[1]
    step1 = t1 / (run.samples_per_epoch / run.batch)
    rows = []
    for n, t in gpus.PUBLISHED_EPOCH_S.items():
        steps = -(-run.samples_per_epoch // (n * run.batch))
        rows.append(
            {
                "scenario": "published-2017",
                "gpus": n,
                "nodes": -(-n // 4),
                "steps": steps,
                "compute_ms": round(step1 * 1e3, 2),
                "allreduce_ms": "",
                "exposed_ms": round((t / steps - step1) * 1e3, 2),
                "step_ms": round(t / steps * 1e3, 2),
                "epoch_s": t,
                "efficiency": round(t1 / (n * t), 3),
                "interconnect": "NC24 (K80), CNTK; read off the figure; exposed_ms: the "
                "step time beyond the 1-GPU step",
            }
        )
    return rows


def plot(found: list[Scenario], exponents: dict[str, float], published_fit: tuple, path: Path):
    """Draws epoch time (log-log) and efficiency versus GPUs, published and predicted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k, a = published_fit
    counts = list(gpus.PUBLISHED_EPOCH_S)
    times = list(gpus.PUBLISHED_EPOCH_S.values())
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 6.2))
    left.loglog(counts, times, "ko", label="published 2017 run (148 x K80, CNTK)")
    grid = [1, 256]
    left.loglog(grid, [a * n**k for n in grid], "k--", lw=1, label=f"published fit: N^{k:.2f}")
    t1 = gpus.PUBLISHED_EPOCH_S[1]
    right.semilogx(counts, [t1 / (n * t) for n, t in zip(counts, times, strict=True)], "ko")
    for s in found:
        if not s.plotted:
            continue
        curve = cm.predict_curve(s.workload, s.fabric, COUNTS)
        label = f"{s.label}: N^{exponents[s.key]:.2f}"
        left.loglog(COUNTS, [p.epoch_s for p in curve], s.style, color=s.colour, label=label)
        right.semilogx(COUNTS, [p.efficiency for p in curve], s.style, color=s.colour)
    left.set(
        xlabel="GPUs",
        ylabel="epoch time, s (16,000 samples, batch 10 per GPU)",
        title="Epoch time: published vs ring all-reduce model",
    )
    right.set(
        xlabel="GPUs",
        ylabel="scaling efficiency vs 1 GPU",
        title="Efficiency (exponents fitted over 1..64 GPUs)",
        ylim=(0, 1.05),
    )
    for axis in (left, right):
        ticks = [1, 2, 4, 8, 16, 32, 64, 128, 256]
        axis.set_xticks(ticks, [str(n) for n in ticks])
        axis.minorticks_off()
        axis.grid(True, which="major", alpha=0.3)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(
        "Ring all-reduce model, ResNet-34 U-Net (97.8 MB of fp32 gradients, DDP overlap) in "
        "the 2017 run's setting; hindcast: its own 1.3 MB model, no overlap. Model "
        "estimates of the training steps.",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool, out: Path) -> list[Goal]:
    """Runs the model part: predictions, rows, goal 6 and the plot.

    Args:
        quick: Ignored: the part takes seconds either way.
        out: Results folder (``scaling.json`` is read from it when there).

    Returns:
        The part's goals.
    """
    del quick
    out.mkdir(parents=True, exist_ok=True)
    network = default_model()
    model = model_cost(network, gpus.DEFAULT_MODEL.name)
    original = original_model_cost()
    scaling = read_scaling(out)
    cpu_step = measured_step(scaling, network)
    gpu_measured = measured_gpu_sample_s(scaling)
    found = scenarios(model, original, cpu_step, gpu_measured)
    exponents = {s.key: cm.scaling_exponent(s.workload, s.fabric) for s in found}
    fit_counts = list(cm.FIT_COUNTS)
    published_fit = cm.fit_power_law(fit_counts, [gpus.PUBLISHED_EPOCH_S[n] for n in fit_counts])
    published_all = cm.fit_power_law(
        list(gpus.PUBLISHED_EPOCH_S), list(gpus.PUBLISHED_EPOCH_S.values())
    )
    rows = published_rows()
    for s in found:
        rows += rows_for(s)
    path = out / PLOT
    plot(found, exponents, published_fit, path)

    infiniband = [s for s in found if s.vm is not None and s.vm.infiniband]
    worst = max(exponents[s.key] for s in infiniband)
    sensitivity = {
        s.key: {
            "no_overlap": cm.scaling_exponent(replace(s.workload, overlap=0.0), s.fabric),
            "compute_4x_faster": cm.scaling_exponent(
                replace(s.workload, sample_s=s.workload.sample_s / 4), s.fabric
            ),
            "both": cm.scaling_exponent(
                replace(s.workload, overlap=0.0, sample_s=s.workload.sample_s / 4), s.fabric
            ),
        }
        for s in found
        if s.vm is not None and s.key != "hindcast-nc24"
    }
    worst_case = max(sensitivity[s.key]["both"] for s in infiniband)
    k_pub = published_fit[0]
    goals = [
        Goal(
            PART,
            "predicted epoch-time exponent over 1..64 GPUs, InfiniBand VM sizes "
            "(least steep of ND H100 v5, ND A100 v4), vs the published curve's",
            round(worst, 3),
            f"< {k_pub:.2f} (published; -1 is linear)",
            worst < k_pub,
            "; ".join(f"{s.key} {exponents[s.key]:.3f}" for s in found)
            + f"; published {k_pub:.3f} (1..64), {published_all[0]:.3f} (1..148); "
            f"InfiniBand without overlap and with 4x faster compute: {worst_case:.3f}; "
            "model estimates (training steps only)",
        )
    ]
    by_key = {s.key: s for s in found}
    at_148 = {key: cm.predict(s.workload, s.fabric, 148) for key, s in by_key.items() if s.plotted}
    extra = {
        "setting": {
            "tiles": gpus.ORIGINAL_RUN.tiles,
            "gpus": gpus.ORIGINAL_RUN.gpus,
            "epochs": gpus.ORIGINAL_RUN.epochs,
            "batch_per_gpu": gpus.ORIGINAL_RUN.batch,
            "samples_per_epoch": gpus.ORIGINAL_RUN.samples_per_epoch,
            "source": "Azure/pixel_level_land_classification scripts/train_distributed.py "
            "(minibatch_size 10, epoch_size 16,000) and scaling.md (figure)",
        },
        "calibration": {
            "published_1gpu_epoch_s": gpus.PUBLISHED_EPOCH_S[1],
            "k80_s_per_sample": gpus.PUBLISHED_EPOCH_S[1] / gpus.ORIGINAL_RUN.samples_per_epoch,
            "k80_effective_tflops": gpus.K80_TFLOPS,
            "gpu_tflops": {name: g.tflops for name, g in gpus.GPU_SPEEDS.items()},
            "gpu_sources": {name: g.source for name, g in gpus.GPU_SPEEDS.items()},
        },
        "model": {
            "name": model.name,
            "params": model.params,
            "grad_bytes": model.grad_bytes,
            "train_gflop_per_sample": model.train_gflop,
            "costmodel_constants": {
                "params": gpus.DEFAULT_MODEL.params,
                "train_gflop": gpus.DEFAULT_MODEL.train_gflop,
            },
        },
        "original_model": {
            "params": original.params,
            "grad_bytes": original.grad_bytes,
            "train_gflop_per_sample": original.train_gflop,
        },
        "measured_step": cpu_step,
        "gpu_measured": gpu_measured,
        "exponents_1_64": exponents,
        "sensitivity_1_64": sensitivity,
        "published_exponent_1_64": k_pub,
        "published_exponent_all": published_all[0],
        "at_148_gpus": {
            k: {"epoch_s": p.epoch_s, "efficiency": p.efficiency, "steps": p.steps}
            for k, p in at_148.items()
        },
        "scenarios": {
            s.key: {
                "label": s.label,
                "interconnect": s.fabric.name,
                "compute_source": s.compute_source,
                "sample_ms": s.workload.sample_s * 1e3,
                "grad_bytes": s.workload.grad_bytes,
                "overlap": s.workload.overlap,
            }
            for s in found
        },
        "plot": str(path),
    }
    write_results(PART, rows, extra, out, goals)
    print(f"\nplot: {path}")
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="same as the full run")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    start = time.perf_counter()
    run(args.quick, args.out)
    print(f"\nmodel benchmark took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
