"""``landcover data upload`` / ``data download`` against Azurite: the commands as real subprocesses,
then the library behind them in process (outages, progress lines)."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest
from azurite import ACCOUNT_KEY, AZURE_VARIABLES, Azurite, apply_env, free_port

from landcover.storage import StorageError
from landcover.storage.progress import transfer_progress
from landcover.storage.retry import RetryPolicy
from landcover.storage.transfer import TransferSummary, download, upload

from conftest import assert_one_line_error, run_cli

SUMMARY = re.compile(r"^(up|down)loaded (\d+) files, [\d.]+ MB in [\d.]+ s \([\d.]+ MB/s\) to ")


def _folder(root: Path) -> dict[str, bytes]:
    files = {
        "a_naip.tif": os.urandom(300_000),
        "a_lc.tif": os.urandom(100_000),
        "sub/b_naip.tif": os.urandom(1_500_000),
        "sub/deeper/notes.txt": b"hello\n",
        "empty.bin": b"",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _no_secrets(result, *secrets: str) -> None:
    output = result.stdout + result.stderr
    for secret in secrets:
        assert secret not in output


def test_folder_round_trip(azurite: Azurite, tmp_path: Path) -> None:
    source = tmp_path / "src"
    files = _folder(source)
    container = azurite.create_container()
    env = azurite.env()
    up = run_cli("data", "upload", str(source), f"az://{container}/data/v1", "-j", "3", env=env)
    assert up.returncode == 0, up.stderr
    assert SUMMARY.match(up.stdout) and "uploaded 5 files" in up.stdout, up.stdout
    print("\n" + up.stdout.strip())
    back = tmp_path / "back"
    down = run_cli("data", "download", f"az://{container}/data", str(back), env=env)
    assert down.returncode == 0, down.stderr
    assert SUMMARY.match(down.stdout) and "downloaded 5 files" in down.stdout, down.stdout
    print(down.stdout.strip())
    assert _tree(back / "v1") == files  # byte-identical, nothing extra (no temporary files)
    _no_secrets(up, ACCOUNT_KEY, azurite.connection_string)
    _no_secrets(down, ACCOUNT_KEY, azurite.connection_string)


def test_single_file_and_sas_token(azurite: Azurite, tmp_path: Path) -> None:
    tile = tmp_path / "tile.tif"
    tile.write_bytes(os.urandom(70_000))
    container = azurite.create_container()
    sas = azurite.container_sas(container)
    env = azurite.env("sas_token", sas=sas)
    up = run_cli("data", "upload", str(tile), f"abfs://{container}/tiles/", env=env)
    assert up.returncode == 0, up.stderr
    assert "uploaded 1 files" in up.stdout
    out = tmp_path / "out"
    out.mkdir()
    down = run_cli("data", "download", f"az://{container}/tiles/tile.tif", str(out), env=env)
    assert down.returncode == 0, down.stderr
    assert (out / "tile.tif").read_bytes() == tile.read_bytes()
    renamed = run_cli(
        "data", "download", f"az://{container}/tiles/tile.tif", str(out / "x.tif"), env=env
    )
    assert renamed.returncode == 0 and (out / "x.tif").read_bytes() == tile.read_bytes()
    for result in (up, down, renamed):
        _no_secrets(result, sas, ACCOUNT_KEY)


def test_local_to_local_copy(tmp_path: Path) -> None:
    source = tmp_path / "src"
    files = _folder(source)
    result = run_cli("data", "upload", str(source), str(tmp_path / "nfs" / "copy"))
    assert result.returncode == 0, result.stderr
    assert _tree(tmp_path / "nfs" / "copy") == files


def test_errors_are_one_line(azurite: Azurite, tmp_path: Path) -> None:
    blank = dict.fromkeys(AZURE_VARIABLES, "")
    source = tmp_path / "src"
    _folder(source)
    result = run_cli("data", "upload", str(source), "az://somewhere/x", env=blank)
    line = assert_one_line_error(result, "AZURE_STORAGE_CONNECTION_STRING")
    assert "AZURE_STORAGE_ACCOUNT_KEY" in line and "AZURE_STORAGE_SAS_TOKEN" in line

    result = run_cli("data", "upload", str(tmp_path / "nope"), "az://c/x", env=azurite.env())
    assert_one_line_error(result, "nope", "no such file or folder")

    container = azurite.create_container()
    result = run_cli(
        "data", "download", f"az://{container}/nothing", str(tmp_path / "d"), env=azurite.env()
    )
    assert_one_line_error(result, "nothing to download")

    insecure = {
        **blank,
        "AZURE_STORAGE_CONNECTION_STRING": (
            f"AccountName=acct;AccountKey={ACCOUNT_KEY};BlobEndpoint=http://10.9.8.7/acct"
        ),
    }
    result = run_cli("data", "download", "az://c/x", str(tmp_path / "d"), env=insecure)
    assert_one_line_error(result, "https")
    _no_secrets(result, ACCOUNT_KEY)


def test_unreachable_server_fails_cleanly(tmp_path: Path) -> None:
    dead = Azurite(tmp_path / "dead", port=free_port())  # never started: nothing listens
    env = {**dead.env(), "LANDCOVER_STORAGE_RETRY_S": "2"}
    result = run_cli("data", "download", "az://cont/data", str(tmp_path / "d"), env=env, timeout=60)
    assert_one_line_error(result, "az://cont/data", "gave up after")
    assert not (tmp_path / "d").exists()
    _no_secrets(result, ACCOUNT_KEY)


# --- the library behind the commands (fsspec's put/get), in process --------------------------


def _outage_setup(server: Azurite, env: pytest.MonkeyPatch, tmp_path: Path) -> tuple[str, dict]:
    """Sixteen 3 MB blobs under a prefix; returns its URL and the files."""
    apply_env(env, server.env())
    source = tmp_path / "src"
    source.mkdir()
    files = {f"f{i:02d}.bin": os.urandom(3_000_000) for i in range(16)}
    for rel, data in files.items():
        (source / rel).write_bytes(data)
    url = f"az://{server.create_container()}/data"
    assert upload(source, url, 4, show_progress=False).files == 16
    return url, files


def _when_first_file_lands(out: Path, copy: threading.Thread) -> dict[str, int]:
    """Waits until a download has put its first file in place; returns the inodes there."""
    while not (out.is_dir() and any(not p.name.startswith(".") for p in out.iterdir())):
        assert copy.is_alive(), "the copy ended early"
        time.sleep(0.002)
    return {p.name: p.stat().st_ino for p in out.iterdir() if not p.name.startswith(".")}


def test_download_rides_out_an_outage_copying_only_the_rest(
    azurite_private: Azurite, no_azure_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url, files = _outage_setup(azurite_private, no_azure_env, tmp_path)
    out, result = tmp_path / "out", {}
    copy = threading.Thread(
        target=lambda: result.update(s=download(url, out, 2, False, RetryPolicy(budget_s=30)))
    )
    copy.start()
    before = _when_first_file_lands(out, copy)
    azurite_private.stop()
    time.sleep(1.5)
    azurite_private.start()
    copy.join(timeout=120)
    assert len(before) < len(files), "the outage came after the copy"
    assert result["s"].files == 16 and result["s"].nbytes == 48_000_000
    assert _tree(out) == files  # nothing extra: no temporary file left
    assert {n: (out / n).stat().st_ino for n in before} == before  # not copied again


def test_a_download_that_gives_up_leaves_whole_files_only(
    azurite_private: Azurite, no_azure_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url, files = _outage_setup(azurite_private, no_azure_env, tmp_path)
    out, result = tmp_path / "out", {}

    def run() -> None:
        try:
            download(url, out, 2, False, RetryPolicy(budget_s=1))
        except StorageError as exc:
            result["error"] = exc

    copy = threading.Thread(target=run)
    copy.start()
    _when_first_file_lands(out, copy)
    azurite_private.stop()
    copy.join(timeout=60)
    message = str(result["error"])
    assert "\n" not in message and url in message and "gave up after" in message
    left = _tree(out)
    assert 0 < len(left) < len(files)
    assert all(files[rel] == data for rel, data in left.items())  # whole files, no temporaries


def test_summary_and_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    summary = TransferSummary("uploaded", 3, 2_500_000, 2.0, "az://c/x?sv=2024-08-04&sig=c2VjcmV0")
    assert summary.line().startswith("uploaded 3 files, 2.5 MB in 2.0 s (1.2 MB/s) to az://c/x")
    assert "c2VjcmV0" not in summary.line()
    with transfer_progress("downloaded", 3, 3_000_000, every_s=0.0) as advance:
        advance(1_000_000, 1)
        advance(500_000, 0)
        advance(-500_000, 0)  # a file started over
        advance(1_000_000, 1)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("downloaded 1/3 files, 1.0/3.0 MB, ")
    assert lines[-1].startswith("downloaded 2/3 files, 2.0/3.0 MB, ")
