"""No secret in any byte landcover prints or writes.

Secrets sit in URL queries, in every credential variable we read, and in cluster.json. The
commands run as real processes against a loopback port that refuses connections and against a
real Azurite server; then stdout, stderr and every file written (run folders, maps, records,
STAC, job.yml, checkpoints, the staging cache, and every blob) are searched for each secret.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from azurite import Azurite, free_port

from landcover.checkpoint import Checkpoint
from landcover.redaction import RedactingStream, redact, redact_tree
from landcover.storage.credentials import misnamed_variables

from conftest import REPO, run_cli, train_args

# A real-looking account key: 64 bytes in base64, as Azure issues them.
FAKE_KEY = base64.b64encode(
    b"landcover-fake-account-key-for-redaction-tests-0123456789abcdefg"
).decode()
SAS_ENV = "sv=2024-01-01&ss=b&srt=co&sp=rl&se=2030-01-01&sig=ENVSASSIGNATURE0123"
CLIENT_SECRET = "CLIENTSECRETVALUE0123"
URL_SIG = "URLSIGSECRET0123"


def _refused_endpoint() -> str:
    return f"http://127.0.0.1:{free_port()}/bogusacct"


def _written_files(*folders: Path) -> list[Path]:
    return [p for folder in folders if folder.exists() for p in folder.rglob("*") if p.is_file()]


def _assert_nowhere(secrets: list[str], texts: list[str], files: list[Path]) -> None:
    """Asserts no secret (nor its distinctive tail) is in any text or file's bytes."""
    for secret in secrets:
        for text in texts:
            assert secret not in text, text
        for path in files:
            assert secret.encode() not in path.read_bytes(), path


# --- the redaction function itself ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("read az://c/t.tif?sig=SIGVALUE123 failed", "SIGVALUE123", "read az://c/t.tif?sig="),
        (
            "https://a.blob.core.windows.net/c/x?sv=2021-01-01&se=2030&sp=r&sig=abc%2Bdef%3D",
            "abc%2Bdef%3D",
            "https://a.blob.core.windows.net/c/x?",
        ),
        ("GET /c/x?se=2030-01-01T00%3A00Z&sp=racwdl HTTP/1.1", "2030-01-01T00%3A00Z", "GET /c/x?"),
        ("AccountName=a;AccountKey=KEYVALUE+/==;EndpointSuffix=x", "KEYVALUE+/==", "AccountName=a"),
        ("BlobEndpoint=x;SharedAccessSignature=sv=1&sig=SASVALUE", "SASVALUE", "BlobEndpoint=x"),
        ("Authorization: Bearer TOKENVALUE.abc", "TOKENVALUE", "Authorization: Bearer"),
        ("token eyJhbGciOiJSUzI1.eyJzdWIiOiIxMjM0.c2lnbmF0dXJl here", "eyJzdWIiOiIxMjM0", "here"),
        (f"key {FAKE_KEY} in text", FAKE_KEY, "in text"),
        ("export AZURE_STORAGE_ACCOUNT_KEY=EXPORTEDKEY1 && x", "EXPORTEDKEY1", "&& x"),
        ("az login --service-principal -u id -p PASSWORD1 --tenant t", "PASSWORD1", "--tenant t"),
        ('{"password": "pass word"}', "pass word", '{"password": '),
        ("client_secret=CLIENTSECRET9", "CLIENTSECRET9", "client_secret="),
    ],
)
def test_redact_removes_each_form(text: str, secret: str, kept: str) -> None:
    cleaned = redact(text, env={})
    assert secret not in cleaned
    assert "***" in cleaned
    assert kept in cleaned


def test_redact_removes_environment_values_in_any_form() -> None:
    env = {
        "AZURE_STORAGE_SAS_TOKEN": "?" + SAS_ENV,
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
        "SOME_SERVICE_PASSWORD": "hunter2hunter2",
        "AZURE_STORAGE_ACCOUNT_NAME": "myaccount",
    }
    encoded = SAS_ENV.replace("=", "%3D").replace("&", "%26")
    text = f"token {SAS_ENV}; encoded {encoded}; secret {CLIENT_SECRET}; pw hunter2hunter2"
    cleaned = redact(text, env)
    for secret in (SAS_ENV, encoded, CLIENT_SECRET, "hunter2hunter2", "ENVSASSIGNATURE0123"):
        assert secret not in cleaned
    # the account name is no secret, and ordinary text stays
    assert redact("account myaccount, best=0.9 st=3", env) == "account myaccount, best=0.9 st=3"
    # a glob wildcard is not a query
    assert redact("tiles/m_?.tif", env) == "tiles/m_?.tif"


def test_redaction_reads_the_environment_while_another_thread_removes_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 42, item 1, in process: MLflow's telemetry thread removed a variable while the
    redaction iterated ``os.environ`` (``items()`` lists the names, then looks each up), and a
    ``KeyError`` surfaced at random. Here a thread sets and removes one variable without pause
    while redact and misnamed_variables read a job-sized environment; the interpreter switches
    threads every microsecond, so a pass over the environment is cut many times. With
    ``os.environ`` in place of ``environ_snapshot()`` in either function this failed within
    0.25 s (about a hundred passes); the CLI trainings in ``training/test_mlflow_tracking.py``
    run the race end to end."""
    for i in range(400):  # a cluster job's environment (Azure ML sets many AZUREML_* variables)
        monkeypatch.setenv(f"AZUREML_JOB_SETTING_{i}", f"/mnt/azureml/cr/j/{i:032x}/exe/wd")
    monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", SAS_ENV)
    monkeypatch.setenv("AZURE_STORAGE_KEY", FAKE_KEY)  # the az CLI's name: a misnamed variable
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_KEY", raising=False)
    stop = threading.Event()

    def remove_and_set() -> None:  # as MLflow's thread pops _MLFLOW_TELEMETRY_SESSION_ID
        while not stop.is_set():
            os.environ["_LANDCOVER_RACE_VARIABLE"] = "x"
            os.environ.pop("_LANDCOVER_RACE_VARIABLE", None)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=remove_and_set, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            assert redact(f"token {SAS_ENV} done") == "token *** done"
            hint = "AZURE_STORAGE_KEY is set but landcover reads AZURE_STORAGE_ACCOUNT_KEY"
            assert hint in misnamed_variables()
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
        os.environ.pop("_LANDCOVER_RACE_VARIABLE", None)


def test_redact_tree_and_stream(tmp_path: Path) -> None:
    tree = {"data": {"root": f"az://c/x?sig={URL_SIG}", "n": 3}, "list": [f"sig={URL_SIG}", 1.5]}
    cleaned = redact_tree(tree, env={})
    assert URL_SIG not in json.dumps(cleaned)
    assert cleaned["data"]["n"] == 3 and cleaned["list"][1] == 1.5
    assert tree["data"]["root"].endswith(URL_SIG)  # the input is not modified
    path = tmp_path / "out.txt"
    with path.open("w") as handle:
        stream = RedactingStream(handle)
        stream.write(f"line ?sig={URL_SIG}\n")
        stream.writelines([f"more sig={URL_SIG}\n"])
    assert URL_SIG not in path.read_text()
    assert path.read_text().count("\n") == 2


def test_checkpoint_config_is_redacted() -> None:
    import io

    import torch

    ckpt = Checkpoint(model={}, config={"data": {"root": f"/data/x?sig={URL_SIG}"}})
    data = ckpt.serialize()
    assert URL_SIG.encode() not in data
    state = torch.load(io.BytesIO(data), weights_only=True)
    assert state["config"]["data"]["root"] == "/data/x?sig=***"


# --- real processes against a refusing endpoint -------------------------------------------------


def _env_for(method: str, endpoint: str, cache: Path) -> tuple[dict[str, str], list[str]]:
    """Environment variables for one credential method, and the secrets in them."""
    env = {
        "LANDCOVER_STORAGE_RETRY_S": "2",
        "LANDCOVER_CACHE": str(cache),
        "AZURE_STORAGE_CONNECTION_STRING": "",
        "AZURE_STORAGE_ACCOUNT_NAME": "",
        "AZURE_STORAGE_ACCOUNT_KEY": "",
        "AZURE_STORAGE_SAS_TOKEN": "",
        "AZURE_STORAGE_BLOB_ENDPOINT": "",
        # read by Azure's credential chain: never ours to print either
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
    }
    if method == "connection_string":
        env["AZURE_STORAGE_CONNECTION_STRING"] = (
            f"DefaultEndpointsProtocol=http;AccountName=bogusacct;AccountKey={FAKE_KEY};"
            f"BlobEndpoint={endpoint};"
        )
        secrets = [FAKE_KEY, env["AZURE_STORAGE_CONNECTION_STRING"]]
    else:
        env["AZURE_STORAGE_ACCOUNT_NAME"] = "bogusacct"
        env["AZURE_STORAGE_BLOB_ENDPOINT"] = endpoint
        if method == "account_key":
            env["AZURE_STORAGE_ACCOUNT_KEY"] = FAKE_KEY
            secrets = [FAKE_KEY]
        else:
            env["AZURE_STORAGE_SAS_TOKEN"] = SAS_ENV
            secrets = [SAS_ENV, "ENVSASSIGNATURE0123"]
    return env, [*secrets, CLIENT_SECRET]


def _commands(ckpt: Path, data: Path, tiny_config: Path, out: Path) -> list[list[str]]:
    tile = str(next(data.glob("*_naip.tif")))
    return [
        ["predict", "az://c/t.tif", "--checkpoint", str(ckpt), "--out", str(out / "maps")],
        ["predict", tile, "--checkpoint", str(ckpt), "--out", "az://c/maps"],
        train_args(tiny_config, "az://c/data", out / "run", "--workers", "1"),
        train_args(tiny_config, data, "az://c/run", "--workers", "1", "--epochs", "1"),
        ["evaluate", "--checkpoint", str(ckpt), "--data", "az://c/data", "--out", str(out / "e")],
        ["data", "stats", "az://c/data", "--out", str(out / "stats.yaml")],
        ["data", "download", "az://c/data", str(out / "down")],
        ["data", "upload", str(data), "az://c/up"],
    ]


@pytest.mark.parametrize("method", ["sas_token", "account_key", "connection_string"])
def test_no_environment_secret_in_output_against_refusing_endpoint(
    method: str, quick_checkpoint: Path, tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    env, secrets = _env_for(method, _refused_endpoint(), cache)
    commands = _commands(quick_checkpoint, tiny_data, tiny_config, out)
    if method != "sas_token":  # the SAS form runs every command; the others the main two
        commands = [commands[0], commands[3]]
    texts = []
    for args in commands:
        result = run_cli(*args, env=env)
        assert result.returncode != 0, (args, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        texts.append(result.stdout + result.stderr)
    # the retries happened and were reported (so there was something to leak)
    assert any("retrying" in text for text in texts)
    _assert_nowhere(secrets, texts, _written_files(cache, out))


@pytest.mark.parametrize(
    "url",
    [
        f"az://c/t.tif?sig={URL_SIG}",
        f"abfs://c/data?sv=2024-01-01&sp=rl&sig={URL_SIG}",
        f"https://bogusacct.blob.core.windows.net/c/data?sv=2024-01-01&sig={URL_SIG}",
    ],
)
def test_no_url_secret_in_output(
    url: str, quick_checkpoint: Path, tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    checkpoint = quick_checkpoint
    cache, out = tmp_path / "cache", tmp_path / "out"
    env, _ = _env_for("sas_token", _refused_endpoint(), cache)
    runs = [
        ["predict", url, "--checkpoint", str(checkpoint), "--out", str(out / "maps")],
        train_args(tiny_config, url, out / "run", "--workers", "1"),
        train_args(tiny_config, tiny_data, url, "--workers", "1"),
        ["evaluate", "--checkpoint", str(checkpoint), "--data", url, "--out", str(out / "e")],
        ["data", "stats", url, "--out", str(out / "stats.yaml")],
        ["data", "download", url, str(out / "down")],
        ["data", "upload", str(tiny_data), url],
    ]
    if not url.startswith("az://"):  # the az:// form runs every command; the others two
        runs = runs[:2]
    texts = []
    for args in runs:
        result = run_cli(*args, env=env)
        assert result.returncode != 0, (args, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, result.stderr
        assert "Traceback" not in result.stderr
        texts.append(result.stdout + result.stderr)
    # the refusal says where the token goes instead
    assert any("AZURE_STORAGE_SAS_TOKEN" in text for text in texts)
    _assert_nowhere([URL_SIG], texts, _written_files(cache, out))


# --- a real blob store --------------------------------------------------------------------------


def _all_blob_bytes(azurite: Azurite, container: str) -> list[tuple[str, bytes]]:
    with azurite.service_client() as client:
        box = client.get_container_client(container)
        return [(b.name, box.download_blob(b.name).readall()) for b in box.list_blobs()]


def test_no_secret_anywhere_after_a_blob_run_on_azurite(
    azurite: Azurite, tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    container = azurite.create_container()
    sas = azurite.container_sas(container)
    sig = next(part for part in sas.split("&") if part.startswith("sig=")).split("=", 1)[1]
    cache = tmp_path / "cache"
    env = {
        **azurite.env("sas_token", sas=sas),
        "LANDCOVER_CACHE": str(cache),
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
    }
    base = f"az://{container}"
    steps = [
        ["data", "upload", str(tiny_data), f"{base}/data"],
        train_args(tiny_config, f"{base}/data", f"{base}/run", "--workers", "2", "--epochs", "1"),
        [
            "predict",
            f"{base}/data/synth_007_naip.tif",
            "--checkpoint",
            f"{base}/run/checkpoints/last.pt",
            "--out",
            f"{base}/maps",
        ],
        [
            "evaluate",
            "--checkpoint",
            f"{base}/run/checkpoints/last.pt",
            "--data",
            f"{base}/data",
            "--out",
            f"{base}/eval",
        ],
        ["data", "stats", f"{base}/data", "--out", f"{base}/stats.yaml"],
        ["data", "download", f"{base}/maps", str(tmp_path / "maps")],
    ]
    texts = []
    for args in steps:
        result = run_cli(*args, env=env)
        assert result.returncode == 0, (args, result.stderr)
        texts.append(result.stdout + result.stderr)
    blobs = _all_blob_bytes(azurite, container)
    names = {name for name, _ in blobs}
    assert {"run/checkpoints/last.pt", "run/logs/rank0.log", "maps/summary.json"} <= names
    assert any(name.startswith("maps/stac") or "catalog" in name for name in names)
    secrets = [sas, sig, CLIENT_SECRET, azurite.account_key]
    _assert_nowhere(secrets, texts, _written_files(cache, tmp_path / "maps"))
    for name, data in blobs:
        for secret in secrets:
            assert secret.encode() not in data, name


# --- cluster.json -------------------------------------------------------------------------------

_CLEAN_CLUSTER = {
    "vmSize": "Standard_NC24ads_A100_v4",
    "targetNodeCount": 4,
    "vmPriority": "dedicated",
    "location": "eastus",
}


@pytest.mark.parametrize(
    ("extra", "secret"),
    [
        ({"nodeSetup": ["export AZURE_STORAGE_ACCOUNT_KEY=NODESETUPKEY123"]}, "NODESETUPKEY123"),
        (
            {"nodeSetup": ["az login --service-principal -u id -p AZPASS12345 --tenant t"]},
            "AZPASS12345",
        ),
        (
            {"nodeSetup": "curl 'https://x.blob.core.windows.net/c/s.sh?sv=1&sig=CURLSIG123'"},
            "CURLSIG123",
        ),
        ({"name": "lc", "tags": {"note": f"AccountKey={FAKE_KEY}"}}, FAKE_KEY),
        ({"nodeSetup": ["echo ok", "echo Bearer BEARERTOKEN123"]}, "BEARERTOKEN123"),
    ],
)
def test_cluster_json_secret_anywhere_is_refused(extra: dict, secret: str, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({**_CLEAN_CLUSTER, **extra}))
    out = tmp_path / "azureml"
    for args in (
        ["cluster", "plan", "--cluster", str(cluster), "--workers", "4"],
        [
            "cluster",
            "azureml",
            "--cluster",
            str(cluster),
            "--workers",
            "4",
            "--epochs",
            "2",
            "--out",
            str(out),
        ],
    ):
        result = run_cli(*args)
        assert result.returncode != 0, result.stdout
        assert "must hold no secrets" in result.stderr, result.stderr
        assert secret not in result.stdout + result.stderr
    assert not out.exists() or not _written_files(out)


def test_node_setup_script_with_a_secret_is_refused_and_env_secrets_stay_out_of_job_files(
    tmp_path: Path,
) -> None:
    script = tmp_path / "setup.sh"
    script.write_text(f"#!/bin/bash\nexport AZURE_STORAGE_SAS_TOKEN='sv=1&sig={URL_SIG}'\n")
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({**_CLEAN_CLUSTER, "nodeSetup": ["setup.sh"]}))
    out = tmp_path / "azureml"
    args = ["cluster", "azureml", "--cluster", str(cluster), "--workers", "4", "--epochs", "2"]
    result = run_cli(*args, "--out", str(out))
    assert result.returncode != 0
    assert "setup.sh" in result.stderr and "must hold no secrets" in result.stderr
    assert URL_SIG not in result.stderr + result.stdout
    assert not _written_files(out)

    # a clean cluster.json with credentials in the environment: job files name the
    # variables at most, never their values
    script.write_text("#!/bin/bash\nnvidia-smi\n")
    env = {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_ACCOUNT_KEY": FAKE_KEY,
        "AZURE_STORAGE_SAS_TOKEN": SAS_ENV,
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
    }
    result = run_cli(*args, "--out", str(out), "--data", "az://c/data", env=env)
    assert result.returncode == 0, result.stderr
    files = _written_files(out)
    assert any(p.name == "job.yml" for p in files)
    _assert_nowhere([FAKE_KEY, SAS_ENV, CLIENT_SECRET], [result.stdout + result.stderr], files)


def test_printed_lines_of_a_worker_are_redacted(tmp_path: Path) -> None:
    """A worker process (not only the CLI) wraps its output: its own prints are redacted."""
    code = (
        "from landcover.parallel.workerreports import run_guarded\n"
        f"run_guarded(lambda: print('worker says ?sig={URL_SIG}'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert "worker says ?sig=***" in result.stdout
    assert URL_SIG not in result.stdout + result.stderr


# --- text laid out by rich or click before it reaches the streams -------------------------------


def _pieces(secret: str, size: int = 8) -> list[str]:
    """Every run of ``size`` characters of a secret: a wrapped line prints one piece of it."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def _in_a_terminal(code: str, columns: int = 80) -> str:
    """Runs Python code with its stdout and stderr on a pseudo-terminal; returns what it showed."""
    import os
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=follower, stderr=follower, cwd=REPO, env=env
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closes when the process ends
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert process.wait(timeout=120) == 0, shown.decode(errors="replace")
    return shown.decode(errors="replace")


def test_a_line_printed_under_a_progress_bar_is_redacted_before_the_bar_wraps_it() -> None:
    """While a rich bar is live it takes over stdout and stderr and wraps each printed line to
    the terminal's width: the line must be redacted whole, before that."""
    secret = "BARWRAPSECRET0123456789abcdefghij"
    # on its own line (too long for the first) the URL folds every 80 columns, and the
    # signature (columns 147 to 180) across the second fold
    url = "az://container/" + "folder/" * 15 + f"tile.tif?sv=2024-01-01&sig={secret}"
    code = (
        "import sys\n"
        "from landcover import redaction\n"
        "from landcover.progress import ProgressReporter\n"
        "redaction.install()\n"
        "with ProgressReporter('tiles', 3, every_s=1.0, stderr=True) as bar:\n"
        "    assert bar.on_terminal\n"
        f"    print('could not read {url}', file=sys.stderr)\n"
        f"    print('stdout too: {url}')\n"
        "    bar.show(1, 'info ?sig=" + secret + "')\n"
    )
    shown = _in_a_terminal(code)
    assert "could not read" in shown and "stdout too" in shown and "tile.tif" in shown
    for piece in _pieces(secret):
        assert piece not in shown, shown


def test_a_usage_error_is_redacted_before_its_panel_wraps_it(tmp_path: Path) -> None:
    """A usage error quotes what was typed, laid out in a panel the terminal's width."""
    secret = "PANELWRAPSECRET" + "0123456789abcdefghij" * 10  # longer than a panel is wide
    url = f"az://maps/tiles/m_3807537_ne_18_060_naip.tif?se=2030&sig={secret}"
    texts = []
    for args in (["evaluate", "--checkpoint", "x.pt", "--data", str(tmp_path), url], [url]):
        result = run_cli(*args)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        texts.append(result.stdout + result.stderr)
    assert "unexpected extra argument" in texts[0] and "No such command" in texts[1]
    for piece in _pieces(secret):
        for text in texts:
            assert piece not in text, text


@pytest.mark.parametrize("encoding", ["ascii", "utf-8"])
def test_echoed_lines_are_redacted_whatever_the_streams_encoding(
    encoding: str, tmp_path: Path
) -> None:
    """click writes to the binary stream under an ASCII encoding: that side is redacted too."""
    import os

    secret = "ECHOSECRET0123456789"
    out = tmp_path / f"synth?sv=1&sig={secret}"
    result = run_cli(
        "data", "synth", "--tiles", "1", "--size", "32", str(out),
        env={**os.environ, "PYTHONIOENCODING": encoding},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrote 1 tile pairs" in result.stdout
    assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("az://maps/t.tif%3Fsv%3D2020-08-04%26sig%3DENCODEDSIG1: file not found", "ENCODEDSIG1"),
        ("az://maps/tiles%3Fsv%3D1%26se%3DENCODEDSE2 x", "ENCODEDSE2"),
        ("x?sv=1&sig%3DHALFENCODED3 y", "HALFENCODED3"),
        ("a%253Fsig%253DTWICEENCODED4", "TWICEENCODED4"),
        ("cannot log to http://alice:URLPASSWORD5@127.0.0.1:9/: refused", "URLPASSWORD5"),
    ],
)
def test_redact_removes_encoded_signatures_and_url_passwords(text: str, secret: str) -> None:
    cleaned = redact(text, env={})
    assert secret not in cleaned and "***" in cleaned


# Other hosts' signed URLs (NAIP is also on AWS): S3 SigV4 and SigV2, GCS V4, CloudFront.
S3_V4 = (
    "https://naip-analytic.s3.amazonaws.com/md/2018/m_3807503_ne_18_060_20181104.tif"
    "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAS3CREDENTIAL1%2F20261129%2F"
    "us-west-2%2Fs3%2Faws4_request&X-Amz-Date=20261129T000000Z&X-Amz-Expires=3600"
    "&X-Amz-Security-Token=S3SESSIONTOKEN2&X-Amz-SignedHeaders=host"
    "&X-Amz-Signature=S3SIGNATURE3"
)


@pytest.mark.parametrize(
    ("text", "secrets", "kept"),
    [
        (f"read {S3_V4} failed", ["AKIAS3CREDENTIAL1", "S3SESSIONTOKEN2", "S3SIGNATURE3"],
         "X-Amz-Date=20261129T000000Z"),
        ("https://b.s3.amazonaws.com/k.tif?AWSAccessKeyId=AKIAV2KEY4&Expires=1&Signature=V2SIG5",
         ["AKIAV2KEY4", "V2SIG5"], "Expires=1"),
        ("https://storage.googleapis.com/b/k.tif?X-Goog-Algorithm=GOOG4-RSA-SHA256"
         "&X-Goog-Credential=GCSCRED6&X-Goog-Signature=GCSSIG7", ["GCSCRED6", "GCSSIG7"],
         "X-Goog-Algorithm=GOOG4-RSA-SHA256"),
        ("https://d1.cloudfront.net/k.tif?Policy=CFPOLICY8&Signature=CFSIG9&Key-Pair-Id=CFKEY10",
         ["CFPOLICY8", "CFSIG9", "CFKEY10"], "https://d1.cloudfront.net/k.tif?"),
        ("https://tiles.example/x.tif?access_token=TOKEN11&key=APIKEY12&z=3",
         ["TOKEN11", "APIKEY12"], "&z=3"),
        # a URL escaped into XML or HTML (a VRT's SourceFilename, a page), a fragment, a ;
        ("<SourceFilename>/vsicurl/https://b.s3.amazonaws.com/k.tif?X-Amz-Date=1&amp;"
         "X-Amz-Signature=XMLSIG13&amp;X-Amz-Credential=XMLCRED14</SourceFilename>",
         ["XMLSIG13", "XMLCRED14"], "X-Amz-Date=1&amp;X-Amz-Signature="),
        ("https://app.example/cb#access_token=FRAGMENT15&expires_in=3600",
         ["FRAGMENT15"], "&expires_in=3600"),
        ("https://tiles.example/x.tif?z=3;token=SEMICOLON16;x=1", ["SEMICOLON16"], ";x=1"),
    ],
)  # fmt: skip
def test_redact_removes_other_clouds_signed_url_credentials(
    text: str, secrets: list[str], kept: str
) -> None:
    cleaned = redact(text, env={})
    for secret in secrets:
        assert secret not in cleaned
    assert kept in cleaned


def test_an_s3_presigned_url_is_not_printed_in_clear(checkpoint: Path, tmp_path: Path) -> None:
    """landcover refuses the URL (it reads Azure Blob, not S3); the refusal keeps the secrets
    out of what it prints and writes."""
    out = tmp_path / "maps"
    result = run_cli("predict", S3_V4, "--checkpoint", str(checkpoint), "--out", str(out))
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "m_3807503_ne_18_060_20181104.tif" in errors[0]  # the user sees which input
    secrets = ["AKIAS3CREDENTIAL1", "S3SESSIONTOKEN2", "S3SIGNATURE3"]
    _assert_nowhere(secrets, [result.stdout + result.stderr], _written_files(out))


def test_a_blob_url_with_an_encoded_signature_is_refused(tmp_path: Path) -> None:
    """``?``, ``&`` and ``=`` percent-encoded still make a signature in a blob URL: refused,
    redacted, before anything is read."""
    secret = "REFUSEDENCODED0123"
    url = f"az://maps/tiles/t_naip.tif%3Fsv%3D2020-08-04%26sig%3D{secret}"
    result = run_cli("data", "stats", url, "--out", str(tmp_path / "stats.yaml"))
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "shared access signature" in errors[0], result.stderr
    assert secret not in result.stdout + result.stderr
    assert not list(tmp_path.iterdir())
