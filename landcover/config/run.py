"""``run``: workers, nodes, engine, devices and the run folder."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from landcover.config.base import AUTO, Section, no_credentials_in_url
from landcover.registry import DEFAULT_ENGINE, check_engine_name


class RunConfig(Section):
    """Workers, devices and the run folder.

    Attributes:
        out: Run folder (config, metrics, TensorBoard logs, checkpoints, plots).
        workers: Number of worker processes on this machine (one per GPU on CUDA).
        engine: The data-parallel engine, one of :data:`landcover.registry.ENGINES`:
            ``torch`` (DDP under torchrun's elastic agent) or ``horovod``
            (``hvd.DistributedOptimizer`` under ``horovodrun``).
        device: ``auto`` (CUDA when available), ``cpu`` or ``cuda``.
        backend: torch.distributed backend; ``auto`` is NCCL on CUDA, Gloo on CPU.
        bf16: bf16 autocast on CUDA (ignored on CPU, which trains in fp32).
        channels_last: channels_last memory format on CUDA.
        threads_per_worker: CPU threads per worker; default: cores / workers.
        seed: Base random seed (each rank and epoch derive their own).
        val_every: Validate every K epochs (and after the last).
        val_overlap: Overlap in pixels between sliding windows in validation; default a
            quarter of the patch size.
        keep_last: Number of per-epoch checkpoints kept besides ``last.pt`` and ``best.pt``.
        log_every_s: Seconds between progress lines when the output is not a terminal.
        timeout_s: Collective-operation timeout in seconds.
        max_restarts: Restarts of the worker group by the elastic agent after a failure;
            restarted workers resume from the latest checkpoint.
        nnodes: Number of nodes (machines) in the job; each runs one elastic agent.
        workers_per_node: Workers on each node (default: ``workers / nnodes``).
        rdzv_endpoint: ``host:port`` of the c10d rendezvous (one node's address) when
            ``nnodes > 1``.
        rdzv_id: Rendezvous id shared by the nodes (default: derived from ``out``).
        rdzv_timeout_s: Seconds the nodes wait for each other at the rendezvous (the join,
            and at most 60 s for each read from the rendezvous store).
        node_rank: This node's rank; node 0 hosts the c10d rendezvous store (default:
            torch decides from whether the endpoint's host name is this machine's).
        local_addr: This node's address as the other nodes reach it (default: its host
            name); set it on hosts with several interfaces.
        grad_compression: ``none``, ``fp16`` or ``powersgd`` (DDP communication hooks;
            Horovod offers ``none`` and ``fp16``).
        powersgd_rank: Rank of PowerSGD's gradient approximation.
        powersgd_warmup_steps: Optimizer steps of plain all-reduce before PowerSGD starts.
        local_sgd_period: Average models every H optimizer steps instead of all-reducing
            gradients every step (0: off).
        compile: Compile the model with ``torch.compile`` for training (``landcover predict
            --compile`` for maps); the first steps pay the compile time.
        compile_mode: ``torch.compile``'s mode for training: ``default``;
            ``reduce-overhead``, which replays the step's kernels as CUDA graphs (one launch
            for many: for a step bound by kernel launches, as the default model's is on an
            H100 at small batches; it keeps a copy of the step's tensors and needs static
            shapes); ``max-autotune``, which also searches kernels (minutes of compiling);
            ``max-autotune-no-cudagraphs``. CUDA graphs apply on a GPU only.
        cuda_graph: Capture the whole training step (the batch made model input with its
            augmentation and normalisation, forward, loss, backward, optimizer and the
            weights' average) as one CUDA graph and replay it every step
            (:mod:`landcover.training.graphstep`): one launch instead of hundreds, for a step
            bound by kernel launches (on an H200 at batch 16: 1.5x the plain eager loop, 2.6x
            the eager step). ``auto``: on a CUDA GPU wherever the step can be captured (not
            yet with several workers, ``optim.accumulate`` above 1, fp16, ``run.compile`` or
            Horovod: one log line then says why and the step runs eagerly); ``true``: the
            same, and said on the CPU too; ``false``: eager.
        profile_steps: Profile this many optimizer steps of the first epoch trained with
            ``torch.profiler`` (after 3 steps and one warm-up step), on every worker:
            ``profile/rank{r}.pt.trace.json`` (a Chrome trace: Perfetto, TensorBoard) and
            ``profile/rank{r}.txt`` (operators by time); a line in the log gives the
            milliseconds a step and, on a GPU, its kernels' share of them (0: off).
        mlflow: Log the run to MLflow from rank 0 (the flattened config as parameters, each
            epoch's loss, learning rate, samples/s, per-class IoU, mIoU and accuracy, and
            ``curves.png``), to the tracking server of ``MLFLOW_TRACKING_URI``; also on, whatever
            this says, when that variable is set (Azure ML sets it). Needs ``mlflow-skinny``
            (``pip install 'landcover[mlflow]'``). A resumed run folder continues its MLflow run
            (its id is kept in ``mlflow.json``).
    """

    out: str = "runs/default"
    workers: int = Field(1, ge=1)
    engine: str = DEFAULT_ENGINE
    device: Literal["auto", "cpu", "cuda"] = "auto"
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    bf16: bool = True
    channels_last: bool = True
    threads_per_worker: int | None = Field(None, ge=1)
    seed: int = 0
    val_every: int = Field(1, ge=1)
    val_overlap: int | None = Field(None, ge=0)
    keep_last: int = Field(3, ge=0)
    log_every_s: float = Field(10.0, gt=0.0)
    timeout_s: float = Field(300.0, gt=0.0)
    max_restarts: int = Field(0, ge=0)
    nnodes: int = Field(1, ge=1)
    workers_per_node: int | None = Field(None, ge=1)
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_timeout_s: float = Field(600.0, gt=0.0)
    node_rank: int | None = Field(None, ge=0)
    local_addr: str | None = None
    grad_compression: Literal["none", "fp16", "powersgd"] = "none"
    powersgd_rank: int = Field(1, ge=1)
    powersgd_warmup_steps: int = Field(10, ge=0)
    local_sgd_period: int = Field(0, ge=0)
    compile: bool = False
    compile_mode: Literal[
        "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"
    ] = "default"
    cuda_graph: bool | Literal["auto"] = AUTO
    profile_steps: int = Field(0, ge=0)
    mlflow: bool = False

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return check_engine_name(value)

    @field_validator("out")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        return no_credentials_in_url(value)  # type: ignore[return-value]

    @model_validator(mode="after")
    def _compile_mode_compiles(self) -> RunConfig:
        if self.compile_mode != "default" and not self.compile:
            raise ValueError(
                f"run.compile_mode {self.compile_mode} applies to a compiled model: set "
                "run.compile: true as well"
            )
        return self

    @model_validator(mode="after")
    def _nodes_consistent(self) -> RunConfig:
        if self.local_sgd_period and self.grad_compression != "none":
            raise ValueError(
                "run.local_sgd_period sends no gradients, so it cannot be combined with "
                "run.grad_compression"
            )
        if self.nnodes == 1:
            return self
        if self.rdzv_endpoint is None:
            raise ValueError(
                "run.rdzv_endpoint (--rdzv-endpoint HOST:PORT) is needed with nnodes > 1"
            )
        if self.workers_per_node is None and self.workers % self.nnodes:
            raise ValueError(
                f"{self.workers} workers do not split evenly over {self.nnodes} nodes; "
                "set --workers-per-node"
            )
        return self

    @property
    def nproc_per_node(self) -> int:
        """Workers this node's agent starts."""
        return self.workers_per_node or self.workers // self.nnodes
