"""A real STAC API on loopback for the tests: ``rustac serve`` and its in-memory back end."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pystac


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rustac() -> str:
    """The ``rustac`` command of this interpreter's environment."""
    beside = Path(sys.executable).with_name("rustac")
    found = str(beside) if beside.exists() else shutil.which("rustac")
    assert found, "rustac is not installed (pip install rustac; it is in the dev extra)"
    return found


@contextmanager
def stac_api(
    folder: Path, collection: pystac.Collection, items: list[pystac.Item]
) -> Iterator[str]:
    """Serves ``items`` of ``collection`` as a STAC API on loopback; yields its URL."""
    collection_file = folder / "collection.json"
    items_file = folder / "items.json"
    collection_file.write_text(json.dumps(collection.to_dict(include_self_link=False)))
    items_file.write_text(json.dumps(pystac.ItemCollection(items).to_dict()))
    url = f"http://127.0.0.1:{_free_port()}"
    server = subprocess.Popen(
        [rustac(), "serve", "--addr", url.removeprefix("http://"), str(collection_file), str(items_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/collections", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "rustac serve did not start"
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(10)
