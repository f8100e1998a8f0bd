"""Shared fixtures: tiny real GeoTIFF datasets, a tiny model config, and a CLI runner."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import numpy as np
import pytest
import rasterio
import yaml
from rasterio.enums import ColorInterp
from rasterio.transform import Affine

from landcover.synthetic.synthetic import write_synthetic_dataset

REPO = Path(__file__).resolve().parents[1]

# The Ctrl-C tests need SIGINT handled. A shell without job control starts a background
# command with SIGINT ignored (`cmd &`, `nohup`), and every process the tests start would
# inherit that: their SIGINT would be lost, not tested. Handled here, it is SIG_DFL in them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

TINY_CONFIG = {
    "data": {"patch_size": 64, "val_fraction": 0.25},
    "model": {"encoder": "resnet18", "encoder_depth": 3, "decoder_channels": [32, 16, 8]},
    "optim": {
        "lr": 0.003,
        "batch_size": 4,
        "samples_per_epoch": 32,
        "epochs": 2,
        "warmup_epochs": 0.5,
    },
    "run": {"device": "cpu", "log_every_s": 1.0, "keep_last": 5},
}


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight synthetic 128 px pairs (six for training, two for validation)."""
    folder = tmp_path_factory.mktemp("tiny_data")
    write_synthetic_dataset(folder, tiles=8, size=128, seed=7)
    return folder


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A YAML config with a tiny U-Net and tiny epochs, so CLI runs take seconds."""
    path = tmp_path_factory.mktemp("configs") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_CONFIG))
    return path


def write_naip_tile(
    path: Path,
    image: np.ndarray,
    crs: str | None,
    pixel: float,
    corner: tuple[float, float],
    **options: object,
) -> Path:
    """Writes a 4-band uint8 NAIP-like GeoTIFF (no-data 0) with its top-left ``corner``.

    Args:
        path: The file to write.
        image: The bands, ``(4, height, width)`` uint8.
        crs: Its CRS (None: not georeferenced in a CRS).
        pixel: The pixel size in CRS units.
        corner: The top-left corner ``(x, y)``.
        **options: GDAL creation options (``compress="deflate"``, ``tiled=True``, ...).

    Returns:
        ``path``.
    """
    _, height, width = image.shape
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        height=height,
        width=width,
        count=4,
        dtype="uint8",
        crs=crs,
        transform=Affine(pixel, 0, corner[0], 0, -pixel, corner[1]),
        nodata=0,
        **options,
    ) as ds:
        ds.write(image)
    return path


def write_with_alpha_band(
    path: Path, image: np.ndarray, alpha: np.ndarray, crs: str, transform: Affine
) -> Path:
    """Writes bands and one more tagged alpha, as ``gdalwarp -dstalpha`` writes 4-band NAIP.

    Args:
        path: The file to write.
        image: The bands, ``(C, height, width)`` uint8 (RGB first).
        alpha: ``(height, width)`` uint8: 0 where the image has no data.
        crs: Its CRS.
        transform: Its geotransform.

    Returns:
        ``path``.
    """
    count, height, width = image.shape
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        height=height,
        width=width,
        count=count + 1,
        dtype="uint8",
        crs=crs,
        transform=transform,
        photometric="RGB",
    ) as ds:
        ds.colorinterp = [*ds.colorinterp[:count], ColorInterp.alpha]  # (before the pixels)
        ds.write(np.concatenate([image, alpha[None]]))
    with rasterio.open(path) as ds:  # GDAL itself takes no mask from it
        assert ds.colorinterp[count] == ColorInterp.alpha and ds.dataset_mask().all()
    return path


def train_args(config: Path, data: Path, out: Path, *extra: str) -> list[str]:
    """The ``train --config C --data D --out O ...`` argument list of a CLI training run."""
    return ["train", "--config", str(config), "--data", str(data), "--out", str(out), *extra]


# Commands run_cli runs in this process (the CLI's own main, no interpreter start): those of
# one process. Launching workers or nodes, another environment, torch.compile, blob transfers
# and LANDCOVER_TEST_SUBPROCESS=1 keep a real subprocess.
_HERE = {("predict",), ("evaluate",), ("train",), ("data", "stats"), ("data", "check")}
_HERE |= {("data", "prepare"), ("data", "synth"), ("cluster", "plan"), ("export",)}
_NOT_HERE = ("--nnodes", "--engine", "--compile", "--rdzv-endpoint", "--node-rank")


def _runs_here(args: tuple[str, ...], env: dict | None) -> bool:
    """Whether ``landcover ARGS`` is a one-process command run_cli may run in this process."""
    if env or os.environ.get("LANDCOVER_TEST_SUBPROCESS") or not args:
        return False
    if tuple(args[:1]) not in _HERE and tuple(args[:2]) not in _HERE:
        return False
    if any(a in _NOT_HERE or a.startswith(_NOT_HERE) for a in args):
        return False
    workers = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--workers"]
    if args[0] == "train" and not workers:
        return _one_worker_train(args)
    return all(w == "1" for w in workers)


def _one_worker_train(args: tuple[str, ...]) -> bool:
    """Whether a ``train`` with no ``--workers`` trains one worker (the default), i.e. neither
    a ``--set run.*`` nor its ``--config`` file's ``run`` section changes the process layout
    (a file that is missing or not YAML fails before any worker starts)."""
    sets = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--set"]
    if any(v.startswith("run.") for v in sets):
        return False
    layout = {"workers", "nnodes", "workers_per_node", "engine", "compile"}
    for path in (args[i + 1] for i, a in enumerate(args[:-1]) if a == "--config"):
        try:
            run = yaml.safe_load(Path(path).read_text()).get("run")
        except (OSError, UnicodeDecodeError, RuntimeError, yaml.YAMLError, AttributeError):
            continue
        if isinstance(run, dict) and layout & set(run):
            return False
    return True


def _run_here(args: tuple[str, ...]) -> subprocess.CompletedProcess:
    """Runs ``landcover ARGS`` through the CLI's own ``main`` in this process.

    The exit code, stdout and stderr are those the command would give as a process: ``main``'s
    ``SystemExit`` code, and an uncaught exception's traceback on stderr with code 1 (as
    Python prints it). What C libraries print straight to file descriptors 1 and 2 (GDAL's
    ``ERROR 1: ...``, libtiff's messages) is captured too, after Python's own output. The
    working folder, environment, argv, torch's thread count and the signal handlers are put
    back afterwards.
    """
    import contextlib
    import io
    import tempfile
    import traceback

    import torch

    from landcover import cli

    out, err = io.StringIO(), io.StringIO()
    saved = (os.getcwd(), dict(os.environ), list(sys.argv), torch.get_num_threads())
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        os.chdir(REPO)
        os.environ["PYTHONUNBUFFERED"] = "1"
        sys.argv = ["landcover", *args]
        with (
            tempfile.TemporaryFile() as c_out,
            tempfile.TemporaryFile() as c_err,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            sys.__stdout__.flush()
            sys.__stderr__.flush()
            kept = os.dup(1), os.dup(2)
            os.dup2(c_out.fileno(), 1)
            os.dup2(c_err.fileno(), 2)
            try:
                cli.main()
            except SystemExit as exc:
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            except BaseException:  # what Python prints for an uncaught exception
                traceback.print_exc()
                code = 1
            finally:
                os.dup2(kept[0], 1)
                os.dup2(kept[1], 2)
                os.close(kept[0])
                os.close(kept[1])
            for stream, raw in ((out, c_out), (err, c_err)):
                raw.seek(0)
                stream.write(raw.read().decode(errors="replace"))
    finally:
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
        sys.argv = saved[2]
        torch.set_num_threads(saved[3])
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return subprocess.CompletedProcess(["landcover", *args], code, out.getvalue(), err.getvalue())


def run_cli(
    *args: str, timeout: float = 300, env: dict | None = None, one_core: bool = False
) -> subprocess.CompletedProcess:
    """Runs ``landcover ARGS`` and captures its exit code and output.

    A command of one process runs through the CLI's ``main`` in this process (no interpreter
    and torch start, see :func:`_runs_here`); any other, or any with ``one_core``, as a real
    ``python -m landcover`` subprocess. ``one_core`` pins it to one core of this process's
    affinity mask, as Slurm's cpusets or ``taskset`` pin a job.
    """
    if not one_core and _runs_here(args, env):
        return _run_here(args)
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    first = min(os.sched_getaffinity(0))
    return subprocess.run(
        [sys.executable, "-m", "landcover", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=REPO,
        preexec_fn=(lambda: os.sched_setaffinity(0, {first})) if one_core else None,
    )


def start_cli(
    *args: str, env: dict | None = None, prefix: list[str] | None = None
) -> subprocess.Popen:
    """Starts ``python -m landcover ARGS`` in its own session (so a test can kill the group).

    ``prefix`` runs it through another command (``ip netns exec NS``, say).
    """
    return subprocess.Popen(
        [*(prefix or []), sys.executable, "-m", "landcover", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=True,
    )


def interrupt_when(
    proc: subprocess.Popen, ready: Callable[[], bool], timeout: float = 120
) -> tuple[str, str]:
    """Sends Ctrl-C (SIGINT to its process group) to a :func:`start_cli` command once
    ``ready()`` holds, and waits for it to end (killed if it outlives the test).

    Returns:
        Its stdout and stderr.
    """
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def spawned_children(pid: int | str = "self") -> list[int]:
    """A process's children that are spawned Python processes (``spawn_main``): workers."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with suppress(OSError):  # ended meanwhile
                if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text():
                    found.append(int(child))
    return found


def wait_for_log(
    path: Path, pattern: str, proc: subprocess.Popen, timeout: float = 240, poll: float = 0.1
) -> re.Match:
    """Waits until ``pattern`` appears in the log file ``path`` of a running command."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.is_file():
            match = re.search(pattern, path.read_text())
            if match:
                return match
        if proc.poll() is not None:
            raise AssertionError(f"the command ended early: {proc.stderr.read()}")
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {pattern!r} in {path}")


def replica_digest(run: Path, rank: int) -> str:
    """The final-weights digest a rank of a 2-worker run logged in its replica check."""
    match = re.search(
        r"weights identical on all 2 worker\(s\) \(sha256 (\w+)\)",
        (run / "logs" / f"rank{rank}.log").read_text(),
    )
    assert match
    return match.group(1)


def relabel_in_albers(label: Path, resolution: float | None = None) -> None:
    """Rewrites a label raster in place in Albers (EPSG:5070, like the Bay-wide files), nearest.

    Args:
        label: The label GeoTIFF (one uint8 band, no-data 15).
        resolution: Pixel size in the new CRS (default: GDAL's choice, about the old one).
    """
    import numpy as np
    import rasterio
    from rasterio.warp import Resampling, calculate_default_transform, reproject

    with rasterio.open(label) as ds:
        codes, src_crs, src_transform, profile = ds.read(1), ds.crs, ds.transform, ds.profile
        dst_transform, width, height = calculate_default_transform(
            src_crs, "EPSG:5070", ds.width, ds.height, *ds.bounds, resolution=resolution
        )
    albers = np.full((height, width), 15, dtype=np.uint8)
    reproject(
        codes,
        albers,
        src_transform=src_transform,
        src_crs=src_crs,
        dst_transform=dst_transform,
        dst_crs="EPSG:5070",
        dst_nodata=15,
        resampling=Resampling.nearest,
    )
    label.unlink()
    profile.update(
        crs="EPSG:5070", transform=dst_transform, width=width, height=height, tiled=False
    )
    profile.pop("blockxsize", None)
    profile.pop("blockysize", None)
    with rasterio.open(label, "w", **profile) as ds:
        ds.write(albers, 1)


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Asserts a non-zero exit with a one-line ``error:`` message and no traceback."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def one_worker_config(config: Path, data: Path, out: Path, epochs: int, samples: int):
    """The config ``landcover train --config C --data D --out O --workers 1 --epochs E
    --samples-per-epoch S`` loads (a :class:`landcover.config.Config`)."""
    from landcover.config import load_config

    flags = {
        "data.root": str(data),
        "run.out": str(out),
        "optim.epochs": epochs,
        "optim.samples_per_epoch": samples,
        "run.workers": 1,
    }
    return load_config(config, flags)


def train_here(config) -> Path:
    """Trains a one-worker ``config`` in this process (:func:`one_worker_config`).

    The launcher's own entry point, as the CLI calls it for one worker; torch's thread count
    is put back afterwards (the worker sets it to every core).

    Returns:
        The run folder.
    """
    import torch

    from landcover.training.launcher import train_main

    threads = torch.get_num_threads()
    try:
        train_main(config)
    finally:
        torch.set_num_threads(threads)
    return Path(config.run.out)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build) -> Path:
    """A folder every test process of this run shares, built by the first to need it.

    Under pytest-xdist each process has its own session fixtures; a folder that costs a
    training is built once for the whole run instead (the others wait on a file lock, then
    read it). The folder is read-only to the tests.

    Args:
        tmp_path_factory: pytest's factory (its base folder's parent is common to the run).
        name: The folder's name.
        build: Builds the folder: ``build(folder)``.

    Returns:
        The folder.
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "built-once" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        done = folder.with_name(name + ".done")
        if not done.exists():
            build(folder)
            done.touch()
    return folder


def _shared_tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny data (as :func:`tiny_data` writes it) in a folder all test processes share."""
    return built_once(
        tmp_path_factory,
        "tiny-data",
        lambda f: write_synthetic_dataset(f, tiles=8, size=128, seed=7),
    )


@pytest.fixture(scope="session")
def trained_run(tiny_config: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with a tiny model trained on the tiny data (about 85 % pixel accuracy)."""
    data = _shared_tiny_data(tmp_path_factory)

    def build(folder: Path) -> None:
        train_here(one_worker_config(tiny_config, data, folder, epochs=8, samples=128))

    return built_once(tmp_path_factory, "trained", build)


@pytest.fixture(scope="session")
def quick_checkpoint(tiny_config: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of one short epoch, for tests that need a valid model, not a good one."""
    data = _shared_tiny_data(tmp_path_factory)

    def build(folder: Path) -> None:
        train_here(one_worker_config(tiny_config, data, folder, epochs=1, samples=32))

    return built_once(tmp_path_factory, "quick", build) / "checkpoints" / "last.pt"


@pytest.fixture(scope="session")
def checkpoint(trained_run: Path) -> Path:
    """The tiny trained model's last checkpoint."""
    return trained_run / "checkpoints" / "last.pt"


from azurite import azurite, azurite_private, no_azure_env  # noqa: F401,E402

# The files that take longest, longest first (seconds of one test process, on 2 loaded cores,
# 2026-11-28; docs/tests.md). Under pytest-xdist's --dist loadfile a process takes a whole
# file, and xdist deals the files with the most tests first unless --no-loadscope-reorder
# (scripts/test.sh passes it): a long file of few tests then came last and one process ran it
# alone while the other sat idle. Dealt first, the many short files even out the end.
SLOWEST_FILES_FIRST = (
    "tests/parallel/test_scale_out.py",  # 492 s
    "tests/mapping/test_predict_job.py",  # 462 s
    "tests/cli/test_redaction.py",  # 365 s
    "tests/parallel/test_horovod.py",  # 269 s
    "tests/training/test_compile.py",  # 215 s
    "tests/storage/test_blob_training.py",  # 173 s
    "tests/inference/test_predict.py",  # 161 s
    "tests/data/test_data_stats.py",  # 139 s
    "tests/export/test_export_architectures.py",  # 70 s alone (10 exports and 20 region jobs)
    "tests/cli/test_bad_input.py",
    "tests/training/test_mlflow.py",
    "tests/cli/test_usage_errors.py",
    "tests/training/test_train_cli.py",
    "tests/training/test_train_refusals.py",
    "tests/training/test_resume.py",
    "tests/parallel/test_ddp.py",
    "tests/training/test_profiling.py",
    "tests/cli/test_interrupts.py",
    "tests/cli/test_early_refusals.py",
    "tests/models/test_weights.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Puts the slowest files first (:data:`SLOWEST_FILES_FIRST`), the rest in their order."""
    rank = {name: i for i, name in enumerate(SLOWEST_FILES_FIRST)}
    last = len(rank)

    def place(item: pytest.Item) -> int:
        try:
            name = item.path.relative_to(REPO).as_posix()
        except ValueError:
            return last
        return rank.get(name, last)

    items.sort(key=place)  # stable: a file's tests and the other files keep their order


def pytest_terminal_summary(terminalreporter) -> None:
    """Prints the figures tests measured but do not assert (``record_property("figure", ...)``):
    timings on a shared CI machine, which the run's log keeps (under pytest-xdist too)."""
    figures = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "figure"
    ]
    if figures:
        terminalreporter.section("figures measured")
        for figure in figures:
            terminalreporter.write_line(figure)
