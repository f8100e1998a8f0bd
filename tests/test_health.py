"""The unlearned-class check and the narrow-decoder warning."""

import numpy as np

from landcover.config import ModelConfig
from landcover.models import final_stage_warning
from landcover.training.health import unlearned_classes, unlearned_message
from landcover.training.metrics import metrics_from_confusion

NAMES = ["water", "trees", "field", "road"]


def test_classes_present_but_almost_never_predicted_are_unlearned() -> None:
    # rows true, columns predicted: water 1000 px of which 40 right (recall 4 %; IoU 40/1000,
    # as nothing else is predicted water), trees all right, field 60 of 1000 right (6 %),
    # road absent from the validation tiles
    confusion = np.array(
        [
            [40, 900, 60, 0],
            [0, 500, 0, 0],
            [0, 940, 60, 0],
            [0, 0, 0, 0],
        ]
    )
    metrics = metrics_from_confusion(confusion, NAMES)
    assert unlearned_classes(metrics) == ["water"]
    assert unlearned_classes(metrics, min_recall=0.07) == ["water", "field"]
    message = unlearned_message(metrics, ["water"], epoch=3)
    assert "after epoch 3" in message and "water (recall 4.0%, IoU 0.040)" in message


def test_final_stage_narrower_than_two_units_per_class_is_named() -> None:
    narrow = ModelConfig(encoder="resnet18", decoder_channels=[128, 64, 32, 16, 8])
    wide = ModelConfig(encoder="resnet18", decoder_channels=[128, 64, 32, 16, 16])
    assert "ends with 8 channels for 6 classes" in (final_stage_warning(narrow, 6) or "")
    assert final_stage_warning(wide, 6) is None
    assert final_stage_warning(narrow, 4) is None
