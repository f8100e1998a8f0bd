"""A real Azure Blob Storage server for tests: Azurite on a free loopback port.

``bash scripts/install-azurite.sh`` installs it into ``.tools/azurite`` (``scripts/test.sh``
does this). Fixtures:

- ``azurite`` (session): one server shared by the whole run; do not stop it in a test.
- ``azurite_private`` (function): a server of the test's own, which it may ``stop()`` and
  ``start()`` again (same port, same data) to play an outage.

Both yield an :class:`Azurite` with the connection string, account name and key (Azurite's
well-known development key, public and only valid on the emulator), the blob endpoint,
``env()`` for the environment variables, ``create_container()`` and ``container_sas()``.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
AZURITE_BIN = REPO / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
INSTALL_HINT = "Azurite is not installed: run bash scripts/install-azurite.sh"

ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURE_VARIABLES = (
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_BLOB_ENDPOINT",
)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Azurite:
    """One ``azurite-blob`` process on 127.0.0.1, keeping its data in ``location``.

    Args:
        location: Folder for the server's data and log.
        port: Port to listen on (default: a free one); kept across ``stop()``/``start()``.
    """

    host = "127.0.0.1"
    account_name = ACCOUNT_NAME
    account_key = ACCOUNT_KEY

    def __init__(self, location: Path, port: int | None = None) -> None:
        self.location = Path(location)
        self.location.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None

    @property
    def blob_endpoint(self) -> str:
        """``http://127.0.0.1:PORT/devstoreaccount1``."""
        return f"http://{self.host}:{self.port}/{self.account_name}"

    @property
    def connection_string(self) -> str:
        """A connection string for the emulator's account."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account_name};"
            f"AccountKey={self.account_key};BlobEndpoint={self.blob_endpoint};"
        )

    def env(self, method: str = "connection_string", **extra: str) -> dict[str, str]:
        """Environment variables for one way of signing in.

        Args:
            method: ``connection_string``, ``account_key`` or ``sas_token`` (pass
                ``sas=...``, e.g. from :meth:`container_sas`).
            **extra: ``sas`` for the SAS token.

        Returns:
            Every ``AZURE_STORAGE_*`` variable: the ones for ``method`` set, the others ''.
        """
        env = dict.fromkeys(AZURE_VARIABLES, "")
        if method == "connection_string":
            env["AZURE_STORAGE_CONNECTION_STRING"] = self.connection_string
        else:
            env["AZURE_STORAGE_ACCOUNT_NAME"] = self.account_name
            env["AZURE_STORAGE_BLOB_ENDPOINT"] = self.blob_endpoint
            if method == "account_key":
                env["AZURE_STORAGE_ACCOUNT_KEY"] = self.account_key
            elif method == "sas_token":
                env["AZURE_STORAGE_SAS_TOKEN"] = extra["sas"]
            else:
                raise ValueError(method)
        return env

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 30.0) -> None:
        """Starts the server and waits (at most ``timeout`` s) until it answers HTTP."""
        if self.running:
            return
        if not AZURITE_BIN.exists():
            pytest.fail(INSTALL_HINT, pytrace=False)
        log = open(self.location / "azurite.log", "ab")  # noqa: SIM115 - owned by the process
        try:
            self.process = subprocess.Popen(
                [
                    str(AZURITE_BIN),
                    "--blobHost",
                    self.host,
                    "--blobPort",
                    str(self.port),
                    "--location",
                    str(self.location / "data"),
                    "--silent",
                    "--skipApiVersionCheck",
                    "--loose",
                    "--disableTelemetry",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            pytest.fail(f"cannot start Azurite ({exc}): {INSTALL_HINT}", pytrace=False)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = (self.location / "azurite.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"Azurite exited at start: {output}", pytrace=False)
            if self._answers():
                return
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"Azurite did not answer on port {self.port} within {timeout} s")

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.blob_endpoint}?comp=list", timeout=1)
        except urllib.error.HTTPError:
            return True  # any HTTP answer (403 without a signature) means it is up
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """Stops the server (terminate, then kill after 10 s); data stay in ``location``."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def service_client(self):  # -> azure.storage.blob.BlobServiceClient
        """A synchronous azure-storage-blob client for setting up test data."""
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def create_container(self, name: str | None = None) -> str:
        """Creates a container (a fresh unique name by default) and returns its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        with self.service_client() as client:
            client.create_container(name)
        return name

    def container_sas(self, container: str, hours: float = 1.0) -> str:
        """A SAS token with read/add/create/write/delete/list rights on ``container``."""
        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        return generate_container_sas(
            self.account_name,
            container,
            account_key=self.account_key,
            permission=ContainerSasPermissions(
                read=True, add=True, create=True, write=True, delete=True, list=True
            ),
            expiry=datetime.now(timezone.utc) + timedelta(hours=hours),
            protocol="https,http",
        )


def apply_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """Sets the non-empty variables of ``env`` and removes the empty ones, for one test."""
    for variable, value in env.items():
        if value:
            monkeypatch.setenv(variable, value)
        else:
            monkeypatch.delenv(variable, raising=False)


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """An Azurite blob server shared by the test session (do not stop it)."""
    server = Azurite(tmp_path_factory.mktemp("azurite"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def azurite_private(tmp_path: Path) -> Iterator[Azurite]:
    """An Azurite blob server of this test's own, which it may stop and start again."""
    server = Azurite(tmp_path / "azurite")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def no_azure_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Removes every ``AZURE_STORAGE_*`` variable for the test; returns the monkeypatch."""
    for variable in AZURE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch
