"""Starting worker processes through torchrun's elastic agent (torch.distributed's launcher API).

:func:`launch_workers` runs a function in ``nproc`` processes per node with c10d rendezvous,
restarts the group up to ``max_restarts`` times after a failure, and turns a failed worker into
one :class:`~landcover.errors.LandcoverError` line: the worker's own message when it failed on
a user-fixable problem, otherwise which rank died and how.

Why not only torch's ``@record`` error files: torch records each failed worker's exception and
picks the first to fail by time. A job whose worker hit bad data takes its peers down with it
(their collectives fail a moment later, sometimes first), so the launcher needs to know which
failures are *causes* (a worker's own :class:`~landcover.errors.LandcoverError`) and which are
*consequences* (:class:`~landcover.errors.PeerFailureError`); the workers file them apart
(``rank{N}.cause.txt`` / ``rank{N}.peer.txt``), and torch's own record (exit code, signal, error
message) explains the rest. A worker's crash (a bug, not bad input) is filed the same way,
redacted, as ``rank{N}.crash.txt`` and the worker exits with code 1: left to torch's
``record``, the exception's unredacted text (a SAS URL in it, say) would go into torch's error
file and its report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch.distributed.elastic.metrics import MetricData, MetricHandler

from landcover.config import RunConfig
from landcover.errors import LandcoverError, SignalledError, first_line
from landcover.parallel.sigint import ELASTIC_SIGNALS, sigint_deferred_in_workers
from landcover.parallel.workerreports import (
    ERROR_DIR_ENV,
    describe_exit,
    failure_message,
    run_guarded,
)

log = logging.getLogger("landcover")

_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")


class _WorkerFailures(logging.Handler):
    """Turns torch elastic's note of a failed worker into one landcover line.

    torch publishes which worker failed and how only in its log text (the agent's run result
    reaches the caller only at the end of the job, after any restarts), so this one line of
    its log is read.
    """

    def emit(self, record: logging.LogRecord) -> None:
        failed = _FAILED.search(record.getMessage())
        if failed:
            code, local_rank, pid = (int(g) for g in failed.groups())
            what = describe_exit(code)
            log.warning("worker local rank %d (pid %d) %s", local_rank, pid, what)


class _RestartNotices(MetricHandler):
    """Announces each restart of the worker group, from torch elastic's own metrics.

    The agent publishes ``workers.<role>.remaining_restarts`` and then the group's state
    (``workers.<role>.failed`` or ``.unhealthy``) at every health check; a failed state with
    restarts remaining is a restart (torch's ``SimpleElasticAgent._invoke_run``).

    Args:
        max_restarts: The restarts the agent may make.
    """

    def __init__(self, max_restarts: int) -> None:
        self.max_restarts = max_restarts
        self.remaining = max_restarts

    def emit(self, metric_data: MetricData) -> None:
        """Reads one metric the agent published.

        Args:
            metric_data: Its name (e.g. ``workers.default.remaining_restarts``) and value.
        """
        name, value = metric_data.name, int(metric_data.value)
        if name.endswith(".remaining_restarts"):
            self.remaining = value
        elif name.endswith((".failed", ".unhealthy")) and value and self.remaining > 0:
            log.warning(
                "restarting the worker group (restart %d of %d); workers resume from the last "
                "checkpoint",
                self.max_restarts - self.remaining + 1,
                self.max_restarts,
            )


def _shutdown_timeout(config_type: type, seconds: int) -> dict[str, int]:
    """The ``shutdown_timeout`` keyword of ``LaunchConfig``, where this torch has it.

    torch 2.11 and earlier refuse it, and give workers a fixed 30 s between SIGTERM and
    SIGKILL; torch 2.14 takes it.
    """
    names = {f.name for f in dataclasses.fields(config_type)}
    return {"shutdown_timeout": seconds} if "shutdown_timeout" in names else {}


def _signals_to_handle(config_type: type) -> dict[str, str]:
    """The ``signals_to_handle`` keyword of ``LaunchConfig``: the signals torch elastic handles.

    SIGINT and SIGTERM are :mod:`.sigint`'s while the workers are launched (it holds one that
    comes while they start); ``elastic_launch`` writes this value into the environment
    variable torch elastic reads, over the one :mod:`.sigint` set, so it is passed here too.
    """
    names = {f.name for f in dataclasses.fields(config_type)}
    return {"signals_to_handle": ELASTIC_SIGNALS} if "signals_to_handle" in names else {}


def launch_workers(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    nproc: int,
    *,
    nnodes: int = 1,
    rdzv_endpoint: str = "localhost:0",
    run_id: str | None = None,
    max_restarts: int = 0,
    monitor_interval: float = 0.5,
    is_rdzv_host: bool | None = None,
    local_addr: str | None = None,
    rdzv_timeout_s: float = 600.0,
) -> dict[int, Any]:
    """Runs ``fn(*args)`` in ``nproc`` worker processes under torchrun's elastic agent.

    Each worker gets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
    ``MASTER_PORT`` in its environment.

    Args:
        fn: A module-level function (it is pickled to spawned processes).
        args: Its arguments (picklable).
        nproc: Workers on this node.
        nnodes: Nodes in the job (each runs one agent).
        rdzv_endpoint: ``host:port`` of the c10d rendezvous; ``localhost:0`` for one node.
        run_id: Rendezvous id shared by the nodes' agents.
        max_restarts: Times the agent restarts the worker group after a failure.
        monitor_interval: Seconds between the agent's health checks.
        is_rdzv_host: Whether this agent hosts the rendezvous store (None: torch decides by
            the endpoint's host name).
        local_addr: This node's address for the other nodes (None: its host name).
        rdzv_timeout_s: How long the nodes wait for each other at the rendezvous (at most
            60 s of it for one read from the rendezvous store).

    Returns:
        Each global rank's return value.

    Raises:
        LandcoverError: If a worker fails and restarts are exhausted.
    """
    from torch.distributed.elastic import metrics
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    elastic = logging.getLogger("torch.distributed.elastic")
    elastic.setLevel(logging.INFO)
    elastic.propagate = False
    for handler in list(elastic.handlers):
        elastic.removeHandler(handler)
    elastic.addHandler(_WorkerFailures())
    metrics.configure(_RestartNotices(max_restarts), group="torchelastic")
    # its "Terminating process ... via SIGTERM" notes are the shutdown we report ourselves
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="landcover-launch-") as tmp:
        error_dir = Path(tmp, "errors")
        error_dir.mkdir()
        config = LaunchConfig(
            min_nodes=nnodes,
            max_nodes=nnodes,
            nproc_per_node=nproc,
            run_id=run_id or uuid.uuid4().hex,
            rdzv_backend="c10d",
            rdzv_endpoint=rdzv_endpoint,
            max_restarts=max_restarts,
            monitor_interval=monitor_interval,
            rdzv_configs={
                "join_timeout": round(rdzv_timeout_s),
                "read_timeout": max(1, round(min(rdzv_timeout_s, 60))),
                **({} if is_rdzv_host is None else {"is_host": is_rdzv_host}),
            },
            local_addr=local_addr,
            start_method="spawn",
            logs_specs=DefaultLogsSpecs(log_dir=str(Path(tmp, "logs"))),
            **_shutdown_timeout(LaunchConfig, 10),
            **_signals_to_handle(LaunchConfig),
        )
        previous = os.environ.get(ERROR_DIR_ENV)
        os.environ[ERROR_DIR_ENV] = str(error_dir)
        try:
            with sigint_deferred_in_workers():
                return elastic_launch(config, run_guarded)(fn, *args)
        except SignalException as exc:
            raise SignalledError(
                f"interrupted by {exc.sigval.name}; workers stopped (rerun the same command to "
                "resume)",
                exc.sigval,
            ) from None
        except ChildFailedError as exc:
            raise LandcoverError(failure_message(exc, error_dir)) from None
        except RendezvousError as exc:
            cause = exc.__cause__ or exc.__context__
            detail = first_line(cause or exc, 200)
            raise LandcoverError(
                f"rendezvous at {rdzv_endpoint} failed ({detail}); check --rdzv-endpoint, that "
                "node 0 is up and the port is open between the nodes"
            ) from None
        finally:
            metrics.configure(metrics.NullMetricHandler(), group="torchelastic")
            if previous is None:
                os.environ.pop(ERROR_DIR_ENV, None)
            else:
                os.environ[ERROR_DIR_ENV] = previous


def launch_node(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    run: RunConfig,
    nproc: int | None = None,
    default_id: str | None = None,
) -> dict[int, Any]:
    """Runs this node's share of a job's workers as the run settings describe it.

    Args:
        fn: The workers' module-level entry point.
        args: Its arguments (picklable).
        run: The run settings (workers per node, nodes, rendezvous, restarts).
        nproc: Workers on this node (default: ``run.nproc_per_node``).
        default_id: The rendezvous id when ``run.rdzv_id`` names none (default: derived
            from ``run.out``).

    Returns:
        Each global rank's return value.

    Raises:
        LandcoverError: If a worker fails and restarts are exhausted.
    """
    out_id = "landcover-" + hashlib.sha256(run.out.encode()).hexdigest()[:12]
    return launch_workers(
        fn,
        args,
        nproc=run.nproc_per_node if nproc is None else nproc,
        nnodes=run.nnodes,
        rdzv_endpoint=run.rdzv_endpoint or "localhost:0",
        run_id=run.rdzv_id or default_id or out_id,
        max_restarts=run.max_restarts,
        is_rdzv_host=None if run.node_rank is None else run.node_rank == 0,
        rdzv_timeout_s=run.rdzv_timeout_s,
        local_addr=run.local_addr,
    )
