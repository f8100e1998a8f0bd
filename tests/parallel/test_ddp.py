"""DDP is real: two Gloo workers on batches a and b equal one worker on a+b."""

from pathlib import Path

import pytest
import torch

from landcover.errors import LandcoverError
from landcover.parallel.launch import launch_workers

from ddp_helpers import crash, make_batch, one_step


def _max_param_diff(a: dict, b: dict) -> float:
    return max(
        float((a[k].float() - b[k].float()).abs().max()) for k in a if a[k].is_floating_point()
    )


@pytest.mark.slow
def test_two_worker_step_equals_one_worker_step_on_the_whole_batch(tmp_path: Path) -> None:
    batch = tmp_path / "batch.pt"
    make_batch(str(batch))
    launch_workers(one_step, (str(batch), str(tmp_path / "two.pt")), nproc=2)
    launch_workers(one_step, (str(batch), str(tmp_path / "one.pt")), nproc=1)
    launch_workers(one_step, (str(batch), str(tmp_path / "half.pt"), [0, 1]), nproc=1)
    two = torch.load(tmp_path / "two.pt", weights_only=True)
    one = torch.load(tmp_path / "one.pt", weights_only=True)
    half = torch.load(tmp_path / "half.pt", weights_only=True)
    assert _max_param_diff(two, one) < 1e-5
    # control: a step on batch a alone moves the weights elsewhere, so the match above is the
    # gradient all-reduce at work, not an untouched model
    assert _max_param_diff(half, one) > 1e-3


def test_a_worker_bug_is_named_with_its_exception(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(
        LandcoverError, match=r"worker rank 1 failed with ZeroDivisionError: the bug"
    ):
        launch_workers(crash, (1,), nproc=2)
    # the worker's own traceback is kept for the bug report
    assert "Traceback" in capfd.readouterr().err
