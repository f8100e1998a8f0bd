"""What a training sample costs on a GPU, and the workloads and fabrics of VM sizes.

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

The scaling model these feed is :mod:`landcover.cluster.costmodel`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from landcover.cluster.costmodel import LINKS, Fabric, Workload
from landcover.cluster.vmsizes import VmSize

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
