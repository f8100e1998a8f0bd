"""The storage layer against real files and a real blob server (Azurite on loopback)."""

from __future__ import annotations

import hashlib
import os
import pickle
import signal
import socket
import stat as statmod
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from azurite import ACCOUNT_KEY, Azurite, apply_env

from landcover.errors import LandcoverError
from landcover.redaction import redact
from landcover.storage import (
    HOW_TO_SET,
    CredentialsError,
    StorageError,
    StorageNotFoundError,
    azure_auth,
    cached_read,
    download_file,
    exists,
    fetch_many,
    filesystem,
    glob,
    is_remote,
    join,
    list_files,
    listdir,
    parse,
    read_bytes,
    read_many,
    remove,
    stat,
    upload_file,
    write_bytes,
)
from landcover.storage.retry import RetryPolicy

from conftest import REPO

CREDENTIAL_NAMES = (
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
)


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


@pytest.fixture
def blob(azurite: Azurite, no_azure_env: pytest.MonkeyPatch) -> str:
    """A fresh container URL, with the emulator's connection string in the environment."""
    apply_env(no_azure_env, azurite.env())
    return f"az://{azurite.create_container()}"


# --- URL forms ---------------------------------------------------------------------------


def test_url_forms() -> None:
    assert not is_remote("/mnt/naip/a.tif") and not is_remote("rel/a.tif")
    assert not is_remote("file:///mnt/a.tif")
    assert is_remote("az://c/a.tif") and is_remote("abfs://c/a") and is_remote("memory://x")
    assert parse("az://cont/dir/a.tif").path == "cont/dir/a.tif"
    assert parse("abfss://cont/").path == "cont"
    loc = parse("abfs://cont@myacct.dfs.core.windows.net/dir/a.tif")
    assert (loc.account, loc.container, loc.blob) == ("myacct", "cont", "dir/a.tif")
    assert loc.url_for("cont/dir/b.tif") == "abfs://cont@myacct.dfs.core.windows.net/dir/b.tif"
    assert parse("file:///tmp/x").path == "/tmp/x"
    assert parse("memory://a/b").path == "/a/b"
    assert join("az://cont", "a/", "/b.tif") == "az://cont/a/b.tif"
    assert join("az://cont/", "b") == "az://cont/b"
    assert join("memory://", "x") == "memory://x"
    assert join("data", "a.tif") == "data/a.tif"
    for bad in ("s3://bucket/a", "az:///a", "abfs://cont@example.com/a"):
        with pytest.raises(StorageError) as info:
            parse(bad)
        _one_line(info.value)


# --- local disk, file:// and memory:// -----------------------------------------------------


@pytest.mark.parametrize("form", ["plain", "file", "memory"])
def test_round_trip_without_a_server(tmp_path: Path, form: str) -> None:
    base = {
        "plain": str(tmp_path / "store"),
        "file": f"file://{tmp_path}/store",
        "memory": f"memory://landcover-test-{os.getpid()}-{time.monotonic_ns()}",
    }[form]
    url = join(base, "sub", "a.bin")
    write_bytes(url, b"first")
    write_bytes(url, b"second version")
    assert read_bytes(url) == b"second version"
    write_bytes(join(base, "sub", "b.bin"), b"b")
    assert exists(url) and not exists(join(base, "sub", "nope.bin"))
    assert listdir(join(base, "sub")) == [join(base, "sub", "a.bin"), join(base, "sub", "b.bin")]
    assert glob(join(base, "sub", "*.bin")) == listdir(join(base, "sub"))
    assert list_files(base) == [("sub/a.bin", 14), ("sub/b.bin", 1)]
    assert stat(url).size == 14
    with pytest.raises(StorageNotFoundError) as info:
        read_bytes(join(base, "sub", "nope.bin"))
    assert "nope.bin" in _one_line(info.value)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, LandcoverError)
    remove(join(base, "sub", "b.bin"))
    assert not exists(join(base, "sub", "b.bin"))


def test_local_write_is_atomic_with_umask_mode(tmp_path: Path) -> None:
    target = tmp_path / "out" / "model.bin"
    write_bytes(str(target), b"x" * 1000)
    write_bytes(str(target), b"y" * 10)
    assert target.read_bytes() == b"y" * 10
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.bin"]  # no temp left
    mask = os.umask(0)
    os.umask(mask)
    assert statmod.S_IMODE(target.stat().st_mode) == 0o666 & ~mask


def test_local_upload_download_copies(tmp_path: Path) -> None:
    source = tmp_path / "src.bin"
    source.write_bytes(os.urandom(20_000))
    seen: list[int] = []
    assert upload_file(source, str(tmp_path / "nfs" / "copy.bin"), seen.append) == 20_000
    assert sum(seen) == 20_000
    assert download_file(str(tmp_path / "nfs" / "copy.bin"), tmp_path / "back.bin") == 20_000
    assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()
    with pytest.raises(StorageNotFoundError):
        upload_file(tmp_path / "missing.bin", str(tmp_path / "x.bin"))


# --- credentials -------------------------------------------------------------------------


def test_missing_credentials_name_the_variables(no_azure_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(CredentialsError) as info:
        read_bytes("az://cont/a.tif")
    message = _one_line(info.value)
    for variable in CREDENTIAL_NAMES:
        assert variable in message
    assert HOW_TO_SET in message


def test_http_endpoints_only_on_loopback() -> None:
    key = ACCOUNT_KEY
    remote = f"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={key}"
    with pytest.raises(CredentialsError) as info:
        azure_auth(env={"AZURE_STORAGE_CONNECTION_STRING": remote})
    assert "https" in _one_line(info.value) and "acct.blob.core.windows.net" in str(info.value)
    assert key not in str(info.value)
    endpoint = "AccountName=acct;AccountKey={};BlobEndpoint=http://10.1.2.3:10000/acct"
    with pytest.raises(CredentialsError):
        azure_auth(env={"AZURE_STORAGE_CONNECTION_STRING": endpoint.format(key)})
    env = {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_ACCOUNT_KEY": key,
        "AZURE_STORAGE_BLOB_ENDPOINT": "http://storage.example.com",
    }
    with pytest.raises(CredentialsError) as info:
        azure_auth(env=env)
    assert "AZURE_STORAGE_BLOB_ENDPOINT" in str(info.value)
    for host in ("127.0.0.1:10000", "localhost:10000", "[::1]:10000"):
        ok = azure_auth(env={**env, "AZURE_STORAGE_BLOB_ENDPOINT": f"http://{host}/acct"})
        assert ok.method == "account_key"
    assert azure_auth(env={**env, "AZURE_STORAGE_BLOB_ENDPOINT": ""}).endpoint == (
        "https://acct.blob.core.windows.net"
    )
    dev = azure_auth(env={"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"})
    assert (dev.account, dev.endpoint) == (
        "devstoreaccount1",
        "http://127.0.0.1:10000/devstoreaccount1",
    )
    managed = azure_auth(env={"AZURE_STORAGE_ACCOUNT_NAME": "acct"})
    assert managed.method == "default_credential"


def test_malformed_credentials_and_account_mismatch() -> None:
    with pytest.raises(CredentialsError) as info:
        azure_auth(env={"AZURE_STORAGE_CONNECTION_STRING": "not a connection string"})
    assert "not a connection string" not in _one_line(info.value)
    with pytest.raises(CredentialsError) as info:
        azure_auth(env={"AZURE_STORAGE_ACCOUNT_NAME": "a", "AZURE_STORAGE_ACCOUNT_KEY": "!!!"})
    assert "!!!" not in _one_line(info.value)
    env = {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY}
    with pytest.raises(CredentialsError) as info:
        azure_auth("other", env=env)
    assert "'other'" in _one_line(info.value) and "'acct'" in str(info.value)


def test_secrets_stay_out_of_repr_pickle_and_messages(
    azurite: Azurite, no_azure_env: pytest.MonkeyPatch
) -> None:
    apply_env(no_azure_env, azurite.env())
    auth = azure_auth()
    assert ACCOUNT_KEY not in repr(auth)
    blob = pickle.dumps(auth)
    assert ACCOUNT_KEY.encode() not in blob
    assert pickle.loads(blob).fingerprint == auth.fingerprint  # re-read from the environment
    message = f"failed: {azurite.connection_string} and ?sv=2024&sig=abcDEF123%3D&se=1"
    cleaned = redact(message)
    assert ACCOUNT_KEY not in cleaned and "abcDEF123" not in cleaned


# --- Azure Blob Storage (Azurite) --------------------------------------------------------


def _round_trip(base: str) -> None:
    url = join(base, "tiles", "a.bin")
    payload = os.urandom(300_000)
    write_bytes(url, payload)
    assert read_bytes(url) == payload
    write_bytes(url, b"replaced")
    assert read_bytes(url) == b"replaced"
    write_bytes(join(base, "tiles", "b.bin"), b"bb")
    assert exists(url) and exists(join(base, "tiles")) and not exists(join(base, "nope"))
    assert listdir(join(base, "tiles")) == [url, join(base, "tiles", "b.bin")]
    assert glob(join(base, "tiles", "*.bin")) == [url, join(base, "tiles", "b.bin")]
    assert list_files(base) == [("tiles/a.bin", 8), ("tiles/b.bin", 2)]
    info = stat(url)
    assert info.size == 8 and info.version


def test_blob_round_trip_connection_string(blob: str) -> None:
    _round_trip(blob)


def test_blob_round_trip_account_key(azurite: Azurite, no_azure_env: pytest.MonkeyPatch) -> None:
    apply_env(no_azure_env, azurite.env("account_key"))
    assert azure_auth().method == "account_key"
    _round_trip(f"az://{azurite.create_container()}")


def test_blob_round_trip_sas_token(azurite: Azurite, no_azure_env: pytest.MonkeyPatch) -> None:
    container = azurite.create_container()
    apply_env(no_azure_env, azurite.env("sas_token", sas=azurite.container_sas(container)))
    assert azure_auth().method == "sas_token"
    _round_trip(f"abfs://{container}")


def test_account_in_the_url(azurite: Azurite, blob: str) -> None:
    container = parse(blob).container
    base = f"abfs://{container}@{azurite.account_name}.dfs.core.windows.net/deep"
    write_bytes(join(base, "x.bin"), b"xyz")
    assert read_bytes(f"az://{container}/deep/x.bin") == b"xyz"
    assert listdir(base) == [join(base, "x.bin")]
    with pytest.raises(CredentialsError):
        read_bytes(f"abfs://{container}@someoneelse.dfs.core.windows.net/deep/x.bin")


def test_rejected_credentials(azurite: Azurite, no_azure_env: pytest.MonkeyPatch) -> None:
    container = azurite.create_container()
    with azurite.service_client() as client:
        client.get_blob_client(container, "a.bin").upload_blob(b"secret data")
    wrong = azurite.env("account_key")
    wrong["AZURE_STORAGE_ACCOUNT_KEY"] = "d3Jvbmcga2V5IGZvciB0aGUgdGVzdA=="  # valid base64
    apply_env(no_azure_env, wrong)
    start = time.monotonic()
    with pytest.raises(CredentialsError) as info:
        read_bytes(f"az://{container}/a.bin")
    assert time.monotonic() - start < 10  # not retried
    message = _one_line(info.value)
    assert "rejected" in message and "AZURE_STORAGE_ACCOUNT_KEY" in message
    assert wrong["AZURE_STORAGE_ACCOUNT_KEY"] not in message


def test_missing_blob_and_container(blob: str, tmp_path: Path) -> None:
    with pytest.raises(StorageNotFoundError) as info:
        download_file(join(blob, "missing.tif"), tmp_path / "missing.tif")
    assert "missing.tif" in _one_line(info.value)
    assert list(tmp_path.iterdir()) == []  # no partial or temporary file
    with pytest.raises(StorageNotFoundError) as info:
        write_bytes("az://no-such-container/a.bin", b"x")
    assert "container does not exist" in _one_line(info.value)


def test_upload_download_file(blob: str, tmp_path: Path) -> None:
    source = tmp_path / "tile.tif"
    source.write_bytes(os.urandom(5_000_000))
    seen: list[int] = []
    assert upload_file(source, join(blob, "t", "tile.tif"), seen.append) == 5_000_000
    assert sum(seen) == 5_000_000
    seen.clear()
    out = tmp_path / "down" / "tile.tif"
    assert download_file(join(blob, "t", "tile.tif"), out, seen.append) == 5_000_000
    assert out.read_bytes() == source.read_bytes() and sum(seen) == 5_000_000
    assert sorted(p.name for p in out.parent.iterdir()) == ["tile.tif"]


def test_read_many_in_parallel(blob: str) -> None:
    urls = [join(blob, f"obj{i:02d}.bin") for i in range(12)]
    payloads = [os.urandom(50_000 + i) for i in range(12)]
    for url, data in zip(urls, payloads, strict=True):
        write_bytes(url, data)
    assert read_many(urls, max_concurrency=4) == payloads
    fetched = fetch_many(urls, max_concurrency=6)
    assert fetched.data == payloads and fetched.nbytes == sum(map(len, payloads))
    assert fetched.seconds > 0 and "12 objects" in fetched.summary() and "MB/s" in fetched.summary()
    with pytest.raises(StorageNotFoundError):
        read_many([*urls, join(blob, "missing.bin")], max_concurrency=4)


# --- outages ---------------------------------------------------------------------------


@pytest.fixture
def private_blob(azurite_private: Azurite, no_azure_env: pytest.MonkeyPatch) -> str:
    apply_env(no_azure_env, azurite_private.env())
    return f"az://{azurite_private.create_container()}"


def test_dead_server_fails_within_the_bound(
    azurite_private: Azurite, private_blob: str, tmp_path: Path, no_azure_env: pytest.MonkeyPatch
) -> None:
    url = join(private_blob, "a.bin")
    write_bytes(url, b"data")
    azurite_private.stop()
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        read_bytes(url)  # default policy: 30 s retry budget
    elapsed = time.monotonic() - start
    print(f"\nread from a stopped server failed after {elapsed:.1f} s: {info.value}")
    assert elapsed < 60
    message = _one_line(info.value)
    assert url in message and "gave up after" in message
    assert not isinstance(info.value, StorageNotFoundError)
    # writes, uploads and downloads give up too (short budget to keep the test quick)
    no_azure_env.setenv("LANDCOVER_STORAGE_RETRY_S", "2")
    source = tmp_path / "s.bin"
    source.write_bytes(b"s")
    for operation in (
        lambda: write_bytes(url, b"new"),
        lambda: upload_file(source, url),
        lambda: download_file(url, tmp_path / "d.bin"),
        lambda: list_files(private_blob),
    ):
        start = time.monotonic()
        with pytest.raises(StorageError):
            operation()
        assert time.monotonic() - start < 15
    assert not (tmp_path / "d.bin").exists()


def test_retries_ride_out_a_short_outage(azurite_private: Azurite, private_blob: str) -> None:
    url = join(private_blob, "a.bin")
    write_bytes(url, b"still here")
    azurite_private.stop()
    restart = threading.Timer(2.0, azurite_private.start)
    restart.start()
    try:
        assert read_bytes(url, RetryPolicy(budget_s=30)) == b"still here"
    finally:
        restart.join()


def test_cache_serves_a_second_read_without_the_server(
    azurite_private: Azurite, private_blob: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    url = join(private_blob, "tile.tif")
    write_bytes(url, b"version 1")
    assert cached_read(url, cache) == b"version 1"
    entries = list(cache.iterdir())
    assert len(entries) == 1 and entries[0].read_bytes() == b"version 1"
    write_bytes(url, b"version two")  # revalidation sees the new ETag
    assert cached_read(url, cache) == b"version two"
    assert [p.read_bytes() for p in cache.iterdir()] == [b"version two"]
    assert fetch_many([url], cache_dir=cache).data == [b"version two"]
    azurite_private.stop()
    start = time.monotonic()
    assert cached_read(url, cache, revalidate=False) == b"version two"
    assert time.monotonic() - start < 1
    with pytest.raises(StorageError):
        cached_read(join(private_blob, "never-cached.tif"), cache, False, RetryPolicy(budget_s=1))


# --- a cache folder shared by processes ----------------------------------------------------

READER = """
import hashlib, sys, time
from pathlib import Path
from landcover.storage import cached_read
from landcover.storage.filesystems import filesystem

who, url, folder = sys.argv[1:4]
if who == "fsspec":
    from fsspec.implementations.cached import WholeFileCacheFileSystem

    fs, path = filesystem(url)
    cache = WholeFileCacheFileSystem(
        fs=fs, cache_storage=folder, check_files=True, expiry_time=False, skip_instance_cache=True
    )
    read = lambda: cache.cat(path)
else:
    read = lambda: cached_read(url, folder)
print("ready", flush=True)
if who == "loop":  # read until told to stop, then print what each read held
    seen = []
    while not Path(folder, "stop").exists():
        seen.append(hashlib.sha256(read()).hexdigest())
        Path(folder, f"ready-{sys.argv[4]}").touch()
    print(" ".join(seen), flush=True)
else:  # one read when told to
    sys.stdin.readline()
    print("reading", flush=True)
    read()
"""


def _reader(*args: str) -> subprocess.Popen:
    """A reader process (see READER) with this test's environment; waits until it is ready."""
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_processes_sharing_a_cache_folder_read_whole_current_objects(
    azurite_private: Azurite, private_blob: str, tmp_path: Path
) -> None:
    """Three worker processes read one blob through one cache folder while it is rewritten."""
    cache, url = tmp_path / "cache", join(private_blob, "tile.tif")
    versions = [os.urandom(1_000_000 + 1_000 * (i % 2)) for i in range(6)]  # equal sizes too
    write_bytes(url, versions[0])
    cache.mkdir()
    workers = [_reader("loop", url, str(cache), str(i)) for i in range(3)]
    try:
        deadline = time.monotonic() + 60
        while not all((cache / f"ready-{i}").exists() for i in range(3)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for data in versions[1:]:
            write_bytes(url, data)
            time.sleep(0.4)
        (cache / "stop").touch()
        outputs = [w.communicate(timeout=60)[0].split() for w in workers]
    finally:
        for w in workers:
            w.kill()
    known = {_digest(v) for v in versions}
    for seen in outputs:
        assert seen and set(seen) <= known  # every read a whole version, never a torn one
        assert len(set(seen)) >= 3  # revalidation saw the rewrites
    assert cached_read(url, cache) == versions[-1]
    entries = [p.name for p in cache.glob("*.bin")]
    assert len(entries) == 1 and f"-{len(versions[-1])}-" in entries[0]
    assert not list(cache.glob(".*.tmp"))


def _kill_mid_read(reader: subprocess.Popen, server: Azurite, mid: Callable[[], bool]) -> None:
    """Lets a reader start its read, freezes the server once ``mid()``, kills the reader."""
    assert reader.stdin is not None and reader.stdout is not None
    reader.stdin.write("go\n")
    reader.stdin.flush()
    assert reader.stdout.readline().strip() == "reading"
    deadline = time.monotonic() + 30
    while not mid():
        assert reader.poll() is None, "the read ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.001)
    group = os.getpgid(server.process.pid)  # its own session
    os.killpg(group, signal.SIGSTOP)  # the transfer stops where it is
    try:
        reader.kill()
        reader.wait(timeout=30)
    finally:
        os.killpg(group, signal.SIGCONT)


def test_a_reader_killed_mid_read_leaves_the_shared_cache_whole(
    azurite_private: Azurite, private_blob: str, tmp_path: Path
) -> None:
    cache, url = tmp_path / "cache", join(private_blob, "big.tif")
    payload = os.urandom(32 * 2**20)
    write_bytes(url, payload)
    reader = _reader("ours", url, str(cache))
    _kill_mid_read(reader, azurite_private, lambda: True)
    for entry in cache.glob("*.bin"):  # none, unless the read had finished: then whole
        assert entry.read_bytes() == payload
    assert cached_read(url, cache) == payload
    assert cached_read(url, cache) == payload  # now from the cache


def test_fsspec_filecache_is_not_safe_for_processes_sharing_a_folder(
    azurite_private: Azurite, private_blob: str, tmp_path: Path
) -> None:
    """Why landcover.storage.cache is kept rather than fsspec's ``filecache::``.

    fsspec's WholeFileCacheFileSystem (a) writes every download in place, under one name per
    path, and (b) keeps each process's snapshot of the metadata for ``cache_check`` seconds.
    So a worker that started before another cached a tile downloads it again over the
    other's complete copy; killed meanwhile (preempted, out of memory), it leaves a partial
    file that the metadata, whose ETag still matches, vouches for: every later reader gets
    damaged bytes, with revalidation on. (Two workers reading one tile at once tear it too:
    see the shared-folder row of benchmarks/storage_bench.py.) Ours writes each entry under a
    name holding the ETag and size, to a temporary name first, renamed when complete.
    If this test fails, fsspec's cache has become safe to share: replace ours with it.
    """
    from fsspec.implementations.cached import WholeFileCacheFileSystem

    cache, url = tmp_path / "cache", join(private_blob, "big.tif")
    payload = os.urandom(32 * 2**20)
    write_bytes(url, payload)
    fs, path = filesystem(url)

    def filecache() -> WholeFileCacheFileSystem:
        return WholeFileCacheFileSystem(
            fs=fs, cache_storage=str(cache), check_files=True, skip_instance_cache=True
        )

    late = _reader("fsspec", url, str(cache))  # started before the tile was cached
    assert filecache().cat(path) == payload  # another worker caches it
    copy = next(p for p in cache.iterdir() if p.name != "cache")
    _kill_mid_read(late, azurite_private, lambda: copy.stat().st_size < len(payload))
    damaged = filecache().cat(path)  # a later reader, revalidating against the ETag
    assert damaged != payload and len(damaged) < len(payload)
    assert cached_read(url, tmp_path / "ours") == payload


def test_filesystem_is_reused(blob: str) -> None:
    fs1, path = filesystem(join(blob, "a"))
    fs2, _ = filesystem(join(blob, "b"))
    assert fs1 is fs2 and path.endswith("/a")


def test_hung_server_times_out(no_azure_env: pytest.MonkeyPatch) -> None:
    """A server that accepts connections but never answers: the read timeout ends it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel completes connections; nobody ever answers
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}/devstoreaccount1"
        connection = (
            f"AccountName=devstoreaccount1;AccountKey={ACCOUNT_KEY};BlobEndpoint={endpoint}"
        )
        no_azure_env.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
        policy = RetryPolicy(budget_s=3, connect_timeout_s=1, read_timeout_s=1)
        start = time.monotonic()
        with pytest.raises(StorageError) as info:
            read_bytes("az://cont/x.bin", policy)
        assert time.monotonic() - start < 15
        assert "gave up after" in _one_line(info.value)
