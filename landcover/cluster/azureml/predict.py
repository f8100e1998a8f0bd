"""The predict job: ``landcover predict`` on every GPU, mapping a region's tiles.

Every process Azure ML starts is one worker (under the distribution of
:data:`~landcover.registry.REGION_ENGINE`); the workers claim the tiles through the job's
rendezvous store. Inputs: ``tiles`` (a folder, or a list/manifest file) and ``checkpoint``;
output: ``maps`` (with a run path, a rerun maps only what is missing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from landcover.cluster.azureml.inputs import data_input_path, input_spec, upload_note
from landcover.cluster.azureml.settings import DISTRIBUTION, InputMode
from landcover.cluster.azureml.writer import (
    AzureMLFiles,
    JobParts,
    JobTarget,
    source_root,
    write_job_files,
)
from landcover.cluster.spec import ClusterError
from landcover.registry import ENGINES, REGION_ENGINE

PREDICT_COMMAND = (
    "landcover predict ${{inputs.tiles}} --checkpoint ${{inputs.checkpoint}} "
    "--out ${{outputs.maps}}"
)
"""The command each process runs; a rerun into the same maps folder skips complete tiles."""


@dataclass(frozen=True)
class PredictJob:
    """What a predict job maps.

    Attributes:
        tiles: A folder of tiles, or a list file (``.txt``) or manifest (``.csv``): URI or
            local path.
        checkpoint: The checkpoint: URI or local file.
        engine: The engine asked for; only an engine that maps regions
            (:attr:`~landcover.registry.EngineSpec.maps_regions`) runs a predict job.
    """

    tiles: str
    checkpoint: str
    engine: str = REGION_ENGINE

    @property
    def tiles_are_listed(self) -> bool:
        """Whether ``tiles`` is a list file or manifest rather than a folder."""
        return self.tiles.lower().endswith((".txt", ".csv"))

    def inputs(self, input_mode: InputMode) -> tuple[dict[str, Any], list[str]]:
        """The job's ``tiles`` and ``checkpoint`` inputs, and notes about them.

        Args:
            input_mode: How the tiles folder reaches the nodes.

        Returns:
            ``(inputs, notes)``.

        Raises:
            ClusterError: If a location cannot be used by Azure ML.
        """
        listed = self.tiles_are_listed
        tiles = data_input_path(self.tiles, option="--tiles", file=listed)
        checkpoint = data_input_path(self.checkpoint, option="--checkpoint", file=True)
        inputs = {
            "tiles": input_spec(
                "uri_file" if listed else "uri_folder",
                tiles,
                "download" if listed else input_mode,
            ),
            "checkpoint": input_spec("uri_file", checkpoint, "download"),
        }
        notes = upload_note("tiles", self.tiles, tiles)
        notes += upload_note("checkpoint", self.checkpoint, checkpoint)
        if listed:
            notes.append(
                "the list is downloaded on its own: its entries must be blob URLs (read with "
                "the job's identity) or absolute paths on the nodes"
            )
        return inputs, notes


def write_predict_job(target: JobTarget, job: PredictJob) -> AzureMLFiles:
    """Writes the files of a predict job: compute.yml, environment.yml and job.yml.

    Args:
        target: Where the job runs and where the files go; ``run_path`` is the maps folder
            (a rerun there maps only the tiles not yet done).
        job: The tiles and the checkpoint.

    Returns:
        The files written and the ``az ml`` commands to run.

    Raises:
        ClusterError: If the engine asked for does not map regions, a location cannot be
            used by Azure ML, or the source tree is not found.
    """
    if not ENGINES[job.engine].maps_regions:
        raise ClusterError(
            f"--job predict runs on the {REGION_ENGINE} engine "
            f"({DISTRIBUTION[ENGINES[REGION_ENGINE].launcher]} distribution)"
        )
    root = source_root(target)
    inputs, notes = job.inputs(target.input_mode)
    if not target.run_path:
        notes.append(
            "without --run-path each job writes a new maps folder; with --run-path "
            "azureml://datastores/NAME/paths/PATH a rerun maps only the tiles not yet done"
        )
    plan = target.plan
    parts = JobParts(
        engine=job.engine,
        command=PREDICT_COMMAND,
        inputs=inputs,
        output="maps",
        display_name=f"landcover-predict-{plan.workers}w-{target.cluster.vm_size.lower()}",
        description=(
            f"landcover predict on {plan.nodes} x {target.cluster.vm_size} "
            f"({plan.nodes * plan.processes_per_node} workers)"
        ),
        notes=notes,
    )
    return write_job_files(target, parts, root)
