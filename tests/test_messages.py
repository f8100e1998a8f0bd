"""Error messages name the real culprit in one complete line (issue 16, item 10).

Each test runs the real CLI as a subprocess on tiny real files and checks the one ``error:``
line and the non-zero exit.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from conftest import assert_one_line_error, run_cli


@pytest.fixture
def tile(tiny_data: Path) -> Path:
    """A tiny NAIP-like image to predict."""
    return tiny_data / "synth_000_naip.tif"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"this is a text file, not a model\n", "the file is text, not a PyTorch checkpoint"),
        (b"", "the file is empty (0 bytes)"),
        (bytes(range(256)) * 4, "the file is not a PyTorch checkpoint (neither torch.save's"),
    ],
)
def test_not_a_checkpoint_is_one_complete_sentence(
    tile: Path, tmp_path: Path, content: bytes, reason: str
) -> None:
    fake = tmp_path / "some_text_file"
    fake.write_bytes(content)
    result = run_cli("predict", str(tile), "--checkpoint", str(fake), "--out", str(tmp_path / "o"))
    line = assert_one_line_error(result, f"{fake}: not a loadable checkpoint: {reason}")
    assert line.endswith(("checkpoint", ")", "pickle")), line


def test_truncated_checkpoint_says_truncated(tile: Path, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save({"weights": torch.zeros(64, 64)}, buffer)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    result = run_cli("predict", str(tile), "--checkpoint", str(cut), "--out", str(tmp_path / "o"))
    line = assert_one_line_error(
        result,
        f"{cut}: not a loadable checkpoint: the file is a zip archive",
        "not a complete PyTorch checkpoint; it may be truncated or damaged",
    )
    assert line.endswith("damaged"), line


class Opaque:
    """A class torch's safe loader refuses."""


def test_checkpoint_with_python_objects_names_the_object(tile: Path, tmp_path: Path) -> None:
    unsafe = tmp_path / "unsafe.pt"
    torch.save({"model": Opaque()}, unsafe)
    result = run_cli(
        "predict", str(tile), "--checkpoint", str(unsafe), "--out", str(tmp_path / "o")
    )
    assert_one_line_error(
        result,
        f"{unsafe}: not a loadable checkpoint: the file holds a Python object "
        "(test_messages.Opaque) besides tensors and plain data, which landcover does not load",
    )
