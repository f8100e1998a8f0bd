"""The parallel layer: communication options take effect, precision and failures are judged right.

The communication tests count the collectives a worker really runs per optimizer step
(torch's profiler records each Gloo operation, DDP's bucket all-reduces included), in two real
worker processes, with the model prepared by the torch engine and stepped by the trainer's own
step function.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from landcover.cluster.azureml import DISTRIBUTION
from landcover.config import RunConfig
from landcover.errors import ConfigError
from landcover.parallel.devices import Precision, choose_precision, gpu_index, predict_workers
from landcover.parallel.engines import ENGINES, engine_for
from landcover.parallel.env import DistEnv
from landcover.parallel.failures import is_peer_failure
from landcover.parallel.launch import launch_workers
from landcover.parallel.torch_engine import TorchEngine, wants_sync_batchnorm
from landcover.training.checkpoint import cuda_state_for, restore_rng_state, rng_state
from landcover.training.step import accumulation_step

from ddp_helpers import count_collectives

STEPS = 4


@pytest.mark.slow
def test_each_communication_option_changes_what_goes_over_the_wire() -> None:
    cases = [
        ({}, 1),
        ({}, 3),
        ({"local_sgd_period": 2}, 1),
        ({"grad_compression": "fp16"}, 1),
        ({"grad_compression": "powersgd", "powersgd_warmup_steps": 2}, 1),
    ]
    ranks = launch_workers(count_collectives, (cases, STEPS), nproc=2)
    plain, accumulated, local, fp16, powersgd = ranks[0]
    assert plain["wrapped"] and plain["hook"] in (None, "", "builtin_allreduce")
    # one all-reduce per gradient bucket and step (DDP rebuilds its buckets after step 1)
    per_step = plain["all_reduce"][1]
    assert 1 <= plain["all_reduce"][0] <= per_step
    assert plain["all_reduce"][1:] == [per_step] * (STEPS - 1)
    assert ranks[1][0]["all_reduce"] == plain["all_reduce"]

    # accumulate K: K backward passes, still one gradient all-reduce per optimizer step
    assert accumulated["all_reduce"] == plain["all_reduce"]

    # local SGD H=2: nothing on the wire between averages (no DDP, no buffer broadcasts, no
    # SyncBatchNorm); every H-th step averages each floating parameter and buffer once
    assert not local["wrapped"]
    n = local["tensors"]
    assert local["collectives"] == [0, n, 0, n]
    assert local["all_reduce"] == [0, n, 0, n]

    # the compression hooks are the ones registered on the DDP model
    assert fp16["wrapped"] and fp16["hook"] == "fp16_compress_hook"
    assert powersgd["wrapped"] and "powerSGD_hook" in powersgd["hook"]


def test_sync_batchnorm_only_where_workers_synchronise_every_step() -> None:
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    two = DistEnv(rank=0, world_size=2, local_world_size=2)
    assert wants_sync_batchnorm(two, cuda, local_sgd=False)
    assert not wants_sync_batchnorm(two, cuda, local_sgd=True)  # local SGD steps alone
    assert not wants_sync_batchnorm(DistEnv(), cuda, local_sgd=False)
    assert not wants_sync_batchnorm(two, cpu, local_sgd=False)


def test_local_sgd_replica_is_bare_and_keeps_plain_batchnorm() -> None:
    from landcover.models import build_model

    from ddp_helpers import TINY_MODEL

    env = DistEnv(rank=0, world_size=2, local_world_size=2)
    replica = TorchEngine().replicate(
        build_model(TINY_MODEL, 4, 6), env, RunConfig(local_sgd_period=4), torch.device("cpu")
    )
    assert replica.module is replica.model and replica.local_sgd is not None
    assert not any(isinstance(m, nn.SyncBatchNorm) for m in replica.model.modules())


@pytest.mark.parametrize(
    ("capability", "expected"),
    [
        ((7, 0), Precision(torch.float16, grad_scaling=True)),  # V100
        ((7, 5), Precision(torch.float16, grad_scaling=True)),  # T4
        ((8, 0), Precision(torch.bfloat16)),  # A100
        ((9, 0), Precision(torch.bfloat16)),  # H100
    ],
)
def test_bf16_only_where_the_gpu_has_bf16_tensor_cores(
    capability: tuple[int, int], expected: Precision
) -> None:
    assert choose_precision(torch.device("cuda", 0), True, capability) == expected
    assert choose_precision(torch.device("cuda", 0), False, capability) == Precision()
    assert choose_precision(torch.device("cpu"), True) == Precision()


def test_predict_workers_share_gpus_round_robin_and_training_workers_do_not() -> None:
    # 5 workers on a node of 2 GPUs: predict's go 0, 1, 0, 1, 0
    shared = [gpu_index(DistEnv(local_rank=r, local_world_size=5), 2, share=True) for r in range(5)]
    assert shared == [0, 1, 0, 1, 0]
    assert [gpu_index(DistEnv(local_rank=r, local_world_size=2), 2) for r in range(2)] == [0, 1]
    with pytest.raises(
        ConfigError, match=r"3 workers on this node but only 2 GPUs; use --workers 2"
    ):
        gpu_index(DistEnv(local_rank=2, local_world_size=3), 2)
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        gpu_index(DistEnv(), 0, share=True)


@pytest.mark.parametrize(
    ("device", "gpus", "cores", "expected"),
    [
        ("cpu", 8, 96, 1),  # the CPU: one worker, its threads on every core
        ("auto", 0, 96, 1),  # no GPU seen
        ("cuda", 1, 16, 4),  # the measured H100 machine: 4 workers, 4 cores each
        ("auto", 8, 96, 32),  # an ND H100 v5: 12 cores a GPU, 3 for each of 4 workers
        ("cuda", 8, 48, 16),  # 6 cores a GPU: 2 workers each
        ("cuda", 8, 16, 8),  # few cores: still one worker a GPU
        ("cuda", 2, 7, 2),
    ],
)
def test_predict_workers_auto_is_four_a_gpu_as_cores_allow(
    device: str, gpus: int, cores: int, expected: int
) -> None:
    assert predict_workers("auto", device, gpus=gpus, cores=cores) == expected


def test_predict_workers_takes_a_number_as_given_and_refuses_others() -> None:
    assert predict_workers("3", "cuda", gpus=1, cores=2) == 3  # the user's number stands
    for bad in ("0", "-1", "two", "1.5", ""):
        with pytest.raises(ConfigError, match="a number of processes"):
            predict_workers(bad, "cpu")


def test_a_scaled_fp16_style_step_equals_the_unscaled_step() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1))
    twin = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1))
    twin.load_state_dict(model.state_dict())
    criterion = nn.CrossEntropyLoss()
    batch = [(torch.randn(2, 4, 8, 8), torch.randint(0, 6, (2, 8, 8)))]
    plain = torch.optim.SGD(model.parameters(), lr=0.1)
    scaled = torch.optim.SGD(twin.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    accumulation_step(model, criterion, plain, batch, grad_clip=1.0)
    accumulation_step(twin, criterion, scaled, batch, grad_clip=1.0, scaler=scaler)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    assert scaler.get_scale() == 1024.0  # finite gradients: the scale is kept


def test_rng_state_is_restored_per_rank() -> None:
    states = []
    for seed in (11, 22):  # what ranks 0 and 1 saved
        torch.manual_seed(seed)
        random.seed(seed)
        states.append(rng_state())
    torch.manual_seed(22)
    expected = torch.rand(5)
    torch.manual_seed(0)
    assert restore_rng_state(states, rank=1)
    assert torch.equal(torch.rand(5), expected)
    # a rank the checkpoint did not have (more workers now) keeps its own state
    torch.manual_seed(5)
    fresh = torch.rand(5)
    torch.manual_seed(5)
    assert not restore_rng_state(states, rank=2)
    assert torch.equal(torch.rand(5), fresh)


def test_cuda_rng_state_tolerates_a_different_device_count() -> None:
    # a format-1 checkpoint from an 8-GPU node: every device's generator, of rank 0
    eight = {"python": random.getstate(), "torch": torch.get_rng_state()}
    eight["cuda"] = [torch.full((16,), i, dtype=torch.uint8) for i in range(8)]
    assert torch.equal(cuda_state_for(eight, 3), eight["cuda"][3])
    assert cuda_state_for(eight, 9) is None  # that device did not exist there
    # format 2: each rank's own device only
    own = {**eight, "cuda": torch.full((16,), 7, dtype=torch.uint8)}
    assert torch.equal(cuda_state_for(own, 0), own["cuda"])
    assert cuda_state_for({"python": 0, "torch": 0}, 0) is None
    # on this CPU machine, restoring either never touches CUDA
    assert restore_rng_state([eight], rank=0, device=torch.device("cpu"))


def test_a_refused_connection_is_a_peer_failure() -> None:
    with pytest.raises(Exception) as caught:
        torch.distributed.TCPStore(
            "127.0.0.1", 1, world_size=2, is_master=False, timeout=timedelta(seconds=1)
        )
    assert is_peer_failure(caught.value)


def test_a_silent_gloo_peer_is_a_peer_failure() -> None:
    # two real gloo members in threads of this process; the second never joins the all-reduce
    store = torch.distributed.HashStore()
    caught: list[BaseException] = []

    def member(rank: int) -> None:
        group = torch.distributed.ProcessGroupGloo(store, rank, 2, timedelta(seconds=1))
        if rank == 0:
            with pytest.raises(RuntimeError) as error:
                group.allreduce([torch.ones(3)]).wait()
            caught.append(error.value)
        else:
            time.sleep(2)  # keeps its end of the connection open, silent

    threads = [threading.Thread(target=member, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(caught) == 1
    assert is_peer_failure(caught[0])


def test_torch_types_decide_before_the_text() -> None:
    # torch's own types: a device fault is local whatever its text says
    assert not is_peer_failure(torch.OutOfMemoryError("while waiting for a peer: timed out"))
    assert not is_peer_failure(torch.AcceleratorError("peer connection reset by peer"))
    assert is_peer_failure(torch.distributed.DistStoreError("wait failed"))
    # NCCL raises its local and its remote faults as one type: the text tells them apart
    backend = torch.distributed.DistBackendError
    assert is_peer_failure(backend("NCCL error: remote process exited, ncclRemoteError"))
    assert not is_peer_failure(backend("NCCL error: invalid usage, NCCL version 2.21.5"))
    # not a collective at all
    assert not is_peer_failure(ValueError("timed out"))


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: an illegal memory access was encountered",
        "CUDA out of memory. Tried to allocate 2.00 GiB",
        "NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage, NCCL version 2.21.5",
        "NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
    ],
)
def test_a_local_gpu_fault_is_not_called_a_dead_peer(message: str) -> None:
    assert not is_peer_failure(RuntimeError(message))


@pytest.mark.parametrize(
    "message",
    [
        "[gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:5921",
        "Connection reset by peer",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9) ran for 300000 ms",
        "NCCL error: remote process exited or there was a network error, ncclRemoteError",
        "Horovod has been shut down. This was caused by an exception on one of the ranks",
    ],
)
def test_a_silent_or_dead_peer_is_a_peer_failure(message: str) -> None:
    assert is_peer_failure(RuntimeError(message))


def test_engines_refuse_options_they_cannot_honour() -> None:
    with pytest.raises(ConfigError, match="Horovod offers none or fp16"):
        engine_for(RunConfig(engine="horovod", grad_compression="powersgd"))
    with pytest.raises(ConfigError, match="max_restarts needs the torch engine"):
        engine_for(RunConfig(engine="horovod", max_restarts=1))
    engine_for(RunConfig(engine="torch", grad_compression="powersgd", max_restarts=1))
    # each engine's workers start the way its Azure ML distribution starts them
    assert {name: DISTRIBUTION[e.spec.launcher] for name, e in ENGINES.items()} == {
        "torch": "pytorch",
        "horovod": "mpi",
    }
    with pytest.raises(ValidationError, match="unknown engine 'mpi'; choose torch or horovod"):
        RunConfig(engine="mpi")
