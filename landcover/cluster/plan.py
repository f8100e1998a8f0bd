"""Planning a distributed run: nodes, processes, batch, learning rate and data per worker.

:func:`make_plan` turns ``cluster.json``, a worker count, a config and a data folder into a
:class:`ClusterPlan` (numbers a test or a notebook can use); :func:`with_prediction` adds the
scaling cost model's epoch time (:mod:`~landcover.cluster.costmodel`);
:mod:`~landcover.cluster.planlines` renders it for ``landcover cluster plan``.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field, replace

from landcover import storage
from landcover.cluster import costmodel, gpus
from landcover.cluster.spec import ClusterSpec
from landcover.cluster.vmsizes import VmSize, current_sizes
from landcover.config import Config
from landcover.data.pairs import TilePair, split_pairs
from landcover.data.sharding import shard
from landcover.errors import ConfigError
from landcover.synthetic.sample import data_root
from landcover.training.geometry import BatchGeometry


@dataclass(frozen=True)
class WorkerShare:
    """One worker's share of the training tiles.

    Attributes:
        rank: The worker's rank.
        tiles: Tile pairs it holds.
        bytes: Size of those files (image + label) on disk or in blob storage.
    """

    rank: int
    tiles: int
    bytes: int


@dataclass(frozen=True)
class DataPlan:
    """The training data and how it is dealt to the workers.

    Attributes:
        root: The data folder (or manifest's folder).
        tiles: Training tile pairs.
        bytes: Size of the training files (image + label).
        val_tiles: Validation tile pairs (held out, dealt separately).
        shares: Each worker's share, by rank.
    """

    root: str
    tiles: int
    bytes: int
    val_tiles: int
    shares: list[WorkerShare]

    @property
    def tiles_shared(self) -> bool:
        """Whether there are more workers than tiles, so some tiles are held by several."""
        return len(self.shares) > self.tiles


@dataclass(frozen=True)
class ClusterPlan:
    """How a run of ``workers`` processes lays out on a cluster.

    Attributes:
        vm: The VM size.
        workers: Worker processes (one per GPU).
        nodes: Nodes needed: ``ceil(workers / GPUs per node)``.
        processes_per_node: Processes on each full node.
        last_node_processes: Processes on the last node.
        idle_slots: GPUs left idle on the last node.
        target_node_count: ``targetNodeCount`` from cluster.json.
        vm_priority: ``dedicated`` or ``lowpriority``.
        geometry: Global batch (``workers x batch_size x accumulate``), steps per epoch and
            the peak learning rate with its scaling rule, as the trainer computes them.
        warmup_epochs: Epochs of warm-up to the peak.
        data: The training data and its shares, if computed.
        warnings: Lines to show as warnings (retired size, idle GPUs, ...).
        predicted_epoch_s: Predicted epoch time (training steps) in seconds, from the
            scaling cost model (:func:`with_prediction` fills it in); ``None`` until then,
            and then not shown.
        predicted_single_s: The model's epoch time for one GPU of the same VM size, s.
        predicted_efficiency: ``predicted_single_s / (workers x predicted_epoch_s)``.
        prediction_basis: What the prediction assumes (interconnect, compute reference).
    """

    vm: VmSize
    workers: int
    nodes: int
    processes_per_node: int
    last_node_processes: int
    idle_slots: int
    target_node_count: int
    vm_priority: str
    geometry: BatchGeometry
    warmup_epochs: float
    data: DataPlan | None = None
    warnings: list[str] = field(default_factory=list)
    predicted_epoch_s: float | None = None
    predicted_single_s: float | None = None
    predicted_efficiency: float | None = None
    prediction_basis: str = ""

    @property
    def target_suffices(self) -> bool:
        """Whether ``targetNodeCount`` gives enough nodes for the workers."""
        return self.target_node_count >= self.nodes

    @property
    def gpus(self) -> int:
        """GPUs on the nodes used (busy and idle)."""
        return self.nodes * self.vm.gpus


def node_layout(workers: int, gpus_per_node: int) -> tuple[int, int, int, int]:
    """Lays workers out one per GPU on as few nodes as possible.

    Args:
        workers: Worker processes (>= 1).
        gpus_per_node: GPUs on each node (>= 1).

    Returns:
        ``(nodes, processes per full node, processes on the last node, idle GPUs)``.
    """
    nodes = math.ceil(workers / gpus_per_node)
    per_node = min(workers, gpus_per_node)
    last = workers - (nodes - 1) * gpus_per_node
    return nodes, per_node, last, nodes * gpus_per_node - workers


def _file_sizes(pairs: list[TilePair], root: str) -> dict[str, int]:
    """Sizes of the pairs' files: one listing of ``root``, ``stat`` for files elsewhere."""
    prefix = root.rstrip("/") + "/"
    listed: dict[str, int] = {}
    with contextlib.suppress(storage.StorageError):  # not a folder: stat each file
        listed = {prefix + rel: size for rel, size in storage.list_files(root)}
    files = [f for p in pairs for f in (p.image, p.label)]
    return {f: listed[f] if f in listed else storage.stat(f).size for f in files}


def data_plan(config: Config, workers: int, root: str) -> DataPlan:
    """Finds the training tiles and deals them to ``workers`` as training does.

    Args:
        config: The configuration (its ``data`` section says how to find the pairs).
        workers: Worker count.
        root: The data folder.

    Returns:
        The training data and each worker's share.

    Raises:
        DataError: If the folder has no pairs.
        StorageError: If listing or reading sizes fails.
    """
    train, val = split_pairs(config.data, root)
    sizes = _file_sizes(train, root)
    pair_bytes = [sizes[p.image] + sizes[p.label] for p in train]
    index = list(range(len(train)))
    shares = []
    for rank in range(workers):
        mine = shard(index, rank, workers)
        shares.append(WorkerShare(rank, len(mine), sum(pair_bytes[i] for i in mine)))
    return DataPlan(root, len(train), sum(pair_bytes), len(val), shares)


def make_plan(
    cluster: ClusterSpec,
    workers: int,
    config: Config,
    data: str | None = None,
    with_data: bool = True,
) -> ClusterPlan:
    """Plans a run of ``workers`` processes on the cluster described by ``cluster.json``.

    Args:
        cluster: The validated cluster.json.
        workers: Worker processes, one per GPU (>= 1).
        config: The run's configuration (batch size, learning rate, data settings).
        data: The data folder; default: ``data.root`` from the config, else the built-in
            sample.
        with_data: Compute each worker's share of the training data (lists the folder).

    Returns:
        The plan.

    Raises:
        ConfigError: If ``workers`` is below 1.
        DataError: If the data folder has no pairs.
        StorageError: If the data cannot be listed.
    """
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, not {workers}")
    vm = cluster.vm
    nodes, per_node, last, idle = node_layout(workers, vm.gpus)
    warnings = []
    if vm.retired:
        successors = ", ".join(v.name for v in current_sizes() if v.gpus == vm.gpus)
        warnings.append(
            f"{vm.name} was {vm.note.split(';')[0]}: Azure cannot deploy it; "
            f"sizes with {vm.gpus} GPU(s): {successors or 'see landcover/cluster/vmsizes.py'}"
        )
    if cluster.vm_priority == "lowpriority":
        warnings.append(
            "lowpriority nodes can be pre-empted: the job stops and resumes from its last "
            "checkpoint when rerun with the same run folder (azureml: --run-path)"
        )
    if nodes > 1 and not vm.infiniband:
        warnings.append(
            f"{vm.name} has no InfiniBand: gradients cross nodes over Ethernet, so scaling "
            "past one node is limited by the network"
        )
    data_info = None
    if with_data:
        root = data if data is not None else data_root(config.data.root)
        data_info = data_plan(config, workers, root)
    return ClusterPlan(
        vm=vm,
        workers=workers,
        nodes=nodes,
        processes_per_node=per_node,
        last_node_processes=last,
        idle_slots=idle,
        target_node_count=cluster.target_node_count,
        vm_priority=cluster.vm_priority,
        geometry=BatchGeometry.from_optim(config.optim, workers),
        warmup_epochs=config.optim.warmup_epochs,
        data=data_info,
        warnings=warnings,
    )


_DEFAULT_ARCH = ("resnet34", 5, [256, 128, 64, 32, 16])


def with_prediction(plan: ClusterPlan, config: Config) -> ClusterPlan:
    """Adds the scaling cost model's epoch time and efficiency to a plan.

    The compute time per sample is the reference figure of the VM's GPU model for the
    default ResNet-34 U-Net (:mod:`~landcover.cluster.costmodel`: calibrated on the original
    run's K80, scaled by published training throughput), scaled by the patch area; the
    gradient all-reduce is a ring inside the node and across nodes over the VM's
    interconnect, overlapped with the backward pass as DDP does. Training steps only:
    validation and checkpoints are not included.

    Args:
        plan: The plan (its VM size, workers and batch geometry).
        config: The run's configuration (patch size, model, gradient compression).

    Returns:
        The plan with ``predicted_epoch_s``, ``predicted_single_s``,
        ``predicted_efficiency`` and ``prediction_basis`` set, or unchanged when the VM's
        GPU model has no reference figure.
    """
    run, model, geometry = config.run, config.model, plan.geometry
    try:
        workload = gpus.vm_workload(
            plan.vm,
            samples_per_epoch=geometry.samples_per_epoch,
            batch=geometry.batch_size,
            patch_size=config.data.patch_size,
            grad_bytes_per_param=2 if run.grad_compression == "fp16" else 4,
            accumulate=geometry.accumulate,
        )
        fabric = gpus.fabric_for(plan.vm)
    except KeyError:
        return plan
    prediction = costmodel.predict(workload, fabric, plan.workers)
    single = costmodel.predict(workload, fabric, 1)
    basis = [
        f"ring all-reduce over {fabric.name}",
        f"{plan.vm.gpu_model} reference compute for the {gpus.DEFAULT_MODEL.name}",
    ]
    if (model.encoder, model.encoder_depth, model.decoder_channels) != _DEFAULT_ARCH:
        basis.append(f"your {model.encoder} U-Net will differ")
    if run.grad_compression == "powersgd" or run.local_sgd_period:
        basis.append("PowerSGD / local SGD not modelled: full gradients every step")
    return replace(
        plan,
        predicted_epoch_s=prediction.epoch_s,
        predicted_single_s=single.epoch_s,
        predicted_efficiency=prediction.efficiency,
        prediction_basis="; ".join(basis),
    )
