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


def test_a_glob_over_a_folder_of_pairs_takes_the_images(tmp_path: Path) -> None:
    """``predict "data/*.tif"`` on a folder of training pairs: the images, not their labels
    (which failed as 1-band tiles), as the folder argument gives; a lone GeoTIFF stays."""
    for name in ("a_naip.tif", "a_lc.tif", "b_naip.tif", "b_lc.tif", "other.tif"):
        (tmp_path / name).write_bytes(b"")
    expected = [str(tmp_path / n) for n in ("a_naip.tif", "b_naip.tif", "other.tif")]
    assert resolve_tiles([f"{tmp_path}/*.tif"]) == expected
    # a partner lies beside its image: a label of that name in another folder is a tile
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a_lc.tif").write_bytes(b"")
    assert str(tmp_path / "sub" / "a_lc.tif") in resolve_tiles([f"{tmp_path}/**/*.tif"])
    # without images of the suffix, every match is a tile
    assert resolve_tiles([f"{tmp_path}/*_lc.tif"]) == [
        str(tmp_path / "a_lc.tif"),
        str(tmp_path / "b_lc.tif"),
    ]
