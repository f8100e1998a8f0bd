"""A ``train`` refused by its workers' checks leaves no run folder (issue 42, item 8).

Label codes the class mapping does not know (found when the workers read the pixels), a CUDA
device where there is none, an unknown encoder and a missing weights file are refused after
the workers opened their log files; the command removes what it added: a new ``--out`` (and
the parent it made) is gone, an existing one holds what it held. Real ``landcover train`` runs,
one worker and two.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import rasterio
import torch

from conftest import assert_one_line_error, run_cli, train_args


@pytest.fixture(scope="module")
def code_9_data(tiny_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny data with label code 9 (unknown to chesapeake7) in a corner of every label."""
    folder = tmp_path_factory.mktemp("code9")
    for path in sorted(tiny_data.glob("*.tif")):
        shutil.copy(path, folder / path.name)
    for label in sorted(folder.glob("*_lc.tif")):
        with rasterio.open(label, "r+") as ds:
            codes = ds.read(1)
            codes[:4, :4] = 9
            ds.write(codes, 1)
    return folder


CASES = {
    "label-code-9": (("--workers", "1"), ("label codes [9]", "chesapeake7")),
    "label-code-9-2-workers": (("--workers", "2"), ("label codes [9]",)),
    "device-cuda": (("--workers", "1", "--device", "cuda"), ("--device cuda",)),
    "encoder": (("--workers", "1", "--encoder", "nosuchnet"), ("nosuchnet",)),
    "weights": (("--workers", "1", "--set", "model.weights=MISSING"), ("weights file not found",)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_train_leaves_a_new_out_missing_and_an_existing_one_as_it_was(
    case: str, tiny_data: Path, code_9_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    if case == "device-cuda" and torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: --device cuda is no refusal here")
    extra, needles = CASES[case]
    missing = str(tmp_path / "no-such-weights.pt")
    extra = tuple(a.replace("MISSING", missing) for a in extra)
    data = code_9_data if case.startswith("label") else tiny_data

    def train(out: Path) -> None:
        args = train_args(tiny_config, data, out, "--epochs", "1", "--samples-per-epoch", "16")
        assert_one_line_error(run_cli(*args, *extra), *needles)

    train(tmp_path / "new" / "run")
    assert not (tmp_path / "new").exists()  # neither the run folder nor the parent it made

    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine\n")
    train(existing)
    found = sorted(p.relative_to(existing).as_posix() for p in existing.rglob("*"))
    assert found == ["notes.txt"]
    assert (existing / "notes.txt").read_text() == "mine\n"
