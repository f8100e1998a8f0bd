"""The plan as a person reads it: the lines ``landcover cluster plan`` prints."""

from __future__ import annotations

from collections.abc import Callable

from landcover.cluster.plan import ClusterPlan
from landcover.wording import counted


def _seconds(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f} s"
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value:.2g} s"


def _mb(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    return f"{n / 1e3:,.1f} kB"


def _span(values: list[int], show: Callable[[int], str]) -> str:
    low, high = min(values), max(values)
    return show(low) if low == high else f"{show(low)} to {show(high)}"


def plan_lines(plan: ClusterPlan, cluster_file: str = "cluster.json") -> list[str]:
    """Renders a plan as lines for the terminal.

    Args:
        plan: The plan.
        cluster_file: The cluster.json path, for the advice on ``targetNodeCount``.

    Returns:
        Lines without trailing newlines; warnings start with ``warning:``.
    """
    vm = plan.vm
    lines = [f"VM size: {vm.name} ({vm.describe()}), {plan.vm_priority}"]
    layout = f"workers: {plan.workers} -> {plan.nodes} node{'s' if plan.nodes > 1 else ''}"
    if plan.nodes == 1:
        layout += f", {plan.workers} process{'es' if plan.workers > 1 else ''}"
    elif plan.idle_slots:
        layout += (
            f": {plan.nodes - 1} x {plan.processes_per_node} processes + "
            f"{plan.last_node_processes} on the last node"
        )
    else:
        layout += f" x {plan.processes_per_node} processes (one per GPU)"
    lines.append(layout)
    if plan.idle_slots:
        lines.append(
            f"idle GPUs: {plan.idle_slots} slot{'s stay' if plan.idle_slots > 1 else ' stays'} "
            f"idle on the last node ({plan.gpus} GPUs for {plan.workers} workers; "
            f"{plan.gpus} workers would fill them)"
        )
    if plan.target_suffices:
        lines.append(
            f"nodes: targetNodeCount {plan.target_node_count} suffices ({plan.nodes} needed)"
        )
    else:
        lines.append(
            f"nodes: targetNodeCount {plan.target_node_count} is too small: set "
            f'"targetNodeCount": {plan.nodes} in {cluster_file}'
        )
    geometry = plan.geometry
    lines.append(
        f"batch: {geometry.describe_batch()}; {geometry.steps_per_epoch:,} steps per epoch of "
        f"{geometry.samples_per_epoch:,} samples"
    )
    lines.append(
        f"learning rate: {geometry.describe_lr()}, reached after {plan.warmup_epochs:g} "
        f"warm-up epoch{'' if plan.warmup_epochs == 1 else 's'}"
    )
    if plan.data is not None:
        data = plan.data
        lines.append(
            f"data: {counted(data.tiles, 'training tile')} ({_mb(data.bytes)}) and "
            f"{counted(data.val_tiles, 'validation tile')} in {data.root}"
        )
        tiles = [s.tiles for s in data.shares]
        sizes = [s.bytes for s in data.shares]
        lines.append(
            f"per worker: {_span(tiles, str)} tile(s), {_span(sizes, _mb)} of files "
            f"(mean {_mb(sum(sizes) // len(sizes))})"
        )
        if data.tiles_shared:
            lines.append(
                f"note: more workers ({plan.workers}) than training tiles ({data.tiles}): "
                "each worker holds one tile and tiles are shared by several workers"
            )
    if plan.predicted_epoch_s is not None:
        line = f"predicted epoch time: ~{_seconds(plan.predicted_epoch_s)}"
        if plan.predicted_single_s is not None and plan.predicted_efficiency is not None:
            line += (
                f" on {plan.workers} workers (~{_seconds(plan.predicted_single_s)} on 1 GPU; "
                f"efficiency {plan.predicted_efficiency:.2f} vs 1 GPU)"
            )
        lines.append(line)
        basis = f": {plan.prediction_basis}" if plan.prediction_basis else ""
        lines.append(f"  model estimate of the training steps (no validation, checkpoints){basis}")
    lines.extend(f"warning: {w}" for w in plan.warnings)
    return lines
