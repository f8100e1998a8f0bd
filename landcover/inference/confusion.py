"""The confusion matrix of an evaluation as files: CSV counts and a PNG heat map."""

from __future__ import annotations

import csv
import io

import numpy as np


def confusion_csv(confusion: np.ndarray, names: list[str]) -> str:
    """The confusion matrix as CSV (rows true, columns predicted, pixel counts).

    Args:
        confusion: ``(K, K)`` counts.
        names: Class names.

    Returns:
        The CSV text.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["true \\ predicted", *names])
    for name, row in zip(names, confusion, strict=True):
        writer.writerow([name, *(int(v) for v in row)])
    return buffer.getvalue()


def confusion_png(confusion: np.ndarray, names: list[str]) -> bytes:
    """A row-normalised confusion matrix heat map labelled with class names.

    Args:
        confusion: ``(K, K)`` counts.
        names: Class names.

    Returns:
        The PNG file's bytes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = confusion.sum(axis=1, keepdims=True)
    norm = np.divide(confusion, rows, out=np.zeros(confusion.shape), where=rows > 0)
    k = len(names)
    fig, ax = plt.subplots(figsize=(1.2 * k + 3, 1.1 * k + 2))
    im = ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(k), names, rotation=45, ha="right")
    ax.set_yticks(range(k), names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title("Confusion matrix (row-normalised)")
    for i in range(k):
        for j in range(k):
            ax.text(
                j,
                i,
                f"{norm[i, j]:.2f}",
                ha="center",
                va="center",
                color="white" if norm[i, j] > 0.5 else "black",
                fontsize=8,
            )
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()
