"""--sign's pieces: the https blob form, the choice, run-time secrets, a token never pickled.

The whole chain (token endpoint, Azurite, predict) is tests/search/test_signed_stac.py.
"""

from __future__ import annotations

import pickle

import pytest

from landcover.redaction import redact, register_secret
from landcover.storage.errors import StorageError
from landcover.storage.signing import (
    PLANETARY_COMPUTER,
    SignedAuth,
    blob_endpoint,
    choose_signing,
    signed_auth,
)
from landcover.storage.urls import blob_url, parse

NAIP = (
    "https://naipeuwest.blob.core.windows.net/naip/v002/md/2018/md_060cm_2018/38076/"
    "m_3807504_ne_18_060_20180815.tif"
)


def test_an_https_blob_href_is_read_in_its_abfs_form() -> None:
    url = blob_url(NAIP)
    assert url == (
        "abfs://naip@naipeuwest.blob.core.windows.net/v002/md/2018/md_060cm_2018/38076/"
        "m_3807504_ne_18_060_20180815.tif"
    )
    location = parse(url)
    assert (location.account, location.container) == ("naipeuwest", "naip")
    for other in ("https://example.com/a/b.tif", "/data/a.tif", "az://c/a.tif"):
        assert blob_url(other) == other
    with pytest.raises(StorageError) as info:
        blob_url(NAIP + "?sv=2021-01-01&sig=SECRETSIG123")
    assert "SECRETSIG123" not in str(info.value)


def test_auto_signs_only_for_the_planetary_computer() -> None:
    tiles = [blob_url(NAIP), "az://mine/x.tif", "/local/y.tif"]
    pc = "https://planetarycomputer.microsoft.com/api/stac/v1"
    signing = choose_signing("auto", pc, tiles)
    assert signing is not None and signing.service == PLANETARY_COMPUTER
    assert signing.containers == {("naipeuwest", "naip")}  # not the environment's az://
    assert choose_signing("auto", "https://earth-search.aws.element84.com/v1", tiles) is None
    assert choose_signing("none", pc, tiles) is None
    assert choose_signing(PLANETARY_COMPUTER, None, tiles) == signing
    with pytest.raises(StorageError):
        choose_signing("aws", pc, tiles)


def test_a_token_registered_at_run_time_is_redacted_in_every_form() -> None:
    token = "sv=2024-08-04&se=2030-01-01T00%3A00%3A00Z&sr=c&sp=rl&sig=RunTime%2BSig%2FValue%3D"
    register_secret(token)
    for text in (token, "RunTime%2BSig%2FValue%3D", "RunTime+Sig/Value=", f"?{token}"):
        assert "RunTime" not in redact(f"reading x.tif with {text} failed")
    assert "2030-01-01" in redact("the token expires 2030-01-01")  # its dates are no secret


def test_the_endpoint_is_the_emulator_only_for_the_account_named() -> None:
    env = {
        "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
        "AZURE_STORAGE_BLOB_ENDPOINT": "http://127.0.0.1:10000/devstoreaccount1",
    }
    assert blob_endpoint("devstoreaccount1", env) == env["AZURE_STORAGE_BLOB_ENDPOINT"]
    assert blob_endpoint("naipeuwest", env) == "https://naipeuwest.blob.core.windows.net"


def test_a_signed_credential_pickles_without_its_token() -> None:
    auth = SignedAuth(
        "naipeuwest", "https://naipeuwest.blob.core.windows.net", "signed", "t", "sig=TOKEN123",
        "naip",
    )  # fmt: skip
    assert "TOKEN123" not in repr(auth)
    assert b"TOKEN123" not in pickle.dumps(auth)
    assert auth.__reduce__() == (signed_auth, ("naipeuwest", "naip"))


@pytest.mark.parametrize("url", ["http://192.0.2.2:9/api/sas/v1/token", "ftp://192.0.2.2/x"])
def test_a_token_service_off_this_machine_is_reached_over_https_only(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The subscription key goes with the request and the token comes back: never plain http."""
    from planetary_computer.settings import Settings

    from landcover.storage.errors import CredentialsError

    monkeypatch.setenv("PC_SDK_SAS_URL", url)
    monkeypatch.setenv("PC_SDK_SUBSCRIPTION_KEY", "SUBKEYSECRET42")
    Settings.get.cache_clear()  # read the environment again
    try:
        with pytest.raises(CredentialsError) as info:
            signed_auth("naipeuwest", "naip-refused-http")  # nothing is sent to 192.0.2.2
    finally:
        Settings.get.cache_clear()
    message = str(info.value)
    assert message.startswith("refusing token service") and "PC_SDK_SAS_URL" in message
    assert "https" in message and "SUBKEYSECRET42" not in message
