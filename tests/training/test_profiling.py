"""``run.profile_steps``: a few training steps under torch's profiler, written per worker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from landcover.training.profiling import SKIP, busy_time, device_intervals, profile_window

from conftest import run_cli, train_args


def test_busy_time_counts_overlapping_intervals_once() -> None:
    # 0-10 and 5-15 overlap (15), 20-25 holds 21-22 (5), 30-30 is empty
    intervals = [(20.0, 25.0), (0.0, 10.0), (21.0, 22.0), (5.0, 15.0), (30.0, 30.0)]
    assert busy_time(intervals) == 20.0
    assert busy_time([]) == 0.0


def test_the_gpu_busy_time_leaves_out_the_step_annotations() -> None:
    # On an H100 the profiler's ProfilerStep#N and the optimizer's annotation were mirrored
    # onto the GPU's timeline, spanning whole steps: the headline read the GPU 98 % busy
    # while its kernels summed to 21 % of the wall. Events as torch's profiler builds them.
    def event(name: str, start: int, end: int, device: DeviceType, note: bool) -> FunctionEvent:
        return FunctionEvent(
            id=0,
            name=name,
            thread=0,
            start_us=start,
            end_us=end,
            device_type=device,
            is_user_annotation=note,
        )

    events = [
        event("ProfilerStep#4", 0, 1000, DeviceType.CUDA, True),
        event("Optimizer.step#AdamW.step", 800, 1000, DeviceType.CUDA, True),
        event("sm90_xmma_fprop_implicit_gemm", 100, 300, DeviceType.CUDA, False),
        event("Memcpy HtoD (Pinned -> Device)", 50, 80, DeviceType.CUDA, False),
        event("aten::convolution", 90, 310, DeviceType.CPU, False),
    ]
    assert sorted(device_intervals(events)) == [(50, 80), (100, 300)]
    assert busy_time(device_intervals(events)) == 230  # 30 + 200 of the 1,000 us step


@pytest.mark.parametrize(
    ("steps", "wanted", "expected"),
    [
        (20, 5, (3, 5)),  # 3 left out, 1 warm-up, 5 profiled: 9 of 20
        (5, 10, (0, 4)),  # a short epoch: as many as fit after the warm-up step
        (6, 3, (2, 3)),
        (1, 3, None),  # no room for a warm-up step
        (20, 0, None),  # off
    ],
)
def test_the_profiled_window_fits_the_epoch(
    steps: int, wanted: int, expected: tuple[int, int] | None
) -> None:
    assert SKIP == 3
    assert profile_window(steps, wanted) == expected


@pytest.mark.slow
def test_two_workers_write_their_profiles(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    secret = "PROFILESECRET1"
    run = tmp_path / f"run?sv=1&sig={secret}"  # the trace records the path it was written to
    # 64 samples / (2 workers x batch 4) = 8 steps: 3 left out, 1 warm-up, 3 profiled
    args = train_args(tiny_config, tiny_data, run, "--workers", "2", "--epochs", "2")
    args += ["--samples-per-epoch", "64", "--set", "run.profile_steps=3"]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        text = (run / "profile" / f"rank{rank}.pt.trace.json").read_text()
        assert secret not in text
        trace = json.loads(text)
        names = [e.get("name", "") for e in trace["traceEvents"]]
        steps = sorted({n for n in names if n.startswith("ProfilerStep#")})
        assert steps == ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
        assert "aten::convolution_backward" in names  # the step's own work is in it
        table = (run / "profile" / f"rank{rank}.txt").read_text()
        headline = re.match(r"3 steps profiled: ([\d.]+) ms a step, torch operators", table)
        assert headline and float(headline.group(1)) > 0, table
        assert "Self CPU" in table
        log = (run / "logs" / f"rank{rank}.log").read_text()
        assert "3 steps profiled" in log and "trace and table in" in log
    # the first epoch trained is profiled, the second is not: one window per worker
    assert sorted(p.name for p in (run / "profile").iterdir()) == [
        "rank0.pt.trace.json",
        "rank0.txt",
        "rank1.pt.trace.json",
        "rank1.txt",
    ]
    records = (run / "metrics.jsonl").read_text().splitlines()
    assert len(records) == 2


def test_a_profile_that_cannot_be_written_is_one_warning(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "profile").write_text("a file where the profile folder goes")
    args = train_args(tiny_config, tiny_data, run, "--epochs", "1", "--samples-per-epoch", "32")
    result = run_cli(*args, "--set", "run.profile_steps=2")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "profile was not written" in line]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert (run / "checkpoints" / "last.pt").is_file()  # training went on
