"""Usage errors and warnings in one format for every command (issue 42, item 7).

Each command runs as a real ``python -m landcover`` subprocess: the usage error's layout is
what a terminal or a job log shows, so it is read from the process's own stderr.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli, write_naip_tile


def landcover(*args: str) -> subprocess.CompletedProcess:
    """``python -m landcover ARGS`` as a subprocess (conftest's runner: an ``env`` makes it one)."""
    return run_cli(*args, env={"COLUMNS": "200"})


PREDICT = ("predict", "t_naip.tif", "-k", "x.pt", "--out", "OUT")
PREPARE = ("data", "prepare", "--images", "a.tif", "--labels", "b.tif", "--out", "OUT")


@pytest.mark.parametrize(
    ("args", "command", "needle"),
    [
        ((*PREDICT, "--resolution", "-1"), "predict", "--resolution"),
        ((*PREDICT, "--resolution", "nan"), "predict", "--resolution"),
        ((*PREDICT, "--resolution", "inf"), "predict", "--resolution"),
        ((*PREDICT, "--resolution", "0"), "predict", "--resolution"),
        ((*PREDICT, "--batch-size", "0"), "predict", "--batch-size"),
        ((*PREDICT, "--prob-dtype", "float64"), "predict", "--prob-dtype"),
        (("train", "--out", "OUT", "--workers", "abc"), "train", "--workers"),
        ((*PREPARE, "--tile-size", "0"), "data prepare", "--tile-size"),
        (("cluster", "plan", "--workers", "0"), "cluster plan", "--workers"),
        (("data", "synth", "OUT", "--size", "7"), "data synth", "--size"),
        (
            ("evaluate", "-k", "x.pt", "--data", "d", "--out", "OUT", "--resolution", "nan"),
            "evaluate",
            "nan",
        ),
        (("train", "--out", "OUT", "--no-such-option"), "train", "--no-such-option"),
        (("predict", "-k", "x.pt", "--out", "OUT"), "predict", "give tiles, or --aoi with --stac"),
        ((*PREDICT, "--stac", "cat.json"), "predict", "give tiles or --stac, not both"),
        (("predict", "-k", "x.pt", "--stac", "cat.json"), "predict", "--stac needs --aoi"),
        ((*PREDICT, "--collection", "naip"), "predict", "needs --stac"),
        (("no-such-command",), "", "no-such-command"),
    ],
)
def test_a_usage_error_is_one_error_line_with_a_help_hint(
    args: tuple[str, ...], command: str, needle: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = landcover(*(str(out) if a == "OUT" else a for a in args))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr  # no usage line, no hint line, no box
    assert lines[0].startswith("error: "), lines[0]
    assert needle in lines[0], lines[0]
    assert lines[0].endswith(f"; try '{' '.join(['landcover', *command.split()])} --help'")
    assert not set("╭│╰─") & set(result.stderr), result.stderr
    assert result.stdout == ""
    assert not out.exists()


def test_help_and_a_bare_group_still_show_help() -> None:
    shown = landcover("data", "synth", "--help")
    assert shown.returncode == 0 and "Usage: landcover data synth" in shown.stdout, shown.stderr
    bare = landcover("data")
    assert bare.returncode == 2 and "synth" in bare.stdout + bare.stderr
    assert "error:" not in bare.stderr


def test_every_warning_record_prints_with_a_warning_prefix(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    """An all-no-data tile and a tile in a geographic CRS: two warnings of two modules."""
    empty = np.zeros((4, 64, 64), dtype=np.uint8)
    pixels = np.random.default_rng(3).integers(20, 230, size=(4, 64, 64), dtype=np.uint8)
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    write_naip_tile(tiles / "empty_naip.tif", empty, "EPSG:26918", 1.0, (400000.0, 4300000.0))
    write_naip_tile(tiles / "geo_naip.tif", pixels, "EPSG:4326", 1e-5, (-76.5, 38.8))
    result = landcover(
        "predict", str(tiles), "-k", str(quick_checkpoint), "--out", str(tmp_path / "maps"),
        "--device", "cpu", "--no-preview",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    empty_lines = [ln for ln in lines if "every pixel is no-data" in ln]
    geo_lines = [ln for ln in lines if "geo_naip.tif" in ln and "metres" in ln]
    assert len(empty_lines) == 1 and len(geo_lines) == 1, result.stderr
    for line in empty_lines + geo_lines:
        assert line.startswith("warning: "), line
        assert not line.startswith("warning: warning:"), line
    info = [ln for ln in lines if "2 tiles" in ln]
    assert info and not info[-1].startswith("warning:"), result.stderr
