"""Error messages name the real culprit in one complete line (issue 16, item 10).

Each test runs the real CLI as a subprocess on tiny real files and checks the one ``error:``
line and the non-zero exit.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import rasterio
import torch
import yaml

from conftest import assert_one_line_error, run_cli, train_args


@pytest.fixture
def tile(tiny_data: Path) -> Path:
    """A tiny NAIP-like image to predict."""
    return tiny_data / "synth_000_naip.tif"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"this is a text file, not a model\n", "the file is text, not a PyTorch checkpoint"),
        (b"", "the file is empty (0 bytes)"),
        (bytes(range(256)) * 4, "the file is not a PyTorch checkpoint (neither torch.save's"),
    ],
)
def test_not_a_checkpoint_is_one_complete_sentence(
    tile: Path, tmp_path: Path, content: bytes, reason: str
) -> None:
    fake = tmp_path / "some_text_file"
    fake.write_bytes(content)
    result = run_cli("predict", str(tile), "--checkpoint", str(fake), "--out", str(tmp_path / "o"))
    line = assert_one_line_error(result, f"{fake}: not a loadable checkpoint: {reason}")
    assert line.endswith(("checkpoint", ")", "pickle")), line


def test_truncated_checkpoint_says_truncated(tile: Path, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save({"weights": torch.zeros(64, 64)}, buffer)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    result = run_cli("predict", str(tile), "--checkpoint", str(cut), "--out", str(tmp_path / "o"))
    line = assert_one_line_error(
        result,
        f"{cut}: not a loadable checkpoint: the file is a zip archive",
        "not a complete PyTorch checkpoint; it may be truncated or damaged",
    )
    assert line.endswith("damaged"), line


class Opaque:
    """A class torch's safe loader refuses."""


def test_checkpoint_with_python_objects_names_the_object(tile: Path, tmp_path: Path) -> None:
    unsafe = tmp_path / "unsafe.pt"
    torch.save({"model": Opaque()}, unsafe)
    result = run_cli(
        "predict", str(tile), "--checkpoint", str(unsafe), "--out", str(tmp_path / "o")
    )
    assert_one_line_error(
        result,
        f"{unsafe}: not a loadable checkpoint: the file holds a Python object "
        "(test_messages.Opaque) besides tensors and plain data, which landcover does not load",
    )


class RunsAShell:
    """A pickle that would run a shell command when loaded (``os.system``)."""

    def __reduce__(self):
        import os

        return (os.system, ("touch PICKLE_RAN",))


def test_checkpoint_that_would_run_code_is_refused_and_named(tile: Path, tmp_path: Path) -> None:
    """torch blocks the ``os`` module with another wording: the object is named all the same,
    and nothing runs."""
    unsafe = tmp_path / "shell.pt"
    torch.save({"model": RunsAShell()}, unsafe)
    result = run_cli(
        "predict", str(tile), "--checkpoint", str(unsafe), "--out", str(tmp_path / "o")
    )
    assert_one_line_error(
        result,
        f"{unsafe}: not a loadable checkpoint: the file holds a Python object (posix.system)",
    )
    assert not (tmp_path / "PICKLE_RAN").exists() and not Path("PICKLE_RAN").exists()


@pytest.fixture(scope="module")
def quick_checkpoint(
    tiny_data: Path, tiny_config: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A checkpoint of one tiny epoch (these tests need a real one, not a good one)."""
    run = tmp_path_factory.mktemp("quick") / "run"
    extra = ("--epochs", "1", "--samples-per-epoch", "8", "--workers", "1")
    result = run_cli(*train_args(tiny_config, tiny_data, run, *extra))
    assert result.returncode == 0, result.stderr
    return run / "checkpoints" / "last.pt"


@pytest.fixture
def odd_codes(tiny_data: Path, tmp_path: Path) -> Path:
    """Two tiny pairs, the second with label code 9 (not in chesapeake7) in one corner."""
    folder = tmp_path / "odd"
    folder.mkdir()
    for path in sorted(tiny_data.glob("synth_00[01]_*.tif")):
        shutil.copy(path, folder / path.name)
    label = folder / "synth_001_lc.tif"
    with rasterio.open(label, "r+") as ds:
        codes = ds.read(1)
        codes[:4, :4] = 9
        ds.write(codes, 1)
    return folder


UNKNOWN_CODES = (
    "label codes [9] are not in the class mapping chesapeake7 "
    "(known codes: 0, 1, 2, 3, 4, 5, 6, 15)"
)


def test_unknown_label_codes_one_message_in_train_check_and_evaluate(
    odd_codes: Path, tiny_config: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    expected = f"{odd_codes / 'synth_001_lc.tif'}: {UNKNOWN_CODES}"
    evaluate = run_cli(
        "evaluate",
        "--checkpoint",
        str(quick_checkpoint),
        "--data",
        str(odd_codes),
        "--out",
        str(tmp_path / "eval"),
        "--device",
        "cpu",
    )
    assert assert_one_line_error(evaluate) == f"error: {expected}"
    train = run_cli(*train_args(tiny_config, odd_codes, tmp_path / "run", "--epochs", "1"))
    assert assert_one_line_error(train) == f"error: {expected}"
    check = run_cli("data", "check", str(odd_codes))
    assert_one_line_error(check, "1 bad file(s) of 2 pair(s)")
    assert expected in check.stdout, check.stdout


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A valid config file."""
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump({"optim": {"epochs": 6, "lr": 0.002}, "run": {"device": "cpu"}}))
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--epochs", "-3"],
            "error: --epochs -3: optim.epochs: Input should be greater than or equal to 1",
        ),
        (
            ["--set", "optim.lr=0"],
            "error: --set optim.lr=0: optim.lr: Input should be greater than 0",
        ),
        (  # a --set after a flag on the same key: the --set is what was used
            ["--epochs", "3", "--set", "optim.epochs=0"],
            "error: --set optim.epochs=0: optim.epochs: Input should be greater than or equal to 1",
        ),
        (  # a problem of a whole section, caused by one flag
            ["--nnodes", "2"],
            "error: --nnodes 2: run: run.rdzv_endpoint (--rdzv-endpoint HOST:PORT) is needed "
            "with nnodes > 1",
        ),
        (
            ["--patch-size", "100"],
            "error: --patch-size 100: data.patch_size: patch_size 100 must be a multiple of 32 "
            "(the U-Net's stride)",
        ),
    ],
)
def test_bad_value_from_a_flag_is_blamed_on_the_flag(
    config_file: Path, tiny_data: Path, tmp_path: Path, args: list[str], expected: str
) -> None:
    result = run_cli(*train_args(config_file, tiny_data, tmp_path / "run", *args))
    line = assert_one_line_error(result)
    assert line == expected
    assert str(config_file) not in line and "cpu.yaml" not in line
    assert not (tmp_path / "run").exists()


def test_bad_value_from_the_file_is_blamed_on_the_file(
    config_file: Path, tiny_data: Path, tmp_path: Path
) -> None:
    config_file.write_text(yaml.safe_dump({"optim": {"epochs": -3}}))
    epochs = run_cli(*train_args(config_file, tiny_data, tmp_path / "run", "--lr", "0.01"))
    line = assert_one_line_error(epochs)
    assert line.startswith(f"error: {config_file}: optim.epochs: "), line
    assert "--lr" not in line
    config_file.write_text(yaml.safe_dump({"model": {"encoder_depth": 4}}))
    section = run_cli(
        *train_args(config_file, tiny_data, tmp_path / "run", "--encoder", "resnet18")
    )
    line = assert_one_line_error(section)
    assert line == (
        f"error: {config_file}: model: decoder_channels needs 4 values (encoder_depth), got 5"
    )


def _manifest(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("image,label\n" + "".join(f"{image},{label}\n" for image, label in rows))
    return path


def test_data_check_reads_a_manifest(tiny_data: Path, tmp_path: Path) -> None:
    pairs = [(str(tiny_data / f"synth_00{i}_naip.tif"), f"synth_00{i}_lc.tif") for i in (0, 1)]
    for _, label in pairs:  # labels relative to the manifest, images absolute
        shutil.copy(tiny_data / label, tmp_path / label)
    good = run_cli("data", "check", str(_manifest(tmp_path / "pairs.csv", pairs)))
    assert good.returncode == 0, good.stderr
    assert "pairs.csv: 2 of 2 pairs counted" in good.stdout
    assert "all 2 pairs are fine" in good.stdout

    pairs.append(("gone_naip.tif", "synth_001_lc.tif"))
    bad = run_cli("data", "check", str(_manifest(tmp_path / "bad.csv", pairs)))
    line = assert_one_line_error(bad)
    assert line == f"error: {tmp_path / 'bad.csv'}: 1 bad file(s) of 3 pair(s) (listed above)"
    assert f"missing {tmp_path / 'gone_naip.tif'}: listed in {tmp_path / 'bad.csv'}, not found" in (
        bad.stdout
    )
    assert "data folder not found" not in bad.stdout + bad.stderr


def test_data_check_on_a_file_that_is_not_a_manifest(tiny_data: Path, tmp_path: Path) -> None:
    tif = tiny_data / "synth_000_lc.tif"
    line = assert_one_line_error(run_cli("data", "check", str(tif)))
    assert line == (
        f"error: {tif}: not a data folder or a manifest CSV (a .csv with columns image,label)"
    )
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    line = assert_one_line_error(run_cli("data", "check", str(odd)))
    assert line == f"error: {odd}: manifest needs the columns image,label[,split]"


HOW_TO_SET = (
    "set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME with "
    "AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN (AZURE_STORAGE_ACCOUNT_NAME alone "
    "uses a managed identity or az login)"
)
LOOKALIKE_SECRET = "bG9va2FsaWtlLXNlY3JldC12YWx1ZQ=="


def test_lookalike_credential_variables_are_named(
    no_azure_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {"AZURE_STORAGE_KEY": LOOKALIKE_SECRET, "AZURE_STORAGE_ACCOUNT": "acct"}
    result = run_cli("data", "download", "az://c/t.tif", str(tmp_path / "dl"), env=env)
    line = assert_one_line_error(result)
    assert line == (
        "error: no Azure Storage credentials in the environment: "
        "AZURE_STORAGE_ACCOUNT is set but landcover reads AZURE_STORAGE_ACCOUNT_NAME; "
        f"AZURE_STORAGE_KEY is set but landcover reads AZURE_STORAGE_ACCOUNT_KEY; {HOW_TO_SET}"
    )
    assert LOOKALIKE_SECRET not in result.stdout + result.stderr


def test_lookalike_sas_variable_is_named_beside_a_keyless_connection_string(
    no_azure_env: pytest.MonkeyPatch, tiny_data: Path
) -> None:
    env = {
        "AZURE_STORAGE_CONNECTION_STRING": "AccountName=acct",
        "AZURE_STORAGE_SAS": f"sv=2024&sig={LOOKALIKE_SECRET}",
    }
    result = run_cli("data", "upload", str(tiny_data / "synth_000_lc.tif"), "az://c/x", env=env)
    line = assert_one_line_error(result)
    assert line == (
        "error: AZURE_STORAGE_CONNECTION_STRING has no AccountKey or SharedAccessSignature: "
        f"AZURE_STORAGE_SAS is set but landcover reads AZURE_STORAGE_SAS_TOKEN; {HOW_TO_SET}"
    )
    assert LOOKALIKE_SECRET not in result.stdout + result.stderr


def test_no_hint_when_the_variable_we_read_is_set(no_azure_env: pytest.MonkeyPatch) -> None:
    from landcover.storage.credentials import misnamed_variables

    both = {"AZURE_STORAGE_KEY": "k", "AZURE_STORAGE_ACCOUNT_KEY": "k", "HOME": "/root"}
    assert misnamed_variables(both) == []
    assert misnamed_variables({"azure_storage_account_key": "k"}) == [
        "azure_storage_account_key is set but landcover reads AZURE_STORAGE_ACCOUNT_KEY"
    ]
