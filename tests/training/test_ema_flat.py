"""The captured step's moving average (one buffer, one ``lerp_``) moves as the eager one does."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from landcover.checkpoint import Checkpoint
from landcover.training.ema import ModelEMA, ema_decay_at

DECAY = 0.9


def _model(channels_last: bool) -> nn.Module:
    """Convolutions, batch norm (float running statistics, an integer count) and a head."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 3, 1)
    )
    return model.to(memory_format=torch.channels_last) if channels_last else model


def _train_a_little(model: nn.Module, steps: int, emas: list[ModelEMA], weights: list) -> None:
    """Steps the model; after each step every average moves by its own path."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(2, 4, 8, 8, generator=gen)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        for ema, how in zip(emas, weights, strict=True):
            if how == "update":
                ema.update(model)
            else:  # the captured step's way: the weight in a tensor, the count apart
                ema.lerp(model, torch.tensor(ema.next_weight()))
                ema.count()


def _expected(initial: dict[str, torch.Tensor], history: list[dict[str, torch.Tensor]]) -> dict:
    """The average computed apart, in float64, from the model's weights after each step."""
    ema = {k: v.double() for k, v in initial.items() if v.is_floating_point()}
    for t, weights in enumerate(history):
        d = ema_decay_at(DECAY, t)
        ema = {k: d * ema[k] + (1 - d) * weights[k].double() for k in ema}
    return ema


def test_lerp_in_one_buffer_equals_update_and_the_average_computed_apart() -> None:
    """Contiguous, channels-last, and a model made channels-last after its average was copied
    (the buffer then takes the model's layout)."""
    for layout in ("contiguous", "channels_last", "changed after the copy"):
        model = _model(layout == "channels_last")
        flat, eager = ModelEMA(model, DECAY), ModelEMA(model, DECAY)
        if layout == "changed after the copy":
            model = model.to(memory_format=torch.channels_last)
        initial = {k: v.clone() for k, v in model.state_dict().items()}
        history = []
        for _ in range(5):
            _train_a_little(model, 1, [flat, eager], ["lerp", "update"])
            history.append({k: v.clone() for k, v in model.state_dict().items()})
        want = _expected(initial, history)
        got, other = flat.state_dict(), eager.state_dict()
        for key, value in want.items():
            torch.testing.assert_close(got[key].double(), value, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(got[key], other[key], rtol=1e-5, atol=1e-6)
        # the integer count is the model's; the float tensors lie in one buffer
        assert int(got["1.num_batches_tracked"]) == 5
        floats = [t for t in flat.module.state_dict().values() if t.is_floating_point()]
        assert len({t.untyped_storage().data_ptr() for t in floats}) == 1
        assert flat.module[0].weight.stride() == model[0].weight.stride()


def test_the_buffered_average_saves_loads_and_predicts_as_its_weights_say() -> None:
    model = _model(channels_last=True)
    ema = ModelEMA(model, DECAY)
    _train_a_little(model, 3, [ema], ["lerp"])
    buffer = io.BytesIO()
    torch.save(ema.state_dict(), buffer)
    loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    fresh = _model(channels_last=False)
    fresh.load_state_dict(loaded)
    x = torch.randn(1, 4, 8, 8)
    torch.testing.assert_close(fresh.eval()(x), ema.module(x))
    # loading into a buffered average writes into its buffer
    again = ModelEMA(model, DECAY)
    _train_a_little(model, 1, [again], ["lerp"])
    again.load(loaded, 3)
    for key, value in loaded.items():
        assert torch.equal(again.state_dict()[key], value)
    floats = [t for t in again.module.state_dict().values() if t.is_floating_point()]
    assert len({t.untyped_storage().data_ptr() for t in floats}) == 1


def test_a_model_of_two_dtypes_keeps_one_lerp_a_tensor() -> None:
    model = _model(channels_last=False)
    model[3].half()  # a head in another dtype: no one buffer
    ema = ModelEMA(model, DECAY)
    ema.lerp(model, torch.tensor(0.5))
    floats = [t for t in ema.module.state_dict().values() if t.is_floating_point()]
    assert len({t.untyped_storage().data_ptr() for t in floats}) == len(floats)
    torch.testing.assert_close(ema.module[3].weight, model[3].weight)  # lerp of equal weights


def test_a_checkpoint_of_the_buffered_average_is_written_without_copying_the_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoint's state is its fields as they are: a deep copy of each tensor (views into
    one buffer) would copy the whole buffer once a tensor (23 GB of GPU memory for the default
    U-Net's 232); the file holds the buffer once."""
    model = _model(channels_last=False)
    plain_sizes = len(Checkpoint(model=model.state_dict(), config={}).serialize())
    ema = ModelEMA(model, DECAY)
    _train_a_little(model, 2, [ema], ["lerp"])
    weights = ema.state_dict()
    checkpoint = Checkpoint(weights, {}, train_model=model.state_dict(), ema_updates=2)

    def no_deep_copy(self: torch.Tensor, memo: dict) -> torch.Tensor:
        raise AssertionError("a tensor was deep-copied")

    monkeypatch.setattr(torch.Tensor, "__deepcopy__", no_deep_copy)
    state = checkpoint.to_state()
    assert all(state["model"][k] is v for k, v in weights.items())
    assert len(checkpoint.serialize()) < 2.2 * plain_sizes  # the average and the raw weights
    monkeypatch.undo()
    loaded = torch.load(io.BytesIO(checkpoint.serialize()), weights_only=True)
    for key, value in weights.items():
        assert torch.equal(loaded["model"][key], value)


def test_tied_weights_move_once_a_step_by_either_update() -> None:
    """A tensor under two names (tied weights) is one tensor of the average: it moves once."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False))
    model[1].weight = model[0].weight
    start = model[0].weight.detach().clone()
    for how in ("lerp", "update"):
        ema = ModelEMA(model, DECAY)
        with torch.no_grad():
            model[0].weight.add_(1.0)
        if how == "lerp":
            ema.lerp(model, torch.tensor(ema.next_weight()))
        else:
            ema.update(model)
        weight = 1.0 - ema_decay_at(DECAY, 0)
        want = start + weight * 1.0  # one move toward the model's weights
        torch.testing.assert_close(ema.module[0].weight, want, msg=how)
        torch.testing.assert_close(ema.module[1].weight, want, msg=how)
        with torch.no_grad():
            model[0].weight.sub_(1.0)
