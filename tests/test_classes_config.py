from pathlib import Path

import numpy as np
import pytest
import yaml

from landcover.classes import IGNORE_INDEX, PRESETS, resolve_mapping
from landcover.config import load_config
from landcover.errors import ConfigError

from conftest import REPO, assert_one_line_error, run_cli


def test_chesapeake7_maps_codes_and_ignores_nodata() -> None:
    mapping = resolve_mapping("chesapeake7")
    codes = np.array([[1, 2, 3], [4, 5, 6], [15, 0, 1]], dtype=np.uint8)
    expected = np.array([[0, 1, 2], [3, 4, 5], [IGNORE_INDEX, IGNORE_INDEX, 0]])
    np.testing.assert_array_equal(mapping.encode(codes), expected)
    assert mapping.num_classes == 6
    assert mapping.unknown_codes(codes) == []


def test_cvpr4_merges_barren_impervious_and_road() -> None:
    mapping = resolve_mapping("cvpr4")
    encoded = mapping.encode(np.array([1, 2, 3, 4, 5, 6, 15], dtype=np.uint8))
    assert encoded.tolist() == [0, 1, 2, 3, 3, 3, IGNORE_INDEX]
    assert mapping.names == ["water", "forest", "field", "impervious"]


def test_tutorial5_scheme() -> None:
    mapping = PRESETS["tutorial5"]
    assert mapping.names == ["water", "trees", "herbaceous", "barren_impervious"]
    assert mapping.encode(np.array([0, 4, 6], dtype=np.uint8)).tolist() == [IGNORE_INDEX, 3, 3]


def test_unknown_codes_are_reported() -> None:
    mapping = resolve_mapping("chesapeake7")
    assert mapping.unknown_codes(np.array([1, 7, 9, 9, 15], dtype=np.uint8)) == [7, 9]


def test_explicit_mapping_and_overlap_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "data": {
                    "classes": {
                        "classes": [
                            {"name": "wet", "codes": [1], "color": "#0000ff"},
                            {"name": "dry", "codes": [2, 3, 4, 5, 6]},
                        ]
                    }
                }
            }
        )
    )
    config = load_config(cfg)
    assert config.data.classes.names == ["wet", "dry"]
    cfg.write_text(
        yaml.safe_dump(
            {
                "data": {
                    "classes": {
                        "classes": [{"name": "a", "codes": [1]}, {"name": "b", "codes": [1]}]
                    }
                }
            }
        )
    )
    with pytest.raises(ConfigError, match="maps to both a and b"):
        load_config(cfg)


def test_overrides_and_sets_apply_in_order(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"optim": {"lr": 0.5, "epochs": 3}}))
    config = load_config(
        cfg, {"optim.epochs": 7, "run.workers": None}, ["model.decoder_channels=[8,8,8,8,8]"]
    )
    assert config.optim.lr == 0.5
    assert config.optim.epochs == 7
    assert config.run.workers == 1
    assert config.model.decoder_channels == [8, 8, 8, 8, 8]
    assert config.run.val_overlap == config.data.patch_size // 4


@pytest.mark.parametrize(
    ("sets", "needle"),
    [
        (["optim.lr=-1"], "optim.lr"),
        (["data.patch_size=100"], "multiple of 32"),
        (["data.bands=[red,green,blue]", "data.mean=[0.4,0.4,0.4,0.5]"], "one value per band"),
        (["data.std=[0.2,0.2,0.2,0]"], "std values must be positive"),
        (["data.mean=mean"], "data.mean"),
        (["optim.loss.class_weights=balanced"], "class_weights"),
        (["data.class_frequencies={forest: 0.5}"], "does not have"),
        (["model.encoder_depth=4"], "decoder_channels needs 4"),
        (["optim.nonsense=1"], "optim.nonsense"),
        (["data.classes=chesapeake9"], "unknown class preset"),
    ],
)
def test_invalid_values_give_one_line_errors(sets: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, None, sets)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_shipped_configs_validate() -> None:
    root = REPO / "configs"
    files = sorted(root.glob("*.yaml"))
    assert files
    for path in files:
        load_config(path)


def test_include_merges_under_the_file_and_overrides_win(tmp_path: Path) -> None:
    stats = tmp_path / "stats" / "naip_stats.yaml"
    stats.parent.mkdir()
    stats.write_text(
        "# measured by landcover data stats ...\n"
        "data:\n"
        "  mean: [0.47, 0.52, 0.44, 0.46]\n"
        "  std: [0.16, 0.13, 0.10, 0.15]\n"
        "  class_frequencies: {water: 0.1, tree_canopy: 0.6, low_vegetation: 0.3}\n"
        "optim: {epochs: 7, lr: 0.01}\n"
    )
    base = tmp_path / "stats" / "base.yaml"
    base.write_text("include: naip_stats.yaml\noptim: {lr: 0.02, batch_size: 3}\n")
    other = tmp_path / "other.yaml"
    other.write_text("optim: {batch_size: 5, weight_decay: 0.5}\nmodel: {encoder: resnet18}\n")
    cfg = tmp_path / "configs" / "run.yaml"
    cfg.parent.mkdir()
    cfg.write_text(
        yaml.safe_dump(
            {
                "include": ["../stats/base.yaml", "../other.yaml"],  # later includes win
                "data": {"std": [0.2, 0.2, 0.2, 0.2]},  # the file's own keys win
                "optim": {"loss": {"class_weights": "auto"}},
            }
        )
    )
    config = load_config(cfg, {"optim.epochs": 9}, ["optim.weight_decay=0.25"])
    assert config.data.mean == [0.47, 0.52, 0.44, 0.46]  # from the nested include
    assert config.data.std == [0.2, 0.2, 0.2, 0.2]
    assert config.data.class_frequencies == {
        "water": 0.1,
        "tree_canopy": 0.6,
        "low_vegetation": 0.3,
    }
    assert config.optim.lr == 0.02  # base.yaml's own key over its include
    assert config.optim.batch_size == 5  # other.yaml, included after base.yaml
    assert config.optim.epochs == 9  # command-line flag over every file
    assert config.optim.weight_decay == 0.25  # --set over every file
    assert config.optim.loss.class_weights == "auto"
    assert config.model.encoder == "resnet18"
    assert "include" not in config.to_dict()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("include: missing.yaml\n", "missing.yaml: file included by"),
        ("include: {a: 1}\n", "include must be a file path or a list of file paths"),
        ("include: c.yaml\n", "include cycle"),
    ],
)
def test_include_errors_are_one_line(tmp_path: Path, text: str, needle: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("optim:\n  lr: 0.1\n\tbatch_size: 4\n", "line 3, column 1: found character '\\t'"),
        ('optim:\n  lr: "0.1\n  epochs: 3\n', "while scanning a quoted scalar"),
        ("optim:\n  lr: 0.1\n   epochs: 3\n", "line 3, column 10: mapping values are not allowed"),
    ],
)
def test_a_config_that_is_not_yaml_says_where(tmp_path: Path, text: str, needle: str) -> None:
    """A tab, an unclosed quote, a key indented under a value: the line and column, not only
    the parser's class name."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert f"{cfg}: not valid YAML: " in str(info.value)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_a_set_value_that_is_not_yaml_is_a_one_line_error() -> None:
    """``--set model.decoder_channels=[64,32`` (an unclosed list) was a bare traceback."""
    result = run_cli("train", "--set", "model.decoder_channels=[64,32", "--epochs", "1")
    assert_one_line_error(
        result, "--set model.decoder_channels: the value is not valid YAML: column 7"
    )
