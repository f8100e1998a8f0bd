"""The suite's own order: the files conftest deals first to the test processes exist."""

from conftest import REPO, SLOWEST_FILES_FIRST


def test_the_slowest_files_dealt_first_exist() -> None:
    # a file moved or renamed would silently fall back to the end of the run
    missing = [name for name in SLOWEST_FILES_FIRST if not (REPO / name).is_file()]
    assert not missing, f"tests/conftest.py SLOWEST_FILES_FIRST names missing files: {missing}"
    assert len(set(SLOWEST_FILES_FIRST)) == len(SLOWEST_FILES_FIRST)
