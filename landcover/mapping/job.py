"""``landcover predict`` as a job: many tiles over many workers and nodes, resumable, honest.

The launcher (:func:`run_predict_job`) resolves the inputs into tiles (:mod:`.tiles`), reads
their headers or blob sizes, and starts the workers: in this process for one worker, under
torchrun's elastic agent for ``--workers N`` and ``--nnodes``, or not at all when an external
launcher (``torchrun``, Azure ML) already started this process as one worker.

Each worker (:func:`~landcover.mapping.worker.job_worker`) loads the model on its GPU (local rank), then claims tiles
largest first through the job's store (:mod:`.deal`) until none is left. For each tile it

- skips it when its outputs are complete for this model and these options
  (:mod:`.outputs`; ``--overwrite`` predicts every tile again);
- otherwise predicts it (:class:`~landcover.inference.predict.TileMapper`, which writes each
  map under a temporary name and renames it: a reader never sees half a map, and publishes
  one tile's maps in the background while it predicts the next), counts its classes as they
  are written and writes ``{stem}_stats.json``;
- records a tile that fails (missing, corrupt, wrong bands...) with its one-line error and
  goes on (``--fail-fast``: no worker claims another tile); a read-only, unwritable or full
  output folder ends the job at once with one line (:mod:`landcover.diskerrors`).

Rank 0 reports the job's progress, gathers every worker's records and writes the job's
outputs beside the maps: the summary (:mod:`.summary`), the VRT mosaics (:mod:`.mosaic`) and
the STAC items (:mod:`.stac`). The job ends non-zero when a tile failed. A job killed at any
point and started again predicts only the tiles whose outputs are not complete; temporary
files an interrupted job left in the output folder are removed at the start. Every call into
the parallel layer (launching, the process group, the store) goes through :mod:`.comm`.
"""

from __future__ import annotations

import hashlib
import logging

from landcover.config import RunConfig
from landcover.diskerrors import check_output_folder
from landcover.inference.options import PredictOptions
from landcover.logs import setup_logging
from landcover.mapping import comm
from landcover.mapping.spec import JobOptions, JobOutcome, JobSpec, measured_tiles
from landcover.mapping.worker import job_worker
from landcover.parallel.devices import device_available
from landcover.parallel.env import DistEnv
from landcover.storage import signing

log = logging.getLogger("landcover")


def run_predict_job(
    inputs: list[str],
    checkpoint: str,
    options: PredictOptions,
    job: JobOptions,
    device: str,
    launch: RunConfig,
) -> JobOutcome:
    """Runs ``landcover predict``: this process as one worker, or launching the workers.

    Args:
        inputs: Files, globs, folders, list files or manifests.
        checkpoint: The checkpoint.
        options: Per-tile settings and the output folder.
        job: Job settings.
        device: ``auto``, ``cpu`` or ``cuda``.
        launch: Workers and nodes (``workers``, ``nnodes``, ``workers_per_node``,
            ``rdzv_*``, ``node_rank``, ``local_addr`` as for ``train``).

    Returns:
        How the job ended (every tile predicted or skipped).

    Raises:
        LandcoverError: On a bad checkpoint or inputs, a failed worker, or failed tiles.
    """
    spec = JobSpec(inputs, checkpoint, options, job, device)
    signing.use(job.signing)  # the tiles' sizes are read here, the tiles in the workers
    if comm.started_by_a_launcher():  # one worker of an external launcher
        outcome = job_worker(spec)
        outcome.raise_if_failed(job.fail_fast)
        return outcome
    setup_logging(DistEnv(), None)
    device_available(device)  # --device cuda without a GPU: refused before the folder exists
    signing.check_signing(job.signing)  # a token endpoint that refuses: one line, no folder
    geometry = (options.window, options.overlap)
    spec.entries = measured_tiles(
        inputs, checkpoint, options.resolution, geometry, job.aoi, job.acquired
    )
    check_output_folder(options.out)  # after the tiles' checks: a refused job leaves no folder
    runnable = sum(e.error is None for e in spec.entries)
    if launch.nnodes == 1 and min(launch.workers, runnable) == 1:
        outcome = job_worker(spec)
    else:
        nproc = launch.nproc_per_node if launch.nnodes > 1 else min(launch.workers, runnable)
        out_id = hashlib.sha256(str(options.out).encode()).hexdigest()[:12]
        log.info(
            "starting %d workers%s for %d tiles",
            nproc,
            f" on this node of {launch.nnodes}" if launch.nnodes > 1 else "",
            len(spec.entries),
        )
        results = comm.launch(job_worker, spec, launch, nproc, f"landcover-predict-{out_id}")
        outcome = next(iter(results.values()))
    outcome.raise_if_failed(job.fail_fast)
    return outcome
