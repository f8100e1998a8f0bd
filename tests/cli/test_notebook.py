"""The exploration notebook runs headless on a tiny run made by the tests."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

from conftest import REPO, run_cli


def test_notebook_executes(
    trained_run: Path, tiny_data: Path, checkpoint: Path, tmp_path: Path
) -> None:
    maps = tmp_path / "maps"
    image = tiny_data / "synth_007_naip.tif"
    assert (
        run_cli(
            "predict", str(image), "--checkpoint", str(checkpoint), "--out", str(maps)
        ).returncode
        == 0
    )
    evaluation = tmp_path / "eval"
    assert (
        run_cli(
            "evaluate",
            "--checkpoint",
            str(checkpoint),
            "--data",
            str(tiny_data),
            "--out",
            str(evaluation),
        ).returncode
        == 0
    )
    nb = nbformat.read(REPO / "notebooks" / "explore_outputs.ipynb", as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    for label, eval_dir in ((tiny_data / "synth_007_lc.tif", None), (None, evaluation)):
        # papermill-style: the injected cell after the parameters cell overrides them
        injected = nbformat.v4.new_code_cell(
            f"RUN_DIR = {str(trained_run)!r}\nPREDICT_DIR = {str(maps)!r}\n"
            f"LABEL = {str(label) if label else None!r}\nEVAL_DIR = {str(eval_dir) if eval_dir else None!r}\n"
        )
        run_nb = nbformat.from_dict(nb)
        index = run_nb.cells.index(
            next(c for c in run_nb.cells if "parameters" in c.metadata.get("tags", []))
        )
        run_nb.cells.insert(index + 1, injected)
        NotebookClient(
            run_nb,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
        images = [
            o
            for c in run_nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        assert len(images) >= 5  # curves, IoU bars, maps, confusion, probabilities
