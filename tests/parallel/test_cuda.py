"""The GPU path, on a real CUDA device: precision, memory format, predict, resume, NCCL.

Every test here is marked ``cuda`` and skipped where torch sees no GPU (they are listed as
skipped, never as passed). ``bash scripts/gpu-check.sh`` runs them on a GPU machine, with a
short real training run and the benchmark's GPU part.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import LossConfig, RunConfig
from landcover.models import build_model
from landcover.parallel.devices import choose_precision, resolve_device
from landcover.parallel.env import DistEnv
from landcover.parallel.launch import launch_workers
from landcover.training.losses import SegmentationLoss
from landcover.training.step import accumulation_step

from conftest import run_cli, train_args
from ddp_helpers import TINY_MODEL

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _batch(device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    inputs = torch.randn(4, 4, 64, 64, generator=g)
    target = torch.randint(0, 6, (4, 64, 64), generator=g)
    return [(inputs.to(device), target.to(device))]


def _losses(
    device: torch.device, autocast_dtype: torch.dtype | None, scaler: torch.amp.GradScaler | None
) -> list[float]:
    """20 steps of the tiny channels_last model on one batch, from the same seed."""
    torch.manual_seed(0)
    model = build_model(TINY_MODEL, 4, 6).to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    criterion = SegmentationLoss(LossConfig(), 6).to(device)
    batch = _batch(device)
    return [
        float(
            accumulation_step(
                model, criterion, optimizer, batch, autocast_dtype, 1.0, scaler=scaler
            )
        )
        for _ in range(20)
    ]


def test_the_device_is_bound_and_a_mixed_precision_step_learns() -> None:
    device = resolve_device("cuda", DistEnv())
    assert torch.cuda.current_device() == device.index == 0
    precision = choose_precision(device, mixed=True)
    major, _ = torch.cuda.get_device_capability(device)
    assert precision.autocast_dtype == (torch.bfloat16 if major >= 8 else torch.float16)
    scaler = torch.amp.GradScaler("cuda") if precision.grad_scaling else None
    mixed = _losses(device, precision.autocast_dtype, scaler)
    full = _losses(device, None, None)
    assert all(np.isfinite(mixed))
    # random labels on noise: the loss falls about 18 % in 20 steps (fp32 on a CPU: 1.94 ->
    # 1.63); mixed precision follows fp32's own curve on this GPU
    assert mixed[-1] < 0.9 * mixed[0]
    assert abs(mixed[-1] - full[-1]) < 0.03 * full[-1]


def test_channels_last_gives_the_same_logits() -> None:
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = build_model(TINY_MODEL, 4, 6).to(device).eval()
    x = _batch(device)[0][0]
    # cuDNN convolves fp32 in TF32 by default, with other kernels for each layout (a
    # difference of about 1e-3 relative on an H100); the layouts are compared in true fp32
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        with torch.no_grad():
            plain = model(x.contiguous())
            model.to(memory_format=torch.channels_last)
            last = model(x.contiguous(memory_format=torch.channels_last))
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    assert torch.allclose(plain, last, atol=1e-4, rtol=1e-3)


def test_predict_on_cuda_matches_the_cpu_map(
    checkpoint: Path, tiny_data: Path, tmp_path: Path
) -> None:
    tile = sorted(tiny_data.glob("*_naip.tif"))[0]
    maps = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        result = run_cli(
            "predict",
            str(tile),
            "--checkpoint",
            str(checkpoint),
            "--out",
            str(out),
            "--device",
            device,
        )
        assert result.returncode == 0, result.stderr
        (class_map,) = out.glob("*_class.tif")
        with rasterio.open(class_map) as src:
            maps[device] = src.read(1)
    # bf16 on the GPU may flip a few near-tied pixels; the maps must agree almost everywhere
    assert float((maps["cpu"] == maps["cuda"]).mean()) > 0.98


def test_predict_workers_beyond_the_gpus_share_them(
    checkpoint: Path, tiny_data: Path, tmp_path: Path
) -> None:
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    for tile in sorted(tiny_data.glob("*_naip.tif")):
        (tiles / tile.name).symlink_to(tile)
    count = torch.cuda.device_count()
    maps: dict[int, dict[str, np.ndarray]] = {}
    for workers in (1, count + 2):
        out = tmp_path / f"w{workers}"
        result = run_cli(
            "predict", str(tiles), "--checkpoint", str(checkpoint), "--out", str(out),
            "--device", "cuda", "--workers", str(workers), "--no-preview",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        # each worker logs its GPU (in OUT/logs/rank{R}.log): round-robin over the node's GPUs
        logs = "".join(f.read_text() for f in (out / "logs").glob("rank*.log"))
        gpus = re.findall(r"rank (\d+)/\d+: pid \d+ on cuda:(\d+)", logs)
        assert sorted((int(r), int(g)) for r, g in gpus) == [(r, r % count) for r in range(workers)]
        maps[workers] = {}
        for class_map in out.glob("*_class.tif"):
            with rasterio.open(class_map) as src:
                maps[workers][class_map.name] = src.read(1)
    one, many = maps[1], maps[count + 2]
    assert sorted(one) == sorted(many) and len(one) == len(list(tiles.iterdir()))
    for name in one:  # the same model on the same GPU kind: near-ties aside, the same map
        assert float((one[name] == many[name]).mean()) > 0.999, name


def test_a_gpu_checkpoint_resumes_on_cpu_and_back(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    args = train_args(tiny_config, tiny_data, run)
    for epochs, device in ((1, "cuda"), (2, "cpu"), (3, "cuda")):
        result = run_cli(*args, "--epochs", str(epochs), "--device", device)
        assert result.returncode == 0, result.stderr
        assert load_checkpoint(run / "checkpoints" / "last.pt").epoch == epochs
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert isinstance(state.rng[0]["cuda"], torch.Tensor)  # one device's generator per rank


def test_rng_restore_with_more_devices_in_the_checkpoint_than_here(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    args = train_args(tiny_config, tiny_data, run)
    assert run_cli(*args, "--epochs", "1", "--device", "cuda").returncode == 0
    last = run / "checkpoints" / "last.pt"
    state = load_checkpoint(last)
    # as a format-1 checkpoint from a node with more GPUs than this one saved it
    count = torch.cuda.device_count() + 7
    state.rng = [{**state.rng[0], "cuda": [torch.cuda.get_rng_state(0)] * count}]
    last.write_bytes(Checkpoint.serialize(state))
    result = run_cli(*args, "--epochs", "2", "--device", "cuda")
    assert result.returncode == 0, result.stderr
    assert "resuming from" in result.stderr


def cuda_world_of_one() -> dict:
    """Joins through the torch engine on the GPU and runs each kind of collective once."""
    from landcover.parallel.env import env_from_environ
    from landcover.parallel.torch_engine import TorchEngine

    env = env_from_environ()
    assert env is not None
    device = resolve_device("cuda", env)
    engine = TorchEngine()
    run = RunConfig(device="cuda")
    engine.join(env, run, device)
    try:
        total = engine.all_reduce_sum(torch.ones(3, device=device))
        gathered = engine.all_gather_object({"rank": env.rank})
        engine.barrier()
        return {
            "backend": engine.backend(run, device),
            "group": torch.distributed.is_initialized(),
            "current": torch.cuda.current_device(),
            "sum": total.tolist(),
            "gathered": gathered,
        }
    finally:
        engine.leave()


def test_a_cuda_world_of_one_through_the_real_launcher() -> None:
    # NCCL is the engine's choice on CUDA; a world of one needs no process group (one GPU
    # cannot hold an NCCL world of two), and each collective is then the identity
    (result,) = launch_workers(cuda_world_of_one, (), nproc=1).values()
    assert result == {
        "backend": "nccl",
        "group": False,
        "current": 0,
        "sum": [1.0] * 3,
        "gathered": [{"rank": 0}],
    }


@pytest.mark.parametrize("prob_dtype", ["uint8", "float32", None])
def test_a_strip_encoded_on_the_device_equals_the_host_encoding(prob_dtype: str | None) -> None:
    """The asynchronous copies to pinned host memory give the host encoding's arrays, once the
    strip's ``wait`` has returned (the writer thread calls it)."""
    from landcover.inference.encode import encode_probs, encode_strip

    g = torch.Generator().manual_seed(3)
    probs = torch.softmax(torch.randn(6, 40, 70, generator=g), dim=0)
    valid = np.ones((40, 70), dtype=bool)
    strip = encode_strip(probs.cuda(), prob_dtype, 5, valid)
    assert strip.copied is not None  # not waited for by the device's thread
    classes, stored = encode_probs(probs.clone(), prob_dtype)
    strip.wait()
    assert strip.row == 5 and np.array_equal(strip.classes, classes)
    if prob_dtype is None:
        assert strip.probs is None and stored is None
    else:
        assert strip.probs is not None and np.array_equal(strip.probs, stored)
