from pathlib import Path

import numpy as np
import pytest
import yaml

from landcover.classes import IGNORE_INDEX, PRESETS, resolve_mapping
from landcover.config import load_config
from landcover.errors import ConfigError


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
        (["data.bands=[red,green,blue]"], "one value per band"),
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
    root = Path(__file__).resolve().parents[1] / "configs"
    files = sorted(root.glob("*.yaml"))
    assert files
    for path in files:
        load_config(path)
