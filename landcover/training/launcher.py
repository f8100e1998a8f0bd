"""Starting a training run: checks in the launcher, then one process per worker.

``landcover train`` checks the data's headers before starting anything, then runs the
training worker in-process (``--workers 1``, no DDP), under landcover's elastic launcher
(``--workers N``; ``horovodrun`` with ``--engine horovod``), or directly when an external
launcher (``torchrun``, ``mpirun``, ``horovodrun``, Azure ML) already started this process as
one worker.

Nothing is written to the run folder before the checks that can be made here have passed (the
data's headers, a resume's checkpoint against the settings: :mod:`~landcover.training.resumecheck`);
what this command added to the run folder (the folder itself, if it made it) is removed again
if the run stops before the workers' own checks pass (the data's pixels, the device, the model):
:mod:`~landcover.training.runstart`.
"""

from __future__ import annotations

import logging

from landcover import storage
from landcover.config import Config
from landcover.data.pairs import SplitPairs, data_source, split_pairs
from landcover.data.raster import inspect_pair
from landcover.diskerrors import uncaught_output_error
from landcover.errors import LandcoverError, SignalledError
from landcover.logs import setup_logging
from landcover.parallel.engine import Engine
from landcover.parallel.engines import engine_for
from landcover.parallel.env import DistEnv, env_from_environ
from landcover.parallel.workerreports import report_worker_error
from landcover.synthetic.sample import data_root
from landcover.training.losses import check_terms
from landcover.training.mlflow_log import mlflow_enabled
from landcover.training.mlflow_store import check_tracking_store
from landcover.training.resumecheck import check_resume
from landcover.training.runfolder import RunFolder
from landcover.training.runstart import RunStart

log = logging.getLogger("landcover")


def preflight(config: Config, in_process: bool) -> SplitPairs:
    """Checks the data before workers start: pairs found, and (local data) every header.

    Headers of local or NFS files are read without pixels, when the workers are other
    processes. A worker run in this process reads every pair's pixels next, with the same
    checks (and a refused run's files are removed, :mod:`~landcover.training.runstart`), so
    each file is opened once a process. Remote (blob) files are only listed here: reading
    their headers would download every tile in the launcher, and each worker checks the files
    of its share when it fetches them.

    Args:
        config: The resolved configuration.
        in_process: Whether the only worker runs in this process.

    Returns:
        The training and validation pairs, for a worker in this process.

    Raises:
        DataError: If the data folder has no pairs or a pair is unreadable or inconsistent.
    """
    root = data_root(config.data.root)
    train, val = split_pairs(config.data, root)
    bands = len(config.data.bands)
    pairs = train + val
    size = "remote, checked by each worker"
    if in_process:
        size = "checked as the worker reads them"
    elif not any(storage.is_remote(p.image) or storage.is_remote(p.label) for p in pairs):
        pixels = sum(h * w for h, w in (inspect_pair(p, bands) for p in pairs))
        size = f"{pixels / 1e6:.1f} Mpx"
    log.info(
        "data %s: %d training and %d validation tiles (%s), classes %s (%s)",
        data_source(config.data, root),
        len(train),
        len(val),
        size,
        config.data.classes.name,
        ", ".join(config.data.classes.names),
    )
    return train, val


def train_main(config: Config) -> None:
    """Runs ``landcover train`` with a resolved configuration.

    Args:
        config: The resolved configuration.

    Raises:
        LandcoverError: On any user-fixable problem, in this process or a worker.
    """
    external = env_from_environ()
    if external is not None:
        from landcover.training.worker import run_worker

        try:
            folder = RunFolder(config.run.out, check=False)
            check_resume(config, folder, warn=external.rank == 0)  # before its log starts
            run_worker(config, external, folder)
        except Exception as exc:
            error = exc if isinstance(exc, LandcoverError) else uncaught_output_error(exc)
            if error is None:
                raise
            # started by our own horovodrun launcher: it prints the job's one error line
            if report_worker_error(error, external.rank):
                raise SystemExit(error.exit_code) from None
            if error is exc:
                raise
            raise error from None
        return
    setup_logging(DistEnv(), None)
    engine = engine_for(config.run)  # refuses options the engine cannot honour, before the data
    check_terms(config.optim.loss.terms)  # an unregistered loss term: one line, nothing written
    if mlflow_enabled(config.run):
        check_tracking_store()  # installed and reachable, in seconds, before anything is written
    in_process = config.run.workers == 1 and config.run.nnodes == 1
    pairs = preflight(config, in_process)
    folder = RunFolder(config.run.out, check=False)  # this process's one run folder
    # a checkpoint trained with other settings: one line (and other data: one warning a run)
    check_resume(config, folder, warn=not config.run.node_rank)
    start = RunStart.capture(config.run.out)
    try:
        folder.check()  # a read-only, unwritable or full run folder: one line, now
        _train(config, engine, folder, pairs if in_process else None)
    except SignalledError:  # an interrupted run keeps its logs
        raise
    except Exception:
        if config.run.nnodes == 1:  # refused by the workers' checks: no folder, no log left
            setup_logging(DistEnv(), None)  # closes this process's log file
            start.undo()
        raise


def _train(config: Config, engine: Engine, folder: RunFolder, pairs: SplitPairs | None) -> None:
    """Trains in this process (one worker) or in worker processes, once the checks passed.

    Args:
        config: The resolved configuration.
        engine: The data-parallel engine.
        folder: This process's run folder.
        pairs: The pairs listed by :func:`preflight`, for a worker in this process.
    """
    # the model's libraries (smp, timm, torchvision: 2 s) load once the checks have passed
    from landcover.training.worker import run_worker, worker_entry

    run = config.run
    if run.workers == 1 and run.nnodes == 1:
        run_worker(config, DistEnv(), folder, pairs)
        return
    engine.launch(worker_entry, config)
    log.info("done: run folder %s", run.out)
