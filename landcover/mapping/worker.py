"""One worker of a predict job: claims tiles, predicts or skips each, and (rank 0) writes the job's outputs.

See :mod:`landcover.mapping.job` for the whole job; every call into the parallel layer goes
through :mod:`.comm`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

import torch

from landcover import storage
from landcover.allocator import tune_allocator
from landcover.diskerrors import OutputError
from landcover.errors import DataError, LandcoverError
from landcover.fileio import remove_stale_temporaries
from landcover.folderlock import folder_lock
from landcover.inference.predict import TileMapper
from landcover.inference.runner import load_model
from landcover.logs import setup_logging
from landcover.mapping import comm
from landcover.mapping.aoiarea import InsideArea, count_inside
from landcover.mapping.deal import TileBoard
from landcover.mapping.mosaic import write_mosaics
from landcover.mapping.othermaps import warn_other_maps
from landcover.mapping.outputs import (
    make_fingerprint,
)
from landcover.mapping.overlaps import warn_overlaps
from landcover.mapping.progress import JobProgress
from landcover.mapping.records import TileRecord
from landcover.mapping.spec import JobOutcome, JobSpec, measured_tiles
from landcover.mapping.stac import write_item_collection
from landcover.mapping.summary import totals_line, write_summary
from landcover.mapping.tileoutcome import (
    WorkerContext,
    complete_maps,
    failed_record,
    settle_maps,
    tile_record,
)
from landcover.mapping.tiles import TileEntry
from landcover.parallel.env import DistEnv
from landcover.redaction import redact
from landcover.storage import signing
from landcover.threads import core_share, gdal_threads
from landcover.wording import counted

log = logging.getLogger("landcover")


def _shared_entries(spec: JobSpec, env: DistEnv) -> list[TileEntry]:
    """The job's tiles as rank 0 measured them (every rank gets the same list)."""
    found: tuple[list[TileEntry] | None, str | None] = (None, None)
    if env.is_main:
        try:
            entries = spec.entries or measured_tiles(
                spec.inputs,
                spec.checkpoint,
                spec.options.resolution,
                area=spec.job.aoi,
                acquired=spec.job.acquired,
            )
            found = (entries, None)
        except LandcoverError as exc:
            found = (None, str(exc))
    entries, error = comm.broadcast(found, env)
    if error is not None:
        raise DataError(error)
    return entries


def _clean_stale(out: str) -> None:
    """Removes temporary files an interrupted job left in a local output folder."""
    if storage.is_remote(out) or not os.path.isdir(out):
        return
    stale = remove_stale_temporaries(out)
    if stale:
        log.info("removed %d temporary file(s) an interrupted job left in %s", len(stale), out)


@dataclass
class _InFlight:
    """A tile whose pixels are predicted and whose maps are being published."""

    entry: TileEntry
    index: int
    start: float
    future: Future


def _work(board: TileBoard, entries: list[TileEntry], order: list[int], ctx: WorkerContext) -> list:
    """Claims and processes tiles until none is left (or the job stops).

    A claimed tile whose outputs are complete is skipped; any other is predicted by a
    :class:`~landcover.inference.predict.TileMapper`, which publishes its maps (COG
    compression, overviews, preview, upload) in the background while the next tile is
    predicted. A tile counts as finished on the board once its maps are published.
    """
    records: list[TileRecord] = []
    in_flight: list[_InFlight] = []
    partial: dict[str, tuple[int, int]] = {}  # a tile's rows counted on the board so far

    def rows_of(entry: TileEntry) -> Callable[[float, int], None]:
        def on_rows(share: float, pixels: int) -> None:  # the progress line's, mid-tile
            cost, counted = partial.get(entry.path, (0, 0))
            board.advance(int(share * entry.cost) - cost, pixels - counted)
            partial[entry.path] = (int(share * entry.cost), pixels)

        return on_rows

    def finish(record: TileRecord, entry: TileEntry) -> None:
        records.append(record)
        cost, counted = partial.pop(entry.path, (0, 0))
        if cost or counted:  # the finished tile counts whole below
            board.advance(-cost, -counted)
        pixels = record.grid.width * record.grid.height if record.grid else 0
        board.finish(record.status, entry.cost, pixels if record.status == "done" else 0)
        if record.status == "failed" and ctx.job.fail_fast:
            board.stop()

    def settle(block: bool) -> None:
        while in_flight and (block or in_flight[0].future.done()):
            tile = in_flight.pop(0)
            try:
                found = settle_maps(tile.future.result(), tile.entry, ctx)
                record = tile_record(tile.entry, tile.index, ctx, "done", found, tile.start)
            except OutputError:
                raise  # the output folder is full or read-only: no other tile can be written
            except Exception as exc:
                record = failed_record(tile.entry, tile.index, ctx, exc, tile.start)
            finish(record, tile.entry)

    with TileMapper(ctx.im, ctx.options) as mapper:
        claimed = board.claim()
        while claimed is not None and not board.stopped():  # a tile claimed ahead is left
            index = order[claimed]
            entry = entries[index]
            start = time.perf_counter()
            # the next tile, claimed now and decoded while this one is predicted (on a GPU)
            claimed = board.claim_ahead() if mapper.decode_ahead else None
            try:
                found = None if ctx.job.overwrite else complete_maps(entry, ctx)
                if found is not None:
                    finish(tile_record(entry, index, ctx, "skipped", found, start), entry)
                else:
                    if claimed is not None:
                        mapper.prefetch(entries[order[claimed]].path)
                    mapper.on_rows = rows_of(entry)
                    future = mapper.submit(entry.path)
                    in_flight.append(_InFlight(entry, index, start, future))
            except OutputError:
                raise
            except Exception as exc:
                finish(failed_record(entry, index, ctx, exc, start), entry)
            settle(block=False)
            claimed = board.claim() if claimed is None else claimed
        settle(block=True)
    return records


def _all_records(gathered: list[list[TileRecord]], entries: list[TileEntry]) -> list[TileRecord]:
    """Every worker's records, with the tiles that failed before the job and those not run."""
    records = [r for worker in gathered for r in worker]
    handled = {r.index for r in records}
    for index, entry in enumerate(entries):
        if entry.error is not None:
            records.append(TileRecord(entry.path, index, "failed", error=entry.error))
        elif index not in handled:
            records.append(TileRecord(entry.path, index, "not_run"))
    return sorted(records, key=lambda r: (r.index, r.rank or 0))


def _write_outputs(
    records: list[TileRecord], ctx: WorkerContext, job: dict[str, Any], inside: InsideArea | None
) -> tuple[str, list[str]]:
    """Writes the summary, mosaics, STAC items and area; returns the summary and all files."""
    mapping = ctx.im.mapping
    out = str(ctx.options.out)
    files = write_summary(records, mapping, out, job, inside)
    files += write_mosaics(records, out, mapping, ctx.options.prob_dtype)
    properties = {
        "landcover:checkpoint": storage.name(redact(ctx.im.checkpoint)),  # its name, as a tag
        "landcover:epoch": ctx.im.epoch,
        "landcover:model_sha256": ctx.fingerprint.weights_sha256,
        "landcover:fingerprint": ctx.fingerprint.digest,
    }
    files += write_item_collection(records, out, mapping, ctx.options.prob_dtype, properties)
    if ctx.job.aoi is not None:  # for landcover view: the area's outline
        files.append(storage.join(out, "aoi.geojson"))
        storage.write_text(files[-1], json.dumps(ctx.job.aoi.feature_collection()))
    return files[0], files


def _finish(records: list[TileRecord], ctx: WorkerContext, job: dict[str, Any]) -> JobOutcome:
    """Rank 0's end of the job: outputs written, totals logged, the outcome."""
    count = {s: sum(r.status == s for r in records) for s in ("done", "skipped", "failed")}
    # the first failure logged: a tile refused before the job (no worker handled it; those
    # come last in the largest-first order) before one that failed while predicted
    failed = sorted((r for r in records if r.status == "failed"), key=lambda r: r.rank is not None)
    first = failed[0].error if failed else None
    summary, error, inside = None, None, None
    try:
        if ctx.job.aoi is not None:
            inside = count_inside(records, ctx.job.aoi, ctx.im.mapping.num_classes)
        summary, files = _write_outputs(records, ctx, job, inside)
        log.info("wrote %s", ", ".join(storage.name(f) for f in files))
    except LandcoverError as exc:
        error = f"the job's summary could not be written: {exc}"
    warn_overlaps(records)  # ground mapped twice (two years of one place)
    hectares = totals_line(records, ctx.im.mapping, inside)
    log.info(
        "%d tile%s: %d predicted, %d skipped (already complete), %d failed; %s",
        len(records),
        "" if len(records) == 1 else "s",
        count["done"],
        count["skipped"],
        count["failed"],
        hectares,
    )
    return JobOutcome(
        total=len(records),
        done=count["done"],
        skipped=count["skipped"],
        failed=count["failed"],
        not_run=sum(r.status == "not_run" for r in records),
        first_error=first,
        summary=summary,
        error=error,
    )


def job_worker(spec: JobSpec) -> JobOutcome:
    """One worker of a predict job (rank and GPU from the environment); see the module.

    Args:
        spec: The job.

    Returns:
        How the whole job ended (the same on every rank).

    Raises:
        LandcoverError: If the checkpoint or the inputs are unusable (every rank raises).
    """
    tune_allocator()
    signing.use(spec.job.signing)  # this process's tokens, asked for here (never pickled)
    env = comm.worker_env()
    out = str(spec.options.out)
    setup_logging(env, None if storage.is_remote(out) else out)
    if env.distributed:  # torch's threads: each worker's share of this node's cores
        torch.set_num_threads(core_share(env.local_world_size))
    comm.join(env, spec.job.timeout_s)
    lock = ExitStack()
    try:
        if env.is_main and not storage.is_remote(out):  # before its temporaries are cleaned
            lock.enter_context(folder_lock(out))
        started = time.perf_counter()
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        entries = _shared_entries(spec, env)
        im = load_model(spec.checkpoint, spec.device, env.local_rank)
        fingerprint = make_fingerprint(im, spec.options)
        log.info(
            "rank %d/%d: pid %d on %s, %d torch threads, GDAL threads %s",
            *(env.rank, env.world_size, os.getpid(), im.device),
            *(torch.get_num_threads(), gdal_threads()),
        )
        options = replace(spec.options, tags={**spec.options.tags, **fingerprint.tags()})
        if env.is_main:
            log.info(
                "%s, %s, output %s, model sha256 %s (fingerprint %s)",
                counted(len(entries), "tile"),
                counted(env.world_size, "worker"),
                out,
                fingerprint.weights_sha256[:16],
                fingerprint.digest[:16],
            )
            _clean_stale(out)
            warn_other_maps(out, [e.path for e in entries])
            for index, entry in enumerate(entries):
                if entry.error is not None:
                    log.error("tile %d of %d failed: %s", index + 1, len(entries), entry.error)
        comm.wait_for_all()
        order = [i for i, e in enumerate(entries) if e.error is None]
        ctx = WorkerContext(im, options, fingerprint, spec.job, env.rank, len(entries))
        board = TileBoard(len(order), comm.JobStore() if env.distributed else None, env.world_size)
        if spec.job.fail_fast and len(order) < len(entries):
            board.stop()  # a tile failed its check: nothing starts
        total_cost = sum(entries[i].cost for i in order)
        refused = len(entries) - len(order)
        with JobProgress(board, total_cost, options.log_every_s, env.is_main, refused):
            mine = _work(board, entries, order, ctx)
            gathered = comm.gather(mine, env)  # the last line counts every worker's tiles
        outcome = None
        if gathered is not None:  # rank 0
            records = _all_records(gathered, entries)
            job = {
                "checkpoint": spec.checkpoint,
                "epoch": im.epoch,
                "model_sha256": fingerprint.weights_sha256,
                "fingerprint": fingerprint.digest,
                "options": fingerprint.options,
                "probabilities": spec.options.probs,
                "workers": env.world_size,
                "overwrite": spec.job.overwrite,
                "started": started_at,
                "seconds": round(time.perf_counter() - started, 3),
                "out": out,
                # how its blob tiles were read: landcover view reads their imagery alike
                "signing": spec.job.signing.service if spec.job.signing is not None else None,
            }
            outcome = _finish(records, ctx, job)
        return comm.broadcast(outcome, env)
    finally:
        lock.close()
        comm.leave()
