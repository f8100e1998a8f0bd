"""A ``**`` in a local glob spans folders, as it does in a blob URL and in the docs' examples.

``predict "tiles/**/*.tif"`` and ``data prepare --images "naip/**/*.tif"`` expanded local
patterns with Python's glob without ``recursive=True``: ``**`` then matched one folder level
only, and the tiles above or deeper were dropped without a word.
"""

from pathlib import Path

from landcover.data.prepare import expand_paths
from landcover.mapping.tiles import resolve_tiles


def _nested(root: Path) -> list[str]:
    """Tiles at three depths, and a file the pattern must not match."""
    made = []
    for rel in ("a_naip.tif", "sub/b_naip.tif", "sub/deeper/c_naip.tif"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        made.append(str(path))
    (root / "sub" / "b_lc.tif").write_bytes(b"")
    return sorted(made)


def test_data_prepare_inputs_recurse_through_double_star(tmp_path: Path) -> None:
    expected = _nested(tmp_path)
    assert expand_paths([f"{tmp_path}/**/*_naip.tif"], "image") == expected


def test_predict_tiles_recurse_through_double_star(tmp_path: Path) -> None:
    expected = _nested(tmp_path)
    assert resolve_tiles([f"{tmp_path}/**/*_naip.tif"]) == expected
    # one level still matches one level
    assert resolve_tiles([f"{tmp_path}/*/*_naip.tif"]) == [str(tmp_path / "sub" / "b_naip.tif")]
