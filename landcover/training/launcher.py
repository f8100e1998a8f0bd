"""Starting a training run: checks in the launcher, then one process per worker.

``landcover train`` checks the data's headers before starting anything, then runs the
training worker in-process (``--workers 1``, no DDP), under landcover's elastic launcher
(``--workers N``; ``horovodrun`` with ``--engine horovod``), or directly when an external
launcher (``torchrun``, ``mpirun``, ``horovodrun``, Azure ML) already started this process as
one worker.
"""

from __future__ import annotations

import hashlib
import logging

from landcover import storage
from landcover.config import Config
from landcover.data.pairs import split_pairs
from landcover.data.raster import inspect_pair
from landcover.data.sample import data_root
from landcover.distributed import DistEnv, env_from_environ
from landcover.errors import LandcoverError
from landcover.launch import launch_workers, report_worker_error
from landcover.logs import setup_logging
from landcover.training.trainer import run_worker, worker_entry

log = logging.getLogger("landcover")


def preflight(config: Config) -> None:
    """Checks the data before workers start: pairs found, and (local data) every header.

    Headers of local or NFS files are read without pixels. Remote (blob) files are only
    listed here: reading their headers would download every tile in the launcher, and each
    worker checks the files of its share when it fetches them.

    Args:
        config: The resolved configuration.

    Raises:
        DataError: If the data folder has no pairs or a pair is unreadable or inconsistent.
    """
    root = data_root(config.data.root)
    train, val = split_pairs(config.data, root)
    bands = len(config.data.bands)
    pairs = train + val
    size = "remote, checked by each worker"
    if not any(storage.is_remote(p.image) or storage.is_remote(p.label) for p in pairs):
        pixels = sum(h * w for h, w in (inspect_pair(p, bands) for p in pairs))
        size = f"{pixels / 1e6:.1f} Mpx"
    log.info(
        "data %s: %d training and %d validation tiles (%s), classes %s (%s)",
        root,
        len(train),
        len(val),
        size,
        config.data.classes.name,
        ", ".join(config.data.classes.names),
    )


def train_main(config: Config) -> None:
    """Runs ``landcover train`` with a resolved configuration.

    Args:
        config: The resolved configuration.

    Raises:
        LandcoverError: On any user-fixable problem, in this process or a worker.
    """
    external = env_from_environ()
    if external is not None:
        try:
            run_worker(config, external)
        except LandcoverError as exc:
            # started by our own horovodrun launcher: it prints the job's one error line
            if report_worker_error(exc, external.rank):
                raise SystemExit(exc.exit_code) from None
            raise
        return
    setup_logging(DistEnv(), None)
    preflight(config)
    run = config.run
    if run.workers == 1 and run.nnodes == 1:
        run_worker(config, DistEnv())
        return
    if run.engine == "horovod":
        from landcover.launch_horovod import launch_horovod

        log.info("starting %d workers (horovodrun, Gloo controller)", run.workers)
        launch_horovod(config, run.workers)
        log.info("done: run folder %s", run.out)
        return
    if run.nnodes > 1:
        log.info(
            "starting %d workers on this node of %d (c10d rendezvous at %s)",
            run.nproc_per_node,
            run.nnodes,
            run.rdzv_endpoint,
        )
    else:
        log.info("starting %d workers (torch elastic agent, c10d rendezvous)", run.workers)
    run_id = run.rdzv_id or "landcover-" + hashlib.sha256(run.out.encode()).hexdigest()[:12]
    launch_workers(
        worker_entry,
        (config.to_dict(),),
        nproc=run.nproc_per_node,
        nnodes=run.nnodes,
        rdzv_endpoint=run.rdzv_endpoint or "localhost:0",
        run_id=run_id,
        max_restarts=run.max_restarts,
        is_rdzv_host=None if run.node_rank is None else run.node_rank == 0,
        rdzv_timeout_s=run.rdzv_timeout_s,
        local_addr=run.local_addr,
    )
    log.info("done: run folder %s", run.out)
