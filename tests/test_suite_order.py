"""The suite's own shape: the files conftest deals first exist, and no two share a name."""

from conftest import REPO, SLOWEST_FILES_FIRST


def test_the_slowest_files_dealt_first_exist() -> None:
    # a file moved or renamed would silently fall back to the end of the run
    missing = [name for name in SLOWEST_FILES_FIRST if not (REPO / name).is_file()]
    assert not missing, f"tests/conftest.py SLOWEST_FILES_FIRST names missing files: {missing}"
    assert len(set(SLOWEST_FILES_FIRST)) == len(SLOWEST_FILES_FIRST)


def test_no_two_test_files_share_a_name() -> None:
    # the test folders are not packages (rootdir imports): a second test_x.py anywhere stops
    # pytest collecting the first one seen with "import file mismatch" (CI failed on
    # tests/export/test_architectures.py beside tests/models/test_architectures.py)
    files = sorted((REPO / "tests").rglob("test_*.py"))
    seen: dict[str, list[str]] = {}
    for path in files:
        seen.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert len(files) > 50
    assert shared == {}
