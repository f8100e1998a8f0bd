"""One run folder a process, each pair listed and read once (issue 46, item 1).

``landcover train --workers 1`` runs the launcher and the worker in one process: the launcher
builds the process's :class:`RunFolder` and lists the pairs, and hands both down to the worker
and its trainer; the worker's pixel read is the pairs' only read (the launcher reads headers
only for workers that are other processes). The counts come from wrappers around the real
functions, which still do the work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from landcover import storage
from landcover.data import pairs as pairs_module
from landcover.data import raster as raster_module
from landcover.training.runfolder import RunFolder

from conftest import run_cli, train_args


def _counting(calls: list[Any], real: Callable[..., Any], key: Callable[..., Any]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(key(*args, **kwargs))
        return real(*args, **kwargs)

    return wrapper


def test_one_run_folder_and_one_read_of_each_pair_a_process(
    tiny_data: Path, tiny_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folders: list[str] = []
    listings: list[str] = []
    opened: list[str] = []
    fetched: list[str] = []
    real_init = RunFolder.__init__

    def init(self: RunFolder, out: str, check: bool = True) -> None:
        folders.append(out)
        real_init(self, out, check)

    def open_raster(path: str, *args: Any, **kwargs: Any) -> AbstractContextManager[Any]:
        opened.append(Path(path).name)
        return real_open(path, *args, **kwargs)

    def fetch_many(urls: list[str], **kwargs: Any) -> Iterator[Any]:
        fetched.extend(Path(u).name for u in urls)
        return real_fetch(urls, **kwargs)

    real_open = raster_module.open_raster
    real_fetch = storage.fetch_many
    monkeypatch.setattr(RunFolder, "__init__", init)
    monkeypatch.setattr(raster_module, "open_raster", open_raster)
    monkeypatch.setattr(storage, "fetch_many", fetch_many)
    monkeypatch.setattr(
        pairs_module,
        "discover_pairs",
        _counting(listings, pairs_module.discover_pairs, lambda root, *_: str(root)),
    )
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1"),
        *("--samples-per-epoch", "8"),
    )
    assert result.returncode == 0, result.stderr
    assert (run / "checkpoints" / "last.pt").is_file()
    assert folders == [str(run)]
    assert listings == [str(tiny_data)]
    files = sorted(p.name for p in tiny_data.glob("*.tif"))
    assert len(files) == 16  # eight pairs, training and validation
    assert sorted(opened) == files
    assert sorted(fetched) == files
    assert Counter(opened).most_common(1)[0][1] == 1
