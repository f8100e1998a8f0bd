"""Read-only and full destinations: one error line, a non-zero exit, no partial file.

Real processes on real file systems: a read-only bind mount (or, for a non-root user, a
folder without write permission) and a tiny tmpfs filled to a chosen number of free bytes.
Where this machine does not let the test mount, the test is skipped with the reason.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio

from landcover.diskerrors import (
    DiskFullError,
    OutputError,
    check_output_folder,
    human_bytes,
    output_error,
    uncaught_output_error,
)
from landcover.logs import LogFileHandler

from conftest import assert_one_line_error, run_cli, train_args

RAW_NOISE = ("Traceback", "Logging error", "_tiffWriteProc", "_tiffSeekProc", "CPLE_", "ERROR 1")


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


def _umount(folder: Path) -> None:
    if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody may write: a read-only bind mount as root, else mode 555."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    bound = _mount("--bind", str(folder), str(folder))
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here (root ignores chmod): {bound.stderr.strip()}")
    try:
        remount = _mount("-o", "remount,bind,ro", str(folder))
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {remount.stderr.strip()}")
        yield folder
    finally:
        _umount(folder)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """An empty 20 MB tmpfs (fill it with :func:`fill_leaving`)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = _mount("-t", "tmpfs", "-o", "size=20m", "tmpfs", str(folder))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        _umount(folder)


def fill_leaving(disk: Path, free: int) -> None:
    """Fills a tmpfs with one file so that about ``free`` bytes stay free."""
    current = shutil.disk_usage(disk).free
    with open(disk / "filler", "ab") as handle:
        handle.write(b"\0" * max(0, current - free))
    assert abs(shutil.disk_usage(disk).free - free) <= 8192


def assert_clean_failure(result: subprocess.CompletedProcess, *needles: str) -> str:
    """One ``error:`` line with the needles, non-zero exit, no traceback or raw GDAL line."""
    line = assert_one_line_error(result, *needles)
    for noise in RAW_NOISE:
        assert noise not in result.stderr, result.stderr
        assert noise not in result.stdout, result.stdout
    return line


def assert_no_partial_file(folder: Path) -> None:
    """Every file under a final name is complete: rasters read fully, JSON parses."""
    for path in folder.rglob("*"):
        if not path.is_file() or path.name.startswith(".") or path.name == "filler":
            continue
        if path.suffix == ".tif":
            with rasterio.open(path) as ds:
                ds.read()
        elif path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                json.loads(line)


@pytest.fixture
def checkpoint(quick_checkpoint: Path) -> Path:
    """These tests need maps, not good ones: conftest's one-epoch checkpoint."""
    return quick_checkpoint


@pytest.fixture(scope="module")
def tile_512(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 512 px synthetic tile: its scratch maps take about 2.7 MB."""
    from landcover.synthetic.synthetic import write_synthetic_dataset

    folder = tmp_path_factory.mktemp("tile512")
    write_synthetic_dataset(folder, tiles=1, size=512, seed=3, prefix="big")
    return folder / "big_000_naip.tif"


# --- read-only -------------------------------------------------------------------------------


def test_predict_read_only(read_only: Path, tiny_data: Path, checkpoint: Path) -> None:
    out = read_only / "maps"
    tile = str(tiny_data / "synth_000_naip.tif")
    result = run_cli("predict", tile, "--checkpoint", str(checkpoint), "--out", str(out))
    cause = "read-only file system" if os.geteuid() == 0 else "permission denied"
    assert_clean_failure(result, str(out), cause)


def test_train_two_workers_read_only(read_only: Path, tiny_data: Path, tiny_config: Path) -> None:
    out = read_only / "run"
    result = run_cli(*train_args(tiny_config, tiny_data, out, "--epochs", "1", "--workers", "2"))
    cause = "read-only file system" if os.geteuid() == 0 else "permission denied"
    assert_clean_failure(result, str(out), cause)


def test_evaluate_read_only(read_only: Path, tiny_data: Path, checkpoint: Path) -> None:
    out = read_only / "evaluation"
    result = run_cli(
        "evaluate", "--checkpoint", str(checkpoint), "--data", str(tiny_data), "--out", str(out)
    )
    assert_clean_failure(result, str(out))
    assert "mIoU" not in result.stderr  # refused before any work


@pytest.mark.parametrize(
    "command",
    [
        ["data", "synth", "{out}", "--tiles", "1", "--size", "64"],
        ["data", "stats", "{data}", "--out", "{out}/stats.yaml"],
        ["data", "download", "{data}", "{out}"],
    ],
    ids=["synth", "stats", "download"],
)
def test_data_commands_read_only(read_only: Path, tiny_data: Path, command: list[str]) -> None:
    out = read_only / "sub"
    args = [a.format(out=out, data=tiny_data) for a in command]
    result = run_cli(*args)
    assert_clean_failure(result, str(out))


def test_export_read_only(read_only: Path, checkpoint: Path) -> None:
    """Its scratch folder goes beside --out: the folder that cannot be written is named."""
    result = run_cli("export", str(checkpoint), "--out", str(read_only / "model"))
    cause = "read-only file system" if os.geteuid() == 0 else "permission denied"
    line = assert_clean_failure(result, f"cannot write to {read_only}: {cause}")
    assert ".export-" not in line  # not the scratch folder's name
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["predict", "{tile}", "--checkpoint", "{checkpoint}", "--out", "{out}"],
        ["export", "{checkpoint}", "--out", "{out}/model"],
        ["evaluate", "--checkpoint", "{checkpoint}", "--data", "{data}", "--out", "{out}"],
        ["data", "stats", "{data}", "--out", "{out}/stats.yaml"],
        ["data", "synth", "{out}", "--tiles", "1", "--size", "64"],
    ],
    ids=["predict", "export", "evaluate", "stats", "synth"],
)
def test_a_folder_that_cannot_be_made_there_is_one_line(
    tiny_data: Path, checkpoint: Path, command: list[str]
) -> None:
    """No folder can be made under /proc (ENOENT, as under a stale NFS mount): it was a
    FileNotFoundError traceback, where a read-only or full disk was one line."""
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    out = "/proc/landcover-nowhere/sub"
    tile = tiny_data / "synth_000_naip.tif"
    args = [a.format(out=out, data=tiny_data, tile=tile, checkpoint=checkpoint) for a in command]
    assert_clean_failure(run_cli(*args), "cannot write to /proc/landcover-nowhere", "no such file")


# --- a full disk -----------------------------------------------------------------------------


def test_predict_full_disk(tiny_disk: Path, tile_512: Path, checkpoint: Path) -> None:
    out = tiny_disk / "maps"
    args = ("predict", str(tile_512), "--checkpoint", str(checkpoint), "--out", str(out))
    # 0 bytes: the preflight; 1.5 MB: the tile's 2.7 MB of scratch maps cannot fit;
    # 3.3 MB: the scratch maps fit, a later write does not
    for free, needles in [
        (0, ("no space left on device", "0 B free")),
        (1_500_000, ("no space left on device", "needed")),
        (3_300_000, ("no space left on device",)),
    ]:
        shutil.rmtree(out, ignore_errors=True)
        (tiny_disk / "filler").unlink(missing_ok=True)
        fill_leaving(tiny_disk, free)
        result = run_cli(*args)
        assert_clean_failure(result, str(out), *needles)
        assert_no_partial_file(tiny_disk)


def test_predict_disk_full_in_the_writer_thread(
    tiny_disk: Path, tmp_path: Path, checkpoint: Path
) -> None:
    """A 700 px tile passes the preflight (its scratch maps' pixels fit) but its tiled scratch
    files (blocks padded to 768 px) and their overviews do not: the writes fail in predict's
    writer thread, where GDAL has no handler of rasterio's and would print its own lines."""
    from landcover.inference.writers import scratch_bytes
    from landcover.synthetic.synthetic import write_synthetic_dataset

    write_synthetic_dataset(tmp_path, tiles=1, size=700, seed=4, prefix="odd")
    tile = tmp_path / "odd_000_naip.tif"
    need = scratch_bytes(700, 700, 6, "uint8")
    out = tiny_disk / "maps"
    args = ("predict", str(tile), "--checkpoint", str(checkpoint), "--out", str(out))
    for free in (need * 11 // 10, need * 12 // 10, need * 13 // 10):
        shutil.rmtree(out, ignore_errors=True)
        (tiny_disk / "filler").unlink(missing_ok=True)
        fill_leaving(tiny_disk, free)
        result = run_cli(*args)
        assert_clean_failure(result, str(out), "no space left on device")
        assert_no_partial_file(tiny_disk)


def test_train_two_workers_full_disk(tiny_disk: Path, tiny_data: Path, tiny_config: Path) -> None:
    out = tiny_disk / "run"
    # the run starts (the preflight passes); its first checkpoint (about 50 MB) cannot fit
    result = run_cli(*train_args(tiny_config, tiny_data, out, "--epochs", "1", "--workers", "2"))
    line = assert_clean_failure(result, str(out), "no space left on device", "needed")
    assert "checkpoints" in line
    assert not list((out / "checkpoints").glob("*.pt"))
    assert_no_partial_file(tiny_disk)


def test_train_full_disk_preflight(tiny_disk: Path, tiny_data: Path, tiny_config: Path) -> None:
    fill_leaving(tiny_disk, 0)
    out = tiny_disk / "run"
    result = run_cli(*train_args(tiny_config, tiny_data, out, "--epochs", "1", "--workers", "2"))
    assert_clean_failure(result, str(out), "no space left on device", "0 B free")
    assert "starting 2 workers" not in result.stderr  # refused before any worker started


def test_evaluate_full_disk(tiny_disk: Path, tiny_data: Path, checkpoint: Path) -> None:
    out = tiny_disk / "evaluation"
    args = ("evaluate", "--checkpoint", str(checkpoint), "--data", str(tiny_data), "--out")
    # 0 bytes: the preflight; 16 kB: metrics.json fits, confusion.png (about 50 kB) does not
    for free in (0, 16_384):
        shutil.rmtree(out, ignore_errors=True)
        (tiny_disk / "filler").unlink(missing_ok=True)
        fill_leaving(tiny_disk, free)
        result = run_cli(*args, str(out))
        assert_clean_failure(result, str(out), "no space left on device")
        assert not (out / "confusion.png").exists()
        assert_no_partial_file(tiny_disk)


def test_evaluate_rerun_on_a_full_disk_keeps_the_earlier_set(
    tiny_disk: Path, tiny_data: Path, checkpoint: Path
) -> None:
    """metrics.json, confusion.csv and confusion.png describe one run: a rerun that runs out
    of room (metrics.json would fit, the PNG not) leaves the earlier three as they were."""
    out = tiny_disk / "evaluation"
    args = ("evaluate", "--checkpoint", str(checkpoint), "--data", str(tiny_data), "--out")
    assert run_cli(*args, str(out)).returncode == 0
    names = ("metrics.json", "confusion.csv", "confusion.png")
    before = {name: (out / name).read_bytes() for name in names}
    fill_leaving(tiny_disk, 16_384)
    result = run_cli(*args, str(out))
    assert_clean_failure(result, str(out), "no space left on device")
    assert {name: (out / name).read_bytes() for name in names} == before
    assert not list(out.glob(".*.tmp"))


def test_a_tile_larger_than_the_whole_disk_fails_alone(
    tiny_disk: Path, tiny_data: Path, checkpoint: Path, tmp_path: Path
) -> None:
    """A tile whose scratch maps need more than the disk holds can never be mapped there: it
    fails with its own line, and the job maps the tiles that fit (a full disk, by contrast,
    stops the job)."""
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    shutil.copy(tiny_data / "synth_000_naip.tif", tiles)
    with rasterio.open(tiny_data / "synth_000_naip.tif") as src:
        profile = {**src.profile, "width": 3000, "height": 3000, "compress": "deflate"}
    with rasterio.open(tiles / "huge_naip.tif", "w", **profile) as dst:  # 9 Mpx, mostly 0
        dst.write(np.full((4, 3000, 3000), 90, dtype=np.uint8))
    out = tiny_disk / "maps"
    result = run_cli("predict", str(tiles), "-k", str(checkpoint), "--out", str(out))
    assert_clean_failure(result, "1 of 2 tiles failed", "huge_naip", "more than the whole disk")
    assert (out / "synth_000_naip_class.tif").exists()
    assert_no_partial_file(tiny_disk)


def test_synth_full_disk(tiny_disk: Path) -> None:
    out = tiny_disk / "synth"
    for free in (0, 1_000_000):  # the preflight; then room for a few of the 8 pairs
        shutil.rmtree(out, ignore_errors=True)
        (tiny_disk / "filler").unlink(missing_ok=True)
        fill_leaving(tiny_disk, free)
        result = run_cli("data", "synth", str(out), "--tiles", "8", "--size", "256")
        assert_clean_failure(result, str(out), "no space left on device")
        assert len(list(out.glob("*.tif"))) < 16 if out.exists() else True
        assert_no_partial_file(tiny_disk)


# --- the pieces ------------------------------------------------------------------------------


def test_output_error_names_folder_and_cause(tmp_path: Path) -> None:
    full = output_error(OSError(errno.ENOSPC, "No space left on device"), tmp_path, 3_000_000)
    assert isinstance(full, DiskFullError)
    assert str(tmp_path) in str(full) and "about 3.0 MB needed" in str(full)
    read_only = output_error(OSError(errno.EROFS, "Read-only file system"), tmp_path)
    assert isinstance(read_only, OutputError) and "read-only file system" in str(read_only)
    gdal_text = RuntimeError("TIFFWriteEncodedTile: No space left on device")
    assert isinstance(output_error(gdal_text, tmp_path), DiskFullError)
    assert output_error(OSError(errno.ENOENT, "No such file"), tmp_path) is None
    assert output_error(ValueError("bad"), tmp_path) is None
    uncaught = uncaught_output_error(PermissionError(errno.EACCES, "denied", "/x/y.json"))
    assert uncaught is not None and str(uncaught) == "cannot write to /x/y.json: permission denied"
    assert human_bytes(512) == "512 B" and human_bytes(2_500_000) == "2.5 MB"


def test_check_output_folder_refuses_too_little_room(tmp_path: Path) -> None:
    check_output_folder(tmp_path / "new" / "folder")
    assert (tmp_path / "new" / "folder").is_dir()
    assert not list((tmp_path / "new" / "folder").iterdir())  # the probe is gone
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(DiskFullError, match="needed"):
        check_output_folder(tmp_path, need=free * 2)
    check_output_folder("az://container/prefix")  # blob URLs are not checked here
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="it is a file, not a folder"):
        check_output_folder(tmp_path / "file")


class _FullStream:
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        pass


def test_log_file_handler_reports_once_and_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    handler = LogFileHandler(tmp_path / "rank0.log")
    handler.stream.close()
    handler.stream = _FullStream()  # type: ignore[assignment]
    logger = logging.getLogger("landcover.test.fulllog")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for i in range(8):
            logger.warning("line %d", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], err
    assert handler.failed


def test_gdal_write_failure_is_quiet(tiny_disk: Path, capfd: pytest.CaptureFixture) -> None:
    """A GeoTIFF that cannot fit: one DiskFullError, nothing printed by libtiff or GDAL."""
    from landcover.synthetic.tiffile import write_tif

    fill_leaving(tiny_disk, 200_000)
    profile = {"driver": "GTiff", "width": 1024, "height": 1024, "count": 4, "dtype": "uint8"}
    profile.update(crs="EPSG:26918", transform=rasterio.transform.from_origin(0, 1024, 1, 1))
    noise = np.random.default_rng(0).integers(0, 255, (4, 1024, 1024), dtype=np.uint8)
    with pytest.raises(DiskFullError, match=str(tiny_disk)):
        write_tif(tiny_disk / "x.tif", noise, profile, ["r", "g", "b", "nir"])
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == "", captured.err
    assert not (tiny_disk / "x.tif").exists()
    assert [p.name for p in tiny_disk.iterdir()] == ["filler"]
