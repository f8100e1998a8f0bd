"""The table ``landcover evaluate`` prints: per-class IoU, precision, recall, F1, support."""

from __future__ import annotations

from typing import Any


def metric_text(value: float | None) -> str:
    """A metric as the table shows it: three decimals, ``-`` when undefined.

    Args:
        value: The metric, or ``None`` (a class absent from labels and maps).

    Returns:
        The text.
    """
    return "-" if value is None else f"{value:.3f}"


def print_metrics_table(metrics: dict[str, Any]) -> None:
    """Prints per-class metrics and the totals as a table.

    Args:
        metrics: As returned by :func:`~landcover.inference.evaluate.evaluate_pairs`.
    """
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(metrics['tiles'])} tiles, {metrics['pixels']:,} labelled pixels")
    for column in ("class", "IoU", "precision", "recall", "F1", "support"):
        table.add_column(column, justify="left" if column == "class" else "right")
    for name in metrics["classes"]:
        table.add_row(
            name,
            metric_text(metrics["iou"][name]),
            metric_text(metrics["precision"][name]),
            metric_text(metrics["recall"][name]),
            metric_text(metrics["f1"][name]),
            f"{metrics['support'][name]:,}",
        )
    table.add_section()
    table.add_row("mean IoU", metric_text(metrics["miou"]), "", "", "", "")
    table.add_row("pixel accuracy", metric_text(metrics["accuracy"]), "", "", "", "")
    Console().print(table)
