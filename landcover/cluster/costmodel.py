"""A scaling model, on paper: epoch time and efficiency of data-parallel training vs GPUs.

Synchronous data-parallel SGD spends each step computing (forward + backward + optimizer on
the worker's own batch) and averaging the gradients across the workers (an all-reduce).
An epoch is a fixed global number of samples, so ``N`` workers take
``ceil(samples_per_epoch / (N x batch))`` steps each.

**All-reduce (ring).** ``N`` workers, ``S`` bytes, a link of bandwidth ``B`` (bytes/s, one
direction, what the collective achieves) and per-message latency ``alpha``::

    t_ring(N, S) = 2 (N-1)/N * S / B + 2 (N-1) * alpha

(a reduce-scatter and an all-gather of ``N-1`` steps each, every step moving ``S/N`` bytes;
zero for ``N = 1``; the bandwidth term tends to ``2 S / B``). This is the classic
bandwidth-optimal bound (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005) that NCCL
and Gloo rings reach for large messages.

**Across nodes (hierarchical).** ``M`` nodes of ``g`` GPUs: a reduce-scatter inside each node
(NVLink or PCIe), an all-reduce of each GPU's ``S/g`` shard across the nodes, an all-gather
inside the node. The ``g`` shards cross the network in parallel, through the node's NICs::

    t(N, S) = 2 (g-1)/g * S / B_intra + 2 (g-1) * alpha_intra
            + 2 (M-1)/M * S / B_node  + 2 (M-1) * alpha_inter

with ``B_node`` the node's network bandwidth (all its NICs: 8 x 400 Gb/s on ND H100 v5, one
Ethernet interface on NC sizes). NCCL's own rings and trees differ from this in the latency
term only; for the ~100 MB of gradients here the bandwidth terms dominate.

**Overlap.** PyTorch DDP all-reduces gradients in buckets (``bucket_cap_mb`` = 25 MB) while
the backward pass is still running, so communication hides behind the backward compute
(about 2/3 of a step: backward costs about twice the forward). The bucket holding the first
layers' gradients is ready only when backward ends, so its all-reduce is always exposed::

    exposed = max(t(N, S) - overlap * t_backward, t(N, min(S, bucket)))

``overlap`` is 1 for DDP (and Horovod, whose background thread does the same), 0 for an
engine that reduces after the backward pass. Compute slowed down by concurrent NCCL kernels
is not modelled.

**Step and epoch.** ``step(N) = accumulate x batch x t_sample + exposed`` (one all-reduce
per ``accumulate`` micro-batches); ``epoch(N) = steps(N) x step(N) + epoch_overhead``;
efficiency ``E(N) = epoch(1) / (N x epoch(N))``. A power law ``epoch = a N^k`` fitted (least
squares in log-log) over ``N = 1, 2, 4, ..., 64`` gives the scaling exponent ``k`` (``-1`` is
perfect scaling).

**Compute per sample** comes from :mod:`landcover.cluster.gpus` (effective FLOP rates of GPU
models, the original run's calibration, the workload of a VM size).

Nothing here reads files or the network; ``benchmarks/model_bench.py`` draws the curves and
``landcover cluster plan`` prints the estimate for a planned run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from landcover.cluster.powerlaw import fit_power_law
from landcover.training.geometry import global_batch, steps_per_epoch

GBIT_BYTES = 1e9 / 8
"""Bytes per second in one Gb/s."""

DDP_BUCKET_BYTES = 25 * 1024 * 1024
"""PyTorch DDP's default ``bucket_cap_mb`` (25 MiB)."""

FIT_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""GPU counts the scaling exponent is fitted over (the published curve's first seven)."""


@dataclass(frozen=True)
class Link:
    """One interconnect: its bandwidth and latency.

    Attributes:
        name: What it is, e.g. ``InfiniBand NDR``.
        gbps: Nominal bandwidth of one endpoint (NIC or GPU), one direction, Gb/s.
        latency_us: Per-message latency ``alpha`` of one ring step (wire + software), us.
        efficiency: Fraction of ``gbps`` a large all-reduce achieves (NCCL bus bandwidth /
            line rate).
    """

    name: str
    gbps: float
    latency_us: float
    efficiency: float = 1.0

    @property
    def bytes_per_s(self) -> float:
        """Achieved bandwidth of one endpoint, bytes per second."""
        return self.gbps * GBIT_BYTES * self.efficiency

    @property
    def alpha_s(self) -> float:
        """Latency per ring step, seconds."""
        return self.latency_us * 1e-6


LINKS: dict[str, Link] = {
    # Ethernet through NCCL's socket transport (TCP): Azure accelerated networking.
    "ethernet-10": Link("Ethernet 10 Gb/s", 10, 50, 0.7),
    "ethernet-40": Link("Ethernet 40 Gb/s", 40, 30, 0.7),
    "ethernet-80": Link("Ethernet 80 Gb/s", 80, 30, 0.7),
    # InfiniBand (RDMA, GPUDirect): one HCA per node (FDR) or one per GPU (HDR, NDR).
    "ib-fdr": Link("InfiniBand FDR 56 Gb/s", 56, 5, 0.9),
    "ib-hdr": Link("InfiniBand HDR 200 Gb/s", 200, 5, 0.9),
    "ib-ndr": Link("InfiniBand NDR 400 Gb/s", 400, 5, 0.9),
    # Inside a node: PCIe (through the host) or NVLink/NVSwitch (A100: 300 GB/s, H100:
    # 450 GB/s per GPU and direction); NCCL reaches about 3/4 of it.
    "pcie3": Link("PCIe 3.0", 128, 10, 0.6),
    "pcie4": Link("PCIe 4.0", 256, 10, 0.7),
    "pcie5": Link("PCIe 5.0", 512, 10, 0.7),
    "nvlink3": Link("NVLink 3", 2400, 2, 0.75),
    "nvlink4": Link("NVLink 4", 3600, 2, 0.75),
}
"""The interconnects the model knows, by key."""


@dataclass(frozen=True)
class Fabric:
    """How the GPUs of a cluster are connected.

    Attributes:
        name: A description, e.g. ``InfiniBand NDR 400 Gb/s x 8 per node, NVLink 4 inside``.
        gpus_per_node: GPUs (workers) per node.
        intra: The link between GPUs of one node (per GPU).
        inter: The network link between nodes (per NIC).
        nics_per_node: Network links per node (their bandwidth adds up).
    """

    name: str
    gpus_per_node: int
    intra: Link
    inter: Link
    nics_per_node: int = 1

    @property
    def node_bytes_per_s(self) -> float:
        """The node's network bandwidth (all NICs), bytes per second."""
        return self.inter.bytes_per_s * self.nics_per_node


@dataclass(frozen=True)
class Workload:
    """One training run's per-step work.

    Attributes:
        samples_per_epoch: Global samples per epoch (fixed, whatever the worker count).
        batch: Samples per worker per micro-batch.
        sample_s: One GPU's compute time (forward, backward, optimizer) per sample, s.
        grad_bytes: Bytes all-reduced per step (parameters x 4 for fp32 gradients).
        accumulate: Micro-batches per all-reduce (gradient accumulation).
        backward_fraction: Share of the compute that is the backward pass.
        overlap: Share of the backward pass communication can hide behind (1: DDP).
        bucket_bytes: DDP bucket size; the last bucket's all-reduce is always exposed.
        step_overhead_s: Fixed extra time per step when ``N > 1`` (framework overheads).
        epoch_overhead_s: Fixed extra time per epoch (validation, checkpoints), s.
    """

    samples_per_epoch: int
    batch: int
    sample_s: float
    grad_bytes: float
    accumulate: int = 1
    backward_fraction: float = 2 / 3
    overlap: float = 1.0
    bucket_bytes: float = DDP_BUCKET_BYTES
    step_overhead_s: float = 0.0
    epoch_overhead_s: float = 0.0

    @property
    def compute_s(self) -> float:
        """Compute time of one step (all its micro-batches), s."""
        return self.sample_s * self.batch * self.accumulate

    def steps(self, workers: int) -> int:
        """Optimizer steps each worker takes per epoch with ``workers`` workers."""
        return steps_per_epoch(
            self.samples_per_epoch, global_batch(workers, self.batch, self.accumulate)
        )


@dataclass(frozen=True)
class Prediction:
    """The model's figures for one worker count.

    Attributes:
        workers: Worker processes (GPUs).
        nodes: Nodes they run on.
        steps: Steps per epoch per worker.
        compute_s: Compute time per step, s.
        allreduce_s: Time of one full gradient all-reduce, s.
        exposed_s: The part of it not hidden behind the backward pass, s.
        step_s: Time per step, s.
        epoch_s: Time per epoch, s.
        efficiency: ``epoch(1) / (workers x epoch(workers))``.
    """

    workers: int
    nodes: int
    steps: int
    compute_s: float
    allreduce_s: float
    exposed_s: float
    step_s: float
    epoch_s: float
    efficiency: float = 1.0


def _check_sizes(workers: int, nbytes: float) -> None:
    """Raises ValueError unless ``workers >= 1`` and ``nbytes >= 0``."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if nbytes < 0:
        raise ValueError(f"nbytes must not be negative, not {nbytes}")


def ring_allreduce_s(workers: int, nbytes: float, link: Link) -> float:
    """Time of a ring all-reduce: ``2 (N-1)/N * S / B + 2 (N-1) * alpha``.

    Args:
        workers: Ring members ``N`` (>= 1).
        nbytes: Bytes each member contributes ``S``.
        link: The link every ring step crosses.

    Returns:
        Seconds; 0 for a single worker.

    Raises:
        ValueError: If ``workers`` is below 1 or ``nbytes`` is negative.
    """
    _check_sizes(workers, nbytes)
    n = workers
    return 2 * (n - 1) / n * nbytes / link.bytes_per_s + 2 * (n - 1) * link.alpha_s


def hierarchical_allreduce_s(workers: int, nbytes: float, fabric: Fabric) -> float:
    """Time of an all-reduce over nodes: inside each node, across nodes, inside again.

    ``N`` workers fill nodes of ``g = fabric.gpus_per_node`` GPUs (``M = ceil(N / g)``
    nodes); see the module docstring for the formula. One node is a plain ring over the
    intra-node link; one GPU per node a plain ring over the network.

    Args:
        workers: Workers ``N`` (>= 1).
        nbytes: Gradient bytes ``S``.
        fabric: GPUs per node and the links.

    Returns:
        Seconds; 0 for a single worker.

    Raises:
        ValueError: If ``workers`` is below 1 or ``nbytes`` is negative.
    """
    _check_sizes(workers, nbytes)
    per_node = min(workers, fabric.gpus_per_node)
    nodes = math.ceil(workers / fabric.gpus_per_node)
    inside = ring_allreduce_s(per_node, nbytes, fabric.intra)
    across = 2 * (nodes - 1) / nodes * nbytes / fabric.node_bytes_per_s
    return inside + across + 2 * (nodes - 1) * fabric.inter.alpha_s


def predict(workload: Workload, fabric: Fabric, workers: int) -> Prediction:
    """Predicts step and epoch time for one worker count.

    Args:
        workload: The run's per-step work.
        fabric: How the GPUs are connected.
        workers: Workers (>= 1).

    Returns:
        The prediction, its efficiency against one worker on the same fabric.

    Raises:
        ValueError: If ``workers`` is below 1.
    """
    one = _predict(workload, fabric, 1)
    this = _predict(workload, fabric, workers)
    return replace(this, efficiency=one.epoch_s / (workers * this.epoch_s))


def _predict(workload: Workload, fabric: Fabric, workers: int) -> Prediction:
    total = hierarchical_allreduce_s(workers, workload.grad_bytes, fabric)
    last_bucket = hierarchical_allreduce_s(
        workers, min(workload.grad_bytes, workload.bucket_bytes), fabric
    )
    hidden = workload.overlap * workload.backward_fraction * workload.compute_s
    exposed = max(total - hidden, last_bucket)
    overhead = workload.step_overhead_s if workers > 1 else 0.0
    step = workload.compute_s + exposed + overhead
    steps = workload.steps(workers)
    return Prediction(
        workers=workers,
        nodes=math.ceil(workers / fabric.gpus_per_node),
        steps=steps,
        compute_s=workload.compute_s,
        allreduce_s=total,
        exposed_s=exposed,
        step_s=step,
        epoch_s=steps * step + workload.epoch_overhead_s,
    )


def predict_curve(workload: Workload, fabric: Fabric, counts: Iterable[int]) -> list[Prediction]:
    """Predictions for several worker counts.

    Args:
        workload: The run's per-step work.
        fabric: How the GPUs are connected.
        counts: Worker counts.

    Returns:
        One prediction per count, in the given order.
    """
    return [predict(workload, fabric, n) for n in counts]


def scaling_exponent(
    workload: Workload, fabric: Fabric, counts: Sequence[int] = FIT_COUNTS
) -> float:
    """The power-law exponent of predicted epoch time over ``counts`` (``-1``: perfect).

    Args:
        workload: The run's per-step work.
        fabric: How the GPUs are connected.
        counts: GPU counts to fit over (default 1, 2, 4, ..., 64).

    Returns:
        The fitted exponent.
    """
    curve = predict_curve(workload, fabric, counts)
    return fit_power_law(list(counts), [p.epoch_s for p in curve])[0]
