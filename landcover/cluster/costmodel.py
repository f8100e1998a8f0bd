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

**Compute per sample.** A GPU's training speed is an effective FLOP rate: the K80's is
calibrated on the original large run (Azure/pixel_level_land_classification, 2017: CNTK,
K80 GPUs of NC-series VMs, minibatch 10 per GPU, epochs of 16,000 samples, 1 GPU took about
1,250 s per epoch; its 314 k-parameter model costs 69.8 GFLOP per 256 x 256 training sample,
counted with ``torch.utils.flop_counter`` on a PyTorch replica), i.e. 0.89 TFLOP/s. Newer
GPUs scale it by published ResNet-50 training throughput (images/s, one GPU) relative to the
K80: TensorFlow's 2017 performance-benchmark page (tf_cnn_benchmarks, synthetic data, one GPU:
K80 52, P100 219), NVIDIA DeepLearningExamples' PyTorch ResNet-50 v1.5 tables (pytorch-21.03
container, one GPU, mixed precision: V100 16 GB 1,200, A100 80 GB 2,470); the H100 SXM is
taken as 2x an A100 SXM (between its 1.7x memory bandwidth and 3.2x dense bf16 peak), and
T4, A100 PCIe, H100 NVL and H200 are scaled from those by their specifications. The default ResNet-34 U-Net costs 47.1 GFLOP per 256 x
256 training sample (``flop_counter``), so ``t_sample = 47.1 GFLOP / rate``. These are
model estimates: measured step times (``benchmarks/run.py scaling`` on a GPU) replace them.

Nothing here reads files or the network; ``benchmarks/model_bench.py`` draws the curves and
``landcover cluster plan`` prints the estimate for a planned run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from landcover.cluster.vmsizes import VmSize
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


def fit_power_law(counts: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """Fits ``time = a * count ** k`` by least squares on the logarithms.

    Args:
        counts: GPU counts (> 0).
        times: Epoch times (> 0), one per count.

    Returns:
        ``(k, a)``: the exponent and the coefficient.

    Raises:
        ValueError: With fewer than two distinct counts, unequal lengths or values <= 0.
    """
    if len(counts) != len(times):
        raise ValueError(f"{len(counts)} counts but {len(times)} times")
    if len(set(counts)) < 2:
        raise ValueError("a power law needs at least two distinct counts")
    if min(counts) <= 0 or min(times) <= 0:
        raise ValueError("counts and times must be positive")
    xs = [math.log(c) for c in counts]
    ys = [math.log(t) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return k, math.exp(my - k * mx)


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


# --- the original large run and its published curve -------------------------------------


@dataclass(frozen=True)
class OriginalRun:
    """The original large run (Azure/pixel_level_land_classification, 2017).

    Attributes:
        tiles: Training tile pairs.
        gpus: GPUs of the large run.
        epochs: Epochs trained.
        batch: Minibatch per GPU (``minibatch_size`` in its ``train_distributed.py``).
        samples_per_epoch: Global samples per epoch (its ``epoch_size``).
        params: Parameters of its model (``model_mini_pub``: 64/32/32/32 filters).
        train_gflop: Its training cost per 256 x 256 sample, GFLOP (forward + backward).
        vm_size: The VM size (K80 GPUs, 4 per node, no InfiniBand).
    """

    tiles: int = 740
    gpus: int = 148
    epochs: int = 250
    batch: int = 10
    samples_per_epoch: int = 16_000
    params: int = 314_373
    train_gflop: float = 69.84
    vm_size: str = "Standard_NC24"


ORIGINAL_RUN = OriginalRun()

PUBLISHED_EPOCH_S: dict[int, float] = {
    1: 1250,
    2: 830,
    4: 550,
    8: 280,
    16: 150,
    32: 87,
    64: 47,
    128: 32,
    148: 34,
}
"""Epoch time (s) vs GPUs of the original run, read off its figure
(``outputs/epoch_duration_scaling.png``: epoch duration after the data load)."""

K80_TFLOPS = ORIGINAL_RUN.train_gflop * ORIGINAL_RUN.samples_per_epoch / PUBLISHED_EPOCH_S[1] / 1000
"""The K80's (one GK210's) effective training rate, TFLOP/s, calibrated on the original run:
69.8 GFLOP x 16,000 samples in 1,250 s = 0.89 TFLOP/s (a GK210 peaks at 2.8 to 4.4 in fp32)."""


@dataclass(frozen=True)
class ModelCost:
    """A model's size and compute for the cost model.

    Attributes:
        name: The model, in words.
        params: Trainable parameters (fp32 gradients: 4 bytes each).
        train_gflop: Forward + backward FLOPs per training sample, GFLOP.
        patch_size: The sample's side, pixels.
    """

    name: str
    params: int
    train_gflop: float
    patch_size: int = 256

    @property
    def grad_bytes(self) -> int:
        """Gradient bytes all-reduced per step (fp32)."""
        return 4 * self.params


DEFAULT_MODEL = ModelCost("ResNet-34 U-Net", 24_440_230, 47.06)
"""``configs/default.yaml``'s model (4 bands in, 7 classes out), as counted by
``benchmarks/model_bench.py`` (parameters; ``torch.utils.flop_counter`` at 256 x 256)."""

ORIGINAL_MODEL = ModelCost("2017 CNTK U-Net", ORIGINAL_RUN.params, ORIGINAL_RUN.train_gflop)
"""The original run's model (a replica's count; see :class:`OriginalRun`)."""


# --- GPUs and VM sizes --------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSpeed:
    """A GPU model's training speed relative to a K80 (one GK210).

    Attributes:
        resnet50_img_s: ResNet-50 training images/s on one GPU (published or derived).
        intra: Key in :data:`LINKS` of the GPU-to-GPU link inside a node.
        source: Where the figure comes from.
    """

    resnet50_img_s: float
    intra: str
    source: str

    @property
    def tflops(self) -> float:
        """Effective training rate, TFLOP/s (the calibrated K80 rate, scaled)."""
        return K80_TFLOPS * self.resnet50_img_s / GPU_SPEEDS[_K80].resnet50_img_s


_K80 = "NVIDIA Tesla K80 (one GK210)"
_A100 = 2470.0
_H100 = 2.0 * _A100

GPU_SPEEDS: dict[str, GpuSpeed] = {
    _K80: GpuSpeed(52, "pcie3", "TensorFlow benchmarks 2017, fp32, 1 GPU"),
    "NVIDIA Tesla P100": GpuSpeed(219, "pcie3", "TensorFlow benchmarks 2017, fp32, 1 GPU"),
    "NVIDIA Tesla V100": GpuSpeed(1200, "pcie3", "NVIDIA DeepLearningExamples, AMP"),
    "NVIDIA T4": GpuSpeed(0.3 * 1200, "pcie3", "estimate: about 0.3 of a V100 (specs)"),
    "NVIDIA A100 PCIe": GpuSpeed(0.9 * _A100, "pcie4", "estimate: 0.9 of an A100 SXM"),
    "NVIDIA A100 SXM": GpuSpeed(_A100, "nvlink3", "NVIDIA DeepLearningExamples, AMP"),
    "NVIDIA H100 SXM": GpuSpeed(_H100, "nvlink4", "estimate: 2x an A100 SXM (specs)"),
    "NVIDIA H200 SXM": GpuSpeed(_H100, "nvlink4", "estimate: same compute as H100 SXM"),
    "NVIDIA H100 NVL": GpuSpeed(0.9 * _H100, "pcie5", "estimate: 0.9 of an H100 SXM"),
}
"""Training speed of the GPU models of :mod:`~landcover.cluster.vmsizes`, by model name."""

ETHERNET_GBPS: dict[str, float] = {
    "standard_nc4as_t4_v3": 8,
    "standard_nc8as_t4_v3": 8,
    "standard_nc16as_t4_v3": 8,
    "standard_nc64as_t4_v3": 32,
    "standard_nc24ads_a100_v4": 20,
    "standard_nc48ads_a100_v4": 40,
    "standard_nc96ads_a100_v4": 80,
    "standard_nc40ads_h100_v5": 40,
    "standard_nc80adis_h100_v5": 80,
}
"""Expected network bandwidth (Gb/s) of VM sizes without InfiniBand, from Azure's size
pages; sizes not listed (the retired NC, NCv2, NCv3) are taken as 10 Gb/s."""

DEFAULT_ETHERNET_GBPS = 10.0


def gpu_speed(gpu_model: str) -> GpuSpeed:
    """The training speed of a GPU model.

    Args:
        gpu_model: A :attr:`VmSize.gpu_model`, e.g. ``NVIDIA H100 SXM``.

    Returns:
        Its speed figures.

    Raises:
        KeyError: If the model has no figure.
    """
    try:
        return GPU_SPEEDS[gpu_model]
    except KeyError:
        raise KeyError(f"no training-speed figure for GPU {gpu_model!r}") from None


def sample_seconds(gpu_model: str, model: ModelCost = DEFAULT_MODEL) -> float:
    """One GPU's compute time per training sample: the model's FLOPs over the GPU's rate.

    Args:
        gpu_model: A :attr:`VmSize.gpu_model`.
        model: The model's cost (default: the ResNet-34 U-Net at 256 x 256).

    Returns:
        Seconds per sample.

    Raises:
        KeyError: If the GPU model has no figure.
    """
    return model.train_gflop / (gpu_speed(gpu_model).tflops * 1000)


def fabric_for(vm: VmSize) -> Fabric:
    """The interconnect of a VM size: NVLink or PCIe inside, InfiniBand or Ethernet across.

    Args:
        vm: The VM size.

    Returns:
        Its fabric. InfiniBand sizes with a per-node figure (ND A100 v4: 8 x HDR 200 Gb/s,
        ND H100/H200 v5: 8 x NDR 400 Gb/s) get one NIC per GPU; the older ``r`` sizes one
        FDR HCA; sizes without InfiniBand their Ethernet bandwidth.

    Raises:
        KeyError: If the VM's GPU model has no figure.
    """
    intra = LINKS[gpu_speed(vm.gpu_model).intra]
    if vm.infiniband and vm.interconnect_gbps:
        inter = LINKS["ib-ndr"] if vm.interconnect_gbps / vm.gpus >= 400 else LINKS["ib-hdr"]
        nics = round(vm.interconnect_gbps / inter.gbps)
        name = f"{inter.name} x {nics} per node"
    elif vm.infiniband:
        inter, nics = LINKS["ib-fdr"], 1
        name = f"{inter.name} per node"
    else:
        gbps = ETHERNET_GBPS.get(vm.name.lower(), DEFAULT_ETHERNET_GBPS)
        base = LINKS["ethernet-10"] if gbps <= 10 else LINKS["ethernet-40"]
        inter, nics = replace(base, name=f"Ethernet {gbps:g} Gb/s", gbps=gbps), 1
        name = f"{inter.name} per node"
    if vm.gpus > 1:
        name += f", {intra.name} inside"
    return Fabric(name, vm.gpus, intra, inter, nics)


def vm_workload(
    vm: VmSize,
    samples_per_epoch: int,
    batch: int,
    model: ModelCost = DEFAULT_MODEL,
    patch_size: int | None = None,
    grad_bytes_per_param: int = 4,
    accumulate: int = 1,
) -> Workload:
    """The workload of a run on ``vm``'s GPUs, with the reference compute for its GPU model.

    Args:
        vm: The VM size (its GPU model sets the compute time).
        samples_per_epoch: Global samples per epoch.
        batch: Samples per worker per micro-batch.
        model: The model's cost (default: the ResNet-34 U-Net).
        patch_size: The training patch side; compute scales with its area (default: the
            model's).
        grad_bytes_per_param: 4 for fp32 gradients, 2 when they are all-reduced in fp16.
        accumulate: Micro-batches per all-reduce.

    Returns:
        The workload.

    Raises:
        KeyError: If the VM's GPU model has no figure.
    """
    area = ((patch_size or model.patch_size) / model.patch_size) ** 2
    return Workload(
        samples_per_epoch=samples_per_epoch,
        batch=batch,
        sample_s=sample_seconds(vm.gpu_model, model) * area,
        grad_bytes=model.params * grad_bytes_per_param,
        accumulate=accumulate,
    )


def original_workload(model: ModelCost = DEFAULT_MODEL, gpu_model: str = _K80) -> Workload:
    """The original large run's setting (16,000 samples per epoch, batch 10 per GPU).

    Args:
        model: The model (default: the ResNet-34 U-Net; :data:`ORIGINAL_MODEL` for theirs).
        gpu_model: The GPU model that sets the compute time.

    Returns:
        The workload (DDP overlap).

    Raises:
        KeyError: If the GPU model has no figure.
    """
    return Workload(
        samples_per_epoch=ORIGINAL_RUN.samples_per_epoch,
        batch=ORIGINAL_RUN.batch,
        sample_s=sample_seconds(gpu_model, model),
        grad_bytes=model.grad_bytes,
    )
