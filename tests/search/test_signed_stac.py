"""predict --stac --sign planetary-computer: blobs read with SAS tokens from a token endpoint.

A real chain on loopback: NAIP-like tiles in Azurite (container ``naip`` of
``devstoreaccount1``), STAC items (``rustac serve``) whose hrefs are the Planetary Computer's
form ``https://devstoreaccount1.blob.core.windows.net/naip/NAME.tif``, and a stand-in of the
Planetary Computer's token endpoint that answers real container SAS tokens, which Azurite
checks. The environment has the account's name and endpoint, and no key: the tiles can only be
read with the endpoint's tokens, and no token may reach a printed line or a written byte.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import morecantile
import numpy as np
import pytest
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import ContainerSasPermissions, generate_container_sas
from azurite import AZURE_VARIABLES, Azurite
from browser import Viewer
from PIL import Image
from rasterio.warp import transform
from rio_tiler.io import Reader
from shapely.geometry import box
from stacserver import naip_collection, naip_item, stac_api, write_area

from conftest import assert_one_line_error, run_cli, write_naip_tile

CRS = "EPSG:26918"
SIDE = 64  # metres (1 m pixels)
CORNERS = {"s1": (400000, 4300000), "s2": (400064, 4300000), "s3": (400000, 4299936)}
AREA = box(400030, 4299900, 400100, 4299980)  # in UTM 18N: cuts all three
CONTAINER = "naip"
TOKEN_PATH = "/api/sas/v1/token"


@dataclass
class TokenEndpoint:
    """The stand-in of the Planetary Computer's token endpoint.

    Attributes:
        azurite: The blob server whose account the tokens are for.
        url: ``PC_SDK_SAS_URL`` for it.
        status: The HTTP status it answers (200: a token).
        lifetime_s: The ``msft:expiry`` it announces, from now (the SAS lasts an hour).
        tokens: Every token it gave, in order.
    """

    azurite: Azurite
    url: str = ""
    status: int = 200
    lifetime_s: float = 3600.0
    tokens: list[str] = field(default_factory=list)

    def answer(self, path: str) -> tuple[int, bytes]:
        if self.status != 200:
            return self.status, b'{"detail": "forbidden"}'
        if path != f"{TOKEN_PATH}/{self.azurite.account_name}/{CONTAINER}":
            return 404, b'{"detail": "no such container"}'
        now = datetime.now(timezone.utc)
        token = generate_container_sas(
            self.azurite.account_name,
            CONTAINER,
            account_key=self.azurite.account_key,
            permission=ContainerSasPermissions(read=True, list=True),
            # a distinct token at each call: its expiry moves on by the calls
            expiry=now + timedelta(hours=1, seconds=len(self.tokens)),
            protocol="https,http",
        )
        self.tokens.append(token)
        expiry = (now + timedelta(seconds=self.lifetime_s)).isoformat()
        return 200, json.dumps({"msft:expiry": expiry, "token": token}).encode()

    def signatures(self) -> list[bytes]:
        """Each token's ``sig`` value, as sent (percent-encoded) and decoded."""
        found = set()
        for token in self.tokens:
            encoded = token.split("sig=", 1)[1].split("&", 1)[0]
            found |= {encoded.encode(), parse_qs(token)["sig"][0].encode(), token.encode()}
        return sorted(found)


@pytest.fixture
def tokens(azurite: Azurite) -> Iterator[TokenEndpoint]:
    endpoint = TokenEndpoint(azurite)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = endpoint.answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}{TOKEN_PATH}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def world(azurite: Azurite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    folder = tmp_path_factory.mktemp("signedworld")
    rng = np.random.default_rng(1)
    with azurite.service_client() as client:
        with contextlib.suppress(ResourceExistsError):
            client.create_container(CONTAINER)
        container = client.get_container_client(CONTAINER)
        items = []
        for name, corner in CORNERS.items():
            image = rng.integers(1, 255, size=(4, SIDE, SIDE), dtype=np.uint8)
            path = write_naip_tile(folder / f"{name}_naip.tif", image, CRS, 1.0, corner)
            container.upload_blob(path.name, path.read_bytes(), overwrite=True)
            footprint = box(corner[0], corner[1] - SIDE, corner[0] + SIDE, corner[1])
            href = f"https://{azurite.account_name}.blob.core.windows.net/{CONTAINER}/{path.name}"
            items.append(naip_item(name, footprint, CRS, 2018, href))
    collection = naip_collection("NAIP in Azurite")
    aoi = write_area(folder / "aoi.geojson", AREA, CRS)
    with stac_api(folder, collection, items) as url:
        yield {"url": url, "aoi": aoi, "folder": folder}


def _env(azurite: Azurite, tokens: TokenEndpoint) -> dict[str, str]:
    """The account's name and endpoint (no key) and the token endpoint's URL."""
    env = dict.fromkeys(AZURE_VARIABLES, "")
    env["AZURE_STORAGE_ACCOUNT_NAME"] = azurite.account_name
    env["AZURE_STORAGE_BLOB_ENDPOINT"] = azurite.blob_endpoint
    env["PC_SDK_SAS_URL"] = tokens.url
    env["PC_SDK_SUBSCRIPTION_KEY"] = ""
    return env


def _predict(
    world: dict, checkpoint: Path, out: Path, sign: str, env: dict[str, str], workers: int = 1
):
    return run_cli(
        "predict", "--aoi", str(world["aoi"]), "--stac", world["url"], "--collection", "naip",
        "--sign", sign, "-k", str(checkpoint), "--out", str(out), "--no-probs",
        "--workers", str(workers), env=env,
    )  # fmt: skip


def _assert_no_token(tokens: TokenEndpoint, out: Path, *texts: str) -> None:
    secrets = tokens.signatures()
    assert secrets
    for path in [p for p in out.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        assert not [s for s in secrets if s in data], path
    for text in texts:
        assert not [s for s in secrets if s in text.encode()], text


@pytest.mark.parametrize(
    ("lifetime_s", "workers"),
    [(3600.0, 1), (30.0, 2)],
    ids=["one token", "renewed, in spawned workers"],
)
def test_signed_blobs_are_mapped_and_no_token_is_printed_or_written(
    world: dict,
    azurite: Azurite,
    tokens: TokenEndpoint,
    quick_checkpoint: Path,
    tmp_path: Path,
    lifetime_s: float,
    workers: int,
) -> None:
    tokens.lifetime_s = lifetime_s  # under a minute: the SDK asks again at each file system
    out = tmp_path / "maps"
    env = _env(azurite, tokens)
    result = _predict(world, quick_checkpoint, out, "planetary-computer", env, workers)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    names = {t["tile"] for t in summary["tiles"]}
    host = f"{azurite.account_name}.blob.core.windows.net"
    assert names == {f"abfs://{CONTAINER}@{host}/{n}_naip.tif" for n in CORNERS}
    assert {t["status"] for t in summary["tiles"]} == {"done"}
    if workers > 1:  # spawned: each worker asked for its own tokens, from the job's spec
        assert f"starting {workers} workers" in result.stderr
    if lifetime_s > 60:
        assert len(tokens.tokens) == 1  # the SDK's cached token, for the launcher and worker
    else:
        assert len(tokens.tokens) > len(CORNERS)  # renewed as the job went on
    _assert_no_token(tokens, out, result.stdout, result.stderr)


def test_without_signing_the_blobs_have_no_credential(
    world: dict, azurite: Azurite, tokens: TokenEndpoint, quick_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    result = _predict(world, quick_checkpoint, out, "none", _env(azurite, tokens))
    assert_one_line_error(result, "no credential for account devstoreaccount1")
    assert not tokens.tokens
    assert not (out / "summary.json").exists()


def test_a_refusing_token_endpoint_is_one_line_naming_it(
    world: dict, azurite: Azurite, tokens: TokenEndpoint, quick_checkpoint: Path, tmp_path: Path
) -> None:
    tokens.status = 403
    out = tmp_path / "maps"
    result = _predict(world, quick_checkpoint, out, "planetary-computer", _env(azurite, tokens))
    line = assert_one_line_error(result, "token endpoint", tokens.url, "403")
    assert "devstoreaccount1/naip" in line
    assert not out.exists()


def _png(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def test_the_viewer_draws_the_signed_blobs_imagery(
    world: dict, azurite: Azurite, tokens: TokenEndpoint, quick_checkpoint: Path, tmp_path: Path
) -> None:
    """landcover view reads a Planetary Computer job's input tiles as the job did: signed."""
    out = tmp_path / "maps"
    env = _env(azurite, tokens)
    result = _predict(world, quick_checkpoint, out, "planetary-computer", env)
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "summary.json").read_text())["job"]["signing"] == "planetary-computer"
    # a zoom-20 map tile (about 30 m) around s1's centre lies inside s1 (64 m)
    x0, y0 = CORNERS["s1"]
    lon, lat = transform(CRS, "EPSG:4326", [x0 + SIDE / 2], [y0 - SIDE / 2])
    tile = morecantile.tms.get("WebMercatorQuad").tile(lon[0], lat[0], 20)
    with Reader(str(world["folder"] / "s1_naip.tif")) as local:  # the same image, on disk
        expected = local.tile(
            tile.x, tile.y, tile.z, tilesize=256, indexes=(1, 2, 3),
            resampling_method="bilinear", reproject_method="nearest",
        ).render(img_format="PNG")  # fmt: skip
    viewer = Viewer(out, env)
    try:
        url = f"{viewer.url.rstrip('/')}/tiles/truecolor/{tile.z}/{tile.x}/{tile.y}.png"
        with urllib.request.urlopen(url, timeout=60) as answer:
            drawn = answer.read()
    finally:
        printed = viewer.stop()
    got, want = _png(drawn), _png(expected)
    assert (got[..., 3] == 255).all()  # inside s1: all imagery
    assert np.array_equal(got, want)
    assert "imagery not drawn" not in printed, printed
    _assert_no_token(tokens, out, printed)
