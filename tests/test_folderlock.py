"""One job per output folder: a second train or predict into a folder a job holds stops with
one line and removes none of that job's temporaries (``landcover.folderlock``).

The "running job" is this test process holding an exclusive ``flock`` on the folder's
``.landcover.lock`` (as a job's rank 0 does), with a temporary file of the kind a job's
atomic writes and scratch maps leave, which a second job used to delete at its start.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import assert_one_line_error, run_cli, train_args


@contextmanager
def held(folder: Path) -> Iterator[None]:
    """An exclusive flock on ``folder/.landcover.lock``, with a holder line in the file."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".landcover.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, b"pid 4242 on node-7\n")
        yield
    finally:
        os.close(fd)


def test_a_second_predict_into_a_held_folder_stops_and_leaves_its_temporaries(
    tiny_data: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    live = out / ".landcover-tmp-live"  # the running job's scratch maps
    args = ("predict", str(tiny_data / "synth_000_naip.tif"), "-k", str(quick_checkpoint))
    with held(out):
        live.mkdir()
        (out / ".summary.json.abc.tmp").write_text("being written")
        result = run_cli(*args, "--out", str(out), "--no-preview")
        assert_one_line_error(
            result, str(out), "another landcover job is writing to this folder (pid 4242 on node-7)"
        )
        assert live.is_dir() and (out / ".summary.json.abc.tmp").is_file()
        assert not list(out.glob("*_class.tif"))
    # the job ended (its lock went with it): the same command runs, and cleans up
    result = run_cli(*args, "--out", str(out), "--no-preview")
    assert result.returncode == 0, result.stderr
    assert (out / "synth_000_naip_class.tif").is_file()
    assert not live.exists() and not (out / ".summary.json.abc.tmp").exists()
    assert not (out / ".landcover.lock").exists()  # a finished job leaves no lock file


def test_a_second_train_into_a_held_run_folder_stops_and_leaves_its_checkpoints(
    tiny_config: Path, tiny_data: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    writing = run / "checkpoints" / ".last.pt.x1.tmp"  # the running job's checkpoint write
    with held(run):
        writing.parent.mkdir(parents=True)
        writing.write_bytes(b"half a checkpoint")
        result = run_cli(*train_args(tiny_config, tiny_data, run), "--workers", "1")
        assert_one_line_error(result, "another landcover job is writing to this folder")
        assert writing.read_bytes() == b"half a checkpoint"
        assert not list((run / "checkpoints").glob("*.pt"))
