"""Ctrl-C during ``landcover export``: exit 130, nothing half-written, the previous export kept.

A real ``python -m landcover export`` gets SIGINT (to its process group, as a terminal's
Ctrl-C sends it) as soon as its scratch folder appears, while the model is traced and
checked. A SIGINT in the few renames that move the finished files into the folder is held
until they are done (the folder then holds the new export, whole): sent from inside the
first rename, in this process, it left the new ``model.json`` beside the old model file.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from landcover.export import command
from landcover.export.command import export_model

from conftest import interrupt_when, run_cli, start_cli

INTERRUPTED = "error: interrupted by SIGINT (rerun the same command to resume)"


def sha256(path: Path) -> str:
    """A file's sha256, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def contents(folder: Path) -> dict[str, bytes]:
    """Every file of a folder (hidden ones too), by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def previous(quick_checkpoint: Path, tmp_path: Path) -> Path:
    """A folder holding a complete ONNX export of the quick checkpoint."""
    out = tmp_path / "model"
    result = run_cli("export", str(quick_checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("fmt", ["onnx", "exported-program"])
def test_ctrl_c_during_an_export_exits_130_and_keeps_the_previous_export(
    quick_checkpoint: Path, previous: Path, fmt: str
) -> None:
    before = contents(previous)
    proc = start_cli("export", str(quick_checkpoint), "--format", fmt, "--out", str(previous))
    tracing = lambda: bool(list(previous.parent.glob(".model.export-*")))  # noqa: E731
    stdout, stderr = interrupt_when(proc, tracing)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and lines[-1] == INTERRUPTED, stderr
    assert stdout == ""  # no model path printed
    assert contents(previous) == before  # untouched
    assert sorted(p.name for p in previous.parent.iterdir()) == ["model"]  # no scratch left


def test_ctrl_c_while_the_files_move_is_held_until_the_export_is_whole(
    quick_checkpoint: Path, previous: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    replace = os.replace
    sent: list[str] = []

    def interrupted_replace(src: str | Path, dst: str | Path) -> None:
        if Path(dst).parent == previous and not sent:  # the first move into the folder
            sent.append(Path(dst).name)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, now
        replace(src, dst)

    monkeypatch.setattr(command.os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        export_model(str(quick_checkpoint), "exported-program", str(previous))
    monkeypatch.undo()
    assert sent
    assert sorted(p.name for p in previous.iterdir()) == [
        "model.json",
        "model.pt2",
        "model.stac.json",
    ]
    meta = (previous / "model.json").read_text()
    assert '"model_file": "model.pt2"' in meta and sha256(previous / "model.pt2") in meta
    assert sorted(p.name for p in previous.parent.iterdir()) == ["model"]  # no scratch left
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


@pytest.mark.parametrize(
    ("handler", "code"),
    [("signal.SIG_DFL", "KeyboardInterrupt"), ("signal.SIG_IGN", "finished")],
)
def test_a_held_ctrl_c_under_sig_dfl_is_raised_and_under_sig_ign_ignored(
    handler: str, code: str
) -> None:
    """SIG_DFL would end the process at once: raised as KeyboardInterrupt after the moves."""
    script = f"""
import os, signal
from landcover.export.command import _sigint_held
signal.signal(signal.SIGINT, {handler})
moved = []
try:
    with _sigint_held():
        os.kill(os.getpid(), signal.SIGINT)
        moved.append("all")
    print("finished", moved, signal.getsignal(signal.SIGINT) is {handler})
except KeyboardInterrupt:
    print("KeyboardInterrupt", moved, signal.getsignal(signal.SIGINT) is {handler})
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [code, "['all']", "True"]
