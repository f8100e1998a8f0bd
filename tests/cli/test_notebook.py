"""The exploration notebook runs headless on a tiny run made by the tests."""

from pathlib import Path

import nbformat
import rasterio
from nbclient import NotebookClient

from conftest import REPO, run_cli


def execute_notebook(parameters: str, folder: Path, *checks: str) -> nbformat.NotebookNode:
    """Runs the notebook with its parameters set as papermill sets them, then ``checks``.

    Args:
        parameters: Python assignments, injected after the ``parameters`` cell.
        folder: The kernel's working folder.
        *checks: Code cells run after the notebook's own, in its namespace.

    Returns:
        The executed notebook.
    """
    nb = nbformat.read(REPO / "notebooks" / "explore_outputs.ipynb", as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    index = nb.cells.index(params[0])
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(parameters))
    nb.cells.extend(nbformat.v4.new_code_cell(check) for check in checks)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    return nb


def pictures(nb: nbformat.NotebookNode) -> int:
    """Images the notebook drew."""
    return sum(
        "image/png" in o.get("data", {})
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )


def printed(nb: nbformat.NotebookNode) -> str:
    """What the notebook's cells printed."""
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )


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
    # the inline map: the kernel's viewer answers on loopback while the notebook runs
    check = (
        "import urllib.request\n"
        "with urllib.request.urlopen(viewer.url + 'api/job', timeout=30) as reply:\n"
        "    served = json.load(reply)\n"
        "assert served['tiles'] == 1 and len(served['classes']) == mapping.num_classes\n"
        "print('viewer checked')\n"
    )
    for label, eval_dir in ((tiny_data / "synth_007_lc.tif", None), (None, evaluation)):
        nb = execute_notebook(
            f"RUN_DIR = {str(trained_run)!r}\nPREDICT_DIR = {str(maps)!r}\n"
            f"LABEL = {str(label) if label else None!r}\n"
            f"EVAL_DIR = {str(eval_dir) if eval_dir else None!r}\n",
            tmp_path,
            check,
        )
        assert pictures(nb) >= 5  # curves, IoU bars, maps, confusion, probabilities
        assert "viewer checked" in printed(nb)
        iframes = [
            o for c in nb.cells for o in c.get("outputs", []) if "text/html" in o.get("data", {})
        ]
        assert any("<iframe" in o["data"]["text/html"] for o in iframes)


NO_DATA_ROWS = 48
"""Top rows of the imagery with no data in :func:`test_notebook_on_no_data_and_no_probs`."""


def test_notebook_on_no_data_and_no_probs(
    quick_checkpoint: Path, tiny_data: Path, tmp_path: Path
) -> None:
    """A tile with a no-data band: the probability panels draw it apart, not as 0; and a
    ``--no-probs`` folder shows everything but the probabilities, which it says it lacks
    (the one-epoch run: its model need not be good)."""
    checkpoint, run = quick_checkpoint, quick_checkpoint.parent.parent
    image = tmp_path / "holes" / "synth_007_naip.tif"
    image.parent.mkdir()
    with rasterio.open(tiny_data / "synth_007_naip.tif") as src:
        profile, pixels = src.profile, src.read()
    pixels[:, :NO_DATA_ROWS] = 0  # the no-data value of every band
    with rasterio.open(image, "w", **profile) as dst:
        dst.write(pixels)
    full, classes_only = tmp_path / "maps", tmp_path / "classes"
    for out, extra in ((full, ()), (classes_only, ("--no-probs",))):
        args = ("predict", str(image), "--checkpoint", str(checkpoint), "--out", str(out))
        result = run_cli(*args, *extra)
        assert result.returncode == 0, result.stderr
    assert not list(classes_only.glob("*_prob.tif"))
    parameters = f"RUN_DIR = {str(run)!r}\nLABEL = None\nEVAL_DIR = None\n"
    # the panels' pixels are masked (drawn in the 'bad' colour) exactly where the imagery has
    # no data (the notebook's `valid`, from landcover's no-data policy: the top rows and any
    # pixel with no data of its own), the others hold the stored probabilities x 1/255; the
    # panels are 128 px, as the tile
    check = (
        "drawn = shown.get_array()\n"
        "hidden = np.ma.getmaskarray(drawn)\n"
        f"assert drawn.shape == (128, 128) and hidden[:{NO_DATA_ROWS}].all()\n"
        "assert (hidden == ~valid).all()\n"
        "with rasterio.open(prob_path) as ds:\n"
        "    stored = ds.read(ds.count)\n"
        "assert np.allclose(drawn[valid], stored[valid] / 255)\n"
        "print('no-data checked')\n"
    )
    nb = execute_notebook(parameters + f"PREDICT_DIR = {str(full)!r}\n", tmp_path, check)
    assert "no-data checked" in printed(nb)
    nb = execute_notebook(parameters + f"PREDICT_DIR = {str(classes_only)!r}\n", tmp_path)
    assert "synth_007_naip_prob.tif: the maps were made with --no-probs" in printed(nb)
    assert pictures(nb) >= 3  # curves, IoU bars, maps
