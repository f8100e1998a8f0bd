import itertools
import math

import numpy as np
import pytest
import torch

from landcover.classes import IGNORE_INDEX
from landcover.config import OptimConfig
from landcover.inference.blend import blend_weights
from landcover.inference.sliding import SlidingWindowPredictor, window_starts
from landcover.metrics import confusion_matrix, metrics_from_confusion
from landcover.training.geometry import BatchGeometry
from landcover.training.schedule import lr_at


def test_warmup_then_cosine_linear_rule() -> None:
    optim = OptimConfig(
        lr=0.001, ref_batch=16, warmup_epochs=2, epochs=10, min_lr_ratio=0.0, lr_scaling="linear"
    )
    geometry = BatchGeometry.from_optim(optim, 4)  # 4 x 16 = 64: peak 0.001 x 64/16 = 0.004
    assert lr_at(optim, geometry, 0.0) == pytest.approx(0.001)
    assert lr_at(optim, geometry, 1.0) == pytest.approx(0.0025)
    assert lr_at(optim, geometry, 2.0) == pytest.approx(0.004)
    assert lr_at(optim, geometry, 6.0) == pytest.approx(0.002)
    assert lr_at(optim, geometry, 10.0) == pytest.approx(0.0, abs=1e-12)


def test_warmup_then_cosine_sqrt_rule() -> None:
    optim = OptimConfig(lr=0.001, ref_batch=16, warmup_epochs=2, epochs=10, min_lr_ratio=0.0)
    geometry = BatchGeometry.from_optim(optim, 4)  # AdamW: peak 0.001 x sqrt(64/16) = 0.002
    assert lr_at(optim, geometry, 0.0) == pytest.approx(0.001)
    assert lr_at(optim, geometry, 1.0) == pytest.approx(0.0015)
    assert lr_at(optim, geometry, 2.0) == pytest.approx(0.002)
    assert lr_at(optim, geometry, 6.0) == pytest.approx(0.001)
    assert lr_at(optim, geometry, 10.0) == pytest.approx(0.0, abs=1e-12)
    # below ref_batch the peak is under lr: warm-up starts at the peak (a flat line)
    small = BatchGeometry.from_optim(optim.model_copy(update={"batch_size": 4}), 1)
    assert lr_at(optim, small, 0.0) == pytest.approx(0.001 * math.sqrt(4 / 16))
    assert lr_at(optim, small, 2.0) == pytest.approx(0.001 * math.sqrt(4 / 16))


def test_confusion_and_metrics_known_case() -> None:
    target = torch.tensor([0, 0, 1, 1, 2, IGNORE_INDEX])
    pred = torch.tensor([0, 1, 1, 1, 0, 2])
    cm = confusion_matrix(pred, target, 3)
    assert cm.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    m = metrics_from_confusion(cm.numpy(), ["a", "b", "c"])
    assert m["iou"] == {"a": pytest.approx(1 / 3), "b": pytest.approx(2 / 3), "c": 0.0}
    assert m["miou"] == pytest.approx((1 / 3 + 2 / 3 + 0) / 3)
    assert m["accuracy"] == pytest.approx(3 / 5)
    assert m["support"] == {"a": 2, "b": 2, "c": 1}


def test_absent_class_is_left_out_of_miou() -> None:
    cm = np.array([[5, 0, 0], [0, 5, 0], [0, 0, 0]])
    m = metrics_from_confusion(cm, ["a", "b", "c"])
    assert m["iou"]["c"] is None
    assert m["miou"] == pytest.approx(1.0)


def test_windows_cover_and_weights_fall_off() -> None:
    assert window_starts(100, 64, 16) == [0, 36]
    assert window_starts(64, 64, 16) == [0]
    starts = window_starts(1000, 256, 64)
    assert starts[0] == 0 and starts[-1] == 1000 - 256
    assert all(b - a <= 256 - 64 for a, b in itertools.pairwise(starts))
    w = blend_weights(64, 16)
    assert float(w[32, 32]) == 1.0
    assert float(w[0, 32]) < 0.1
    assert float(w.min()) > 0


class _PixelModel(torch.nn.Module):
    """A 1x1 convolution: its output at a pixel depends only on that pixel."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def test_blended_sliding_window_equals_whole_image_for_a_pixelwise_model() -> None:
    torch.manual_seed(0)
    model = _PixelModel().eval()
    image = np.random.default_rng(0).integers(0, 255, size=(150, 130, 4), dtype=np.uint8)

    def prepare(b: torch.Tensor) -> torch.Tensor:
        return b.permute(0, 3, 1, 2).float() / 255

    predictor = SlidingWindowPredictor(model, 64, 16, 5, prepare, torch.device("cpu"))
    probs = predictor.predict_array(image)
    strips = list(predictor.iter_strips(lambda a, b: image[a:b], 150, 130))
    assert [row for row, _ in strips] == [0, 48, 86]  # window rows at 0, 48, 86 (flush end)
    assert sum(s.shape[1] for _, s in strips) == 150
    whole = torch.softmax(model(prepare(torch.from_numpy(image)[None])), 1)[0]
    assert probs.shape == (3, 150, 130)
    torch.testing.assert_close(probs, whole, atol=1e-5, rtol=1e-5)


def test_image_smaller_than_the_window() -> None:
    model = _PixelModel().eval()
    image = np.random.default_rng(1).integers(0, 255, size=(20, 37, 4), dtype=np.uint8)

    def prepare(b: torch.Tensor) -> torch.Tensor:
        return b.permute(0, 3, 1, 2).float() / 255

    probs = SlidingWindowPredictor(model, 64, 16, 2, prepare, torch.device("cpu")).predict_array(
        image
    )
    whole = torch.softmax(model(prepare(torch.from_numpy(image)[None])), 1)[0]
    torch.testing.assert_close(probs, whole, atol=1e-5, rtol=1e-5)
