"""The training worker process: bind the device, join the engine, train, leave.

A failed collective caused by another worker (it died, hung or became unreachable) becomes one
:class:`~landcover.errors.PeerFailureError` line; any other error, a local CUDA or NCCL fault
included, keeps its traceback (:func:`~landcover.parallel.failures.is_peer_failure`).
"""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack
from typing import Any

import torch

from landcover.allocator import tune_allocator
from landcover.config import Config, config_from_dict
from landcover.data.pairs import SplitPairs
from landcover.errors import PeerFailureError, first_line
from landcover.folderlock import folder_lock
from landcover.logs import setup_logging
from landcover.parallel.devices import resolve_device
from landcover.parallel.engines import engine_for
from landcover.parallel.env import DistEnv, env_from_environ
from landcover.parallel.failures import is_peer_failure
from landcover.threads import core_share
from landcover.training.runfolder import RunFolder
from landcover.training.trainer import Trainer

log = logging.getLogger("landcover")


def run_worker(
    config: Config, env: DistEnv, folder: RunFolder | None = None, pairs: SplitPairs | None = None
) -> dict[str, Any]:
    """Runs one training worker: binds its device, joins the job, trains, leaves.

    Args:
        config: The resolved configuration.
        env: The worker's place.
        folder: The process's run folder, when the launcher runs in this process (else it is
            built here, once a process).
        pairs: The training and validation pairs, when the launcher listed them in this
            process.

    Returns:
        The last epoch's record as plain data (empty if there was nothing to do).

    Raises:
        PeerFailureError: If a collective failed because another worker did.
    """
    run_folder = folder or RunFolder(config.run.out)
    run_folder.check()
    setup_logging(env, run_folder.local)
    threads = config.run.threads_per_worker or core_share(env.local_world_size)
    torch.set_num_threads(threads)
    engine = engine_for(config.run)
    device = resolve_device(config.run.device, env)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    log.info(
        "rank %d/%d: pid %d, local rank %d, %d threads, device %s, backend %s%s",
        env.rank,
        env.world_size,
        os.getpid(),
        env.local_rank,
        threads,
        device,
        engine.backend(config.run, device),
        f", restart {restart} of the worker group" if restart else "",
    )
    engine.join(env, config.run, device)
    lock = ExitStack()
    try:
        if env.rank == 0:  # the worker that cleans the run folder's temporaries
            lock.enter_context(folder_lock(run_folder.local))
        record = Trainer(config, env, engine, device, folder=run_folder, pairs=pairs).run()
        return record.to_dict() if record is not None else {}
    except Exception as exc:
        if not is_peer_failure(exc):
            raise
        first = first_line(exc, 200)
        raise PeerFailureError(
            f"rank {env.rank}: a collective operation failed ({first}); a peer worker died, "
            f"hung or did not answer within run.timeout_s={config.run.timeout_s:g} s"
        ) from None
    finally:
        lock.close()
        engine.leave()


def worker_entry(config_dict: dict[str, Any]) -> dict[str, Any]:
    """Entry point of a worker process started by landcover's launcher.

    Args:
        config_dict: The resolved configuration as plain data.

    Returns:
        The last epoch's metrics record.
    """
    tune_allocator()
    env = env_from_environ() or DistEnv()
    return run_worker(config_from_dict(config_dict), env)
