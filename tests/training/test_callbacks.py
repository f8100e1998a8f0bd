"""The trainer's callbacks and its typed records; the loaded configuration stays as loaded."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import NoReturn

import pytest
import torch
from pydantic import ValidationError

from landcover.config import Config, load_config
from landcover.parallel.engines import engine_for
from landcover.parallel.env import DistEnv
from landcover.training.callbacks import Callback, CallbackList
from landcover.training.records import EpochRecord
from landcover.training.runlog import read_metrics
from landcover.training.trainer import Trainer


class Recorder(Callback):
    """Notes every hook call."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.records: list[EpochRecord] = []
        self.config: Config | None = None

    def on_train_start(self, config: Config) -> None:
        self.config = config
        self.calls.append(("train_start",))

    def on_epoch_start(self, epoch: int, steps: int) -> None:
        self.calls.append(("epoch_start", epoch, steps))

    def on_step(self, step: int, loss: torch.Tensor, samples: int) -> None:
        self.calls.append(("step", step, samples))

    def on_checkpoint(self, path: str, best: bool) -> None:
        self.calls.append(("checkpoint", Path(path).name, best))

    def on_epoch_end(self, record: EpochRecord) -> None:
        self.records.append(record)
        self.calls.append(("epoch_end", record.epoch))

    def on_train_end(self, completed: bool) -> None:
        self.calls.append(("train_end", completed))


def _train_in_process(
    config: Config, callbacks: list[Callback], trainer_class: type[Trainer] = Trainer
) -> tuple[Trainer, EpochRecord | None]:
    """Trains ``config`` with one worker in this process; returns the trainer and its record."""
    env, device = DistEnv(), torch.device("cpu")
    engine = engine_for(config.run)
    engine.join(env, config.run, device)
    try:
        trainer = trainer_class(config, env, engine, device, callbacks=callbacks)
        return trainer, trainer.run()
    finally:
        engine.leave()


def test_a_custom_callback_receives_each_typed_epoch_record(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    overrides = {"data.root": str(tiny_data), "run.out": str(run), "run.workers": 1}
    config = load_config(tiny_config, overrides, ["optim.loss.class_weights=auto"])
    loaded = config.to_dict()
    recorder = Recorder()
    trainer, last = _train_in_process(config, [recorder])

    # the loaded config is as loaded: the measured numbers are in their own record
    assert config.to_dict() == loaded and config.data.mean == "auto"
    assert trainer.resolved.workers == 1 and len(trainer.resolved.stats.mean) == 4
    assert trainer.config.data.mean == list(trainer.resolved.stats.mean)
    assert trainer.config.optim.loss.class_weights == list(trainer.resolved.stats.class_weights)
    assert recorder.config is trainer.config

    steps = trainer.geometry.steps_per_epoch
    expected: list[tuple] = [("train_start",)]
    for epoch, record in enumerate(recorder.records, 1):
        expected.append(("epoch_start", epoch, steps))
        expected += [("step", s, s * trainer.geometry.global_batch) for s in range(1, steps + 1)]
        expected.append(("checkpoint", "last.pt", False))
        if record.best:
            expected.append(("checkpoint", "best.pt", True))
        expected.append(("epoch_end", epoch))
    expected.append(("train_end", True))
    assert recorder.calls == expected

    # one typed record per epoch, the same as metrics.jsonl's lines and the checkpoint's
    assert [r.epoch for r in recorder.records] == [1, 2] and last is recorder.records[-1]
    assert all(isinstance(r, EpochRecord) and r.validation is not None for r in recorder.records)
    lines = read_metrics(run / "metrics.jsonl")
    assert [json.loads(json.dumps(r.to_dict())) for r in recorder.records] == lines
    assert recorder.records[0].best  # the first validation is the best so far
    first = recorder.records[0]
    assert first.val_miou == first.validation.miou and set(first.val_iou) == set(
        config.data.classes.names
    )
    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert saved["metrics"] == lines[-1]
    assert saved["config"]["data"]["mean"] == trainer.config.data.mean


class FeedWatcher(Callback):
    """Notes, at each step, the child processes alive (the feed's)."""

    def __init__(self) -> None:
        self.children: list[tuple[int, frozenset[int]]] = []
        self.epoch = 0

    def on_epoch_start(self, epoch: int, steps: int) -> None:
        self.epoch = epoch

    def on_step(self, step: int, loss: torch.Tensor, samples: int) -> None:
        pids = frozenset(p.pid for p in multiprocessing.active_children() if p.pid is not None)
        self.children.append((self.epoch, pids))


def test_one_feed_serves_the_whole_run(tiny_data: Path, tiny_config: Path, tmp_path: Path) -> None:
    # the feed's processes are forked once and draw every epoch's batches (a feed started
    # every epoch waited for its first batch at every start)
    overrides = {
        "data.root": str(tiny_data),
        "run.out": str(tmp_path / "run"),
        "run.workers": 1,
        "optim.epochs": 3,
        "data.loader_workers": 2,
    }
    config = load_config(tiny_config, overrides)
    before = {p.pid for p in multiprocessing.active_children()}
    watcher = FeedWatcher()
    _train_in_process(config, [watcher])
    assert {epoch for epoch, _ in watcher.children} == {1, 2, 3}
    feeds = {pids - before for _, pids in watcher.children}
    assert len(feeds) == 1, feeds  # the same processes at every step of every epoch
    (feed,) = feeds
    assert len(feed) == 2
    # and they are gone once the run is over
    assert not feed & {p.pid for p in multiprocessing.active_children()}


class FeedlessTrainer(Trainer):
    """A trainer whose feed cannot start (as when the shared memory runs out)."""

    def feed(self, epoch: int, epochs: int = 1) -> NoReturn:
        raise OSError(28, "No space left on device", "/dev/shm/torch_1")


def test_a_feed_that_cannot_start_still_ends_the_callbacks(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    overrides = {"data.root": str(tiny_data), "run.out": str(tmp_path / "run"), "run.workers": 1}
    config = load_config(tiny_config, overrides)
    recorder = Recorder()
    with pytest.raises(OSError, match="No space left"):
        _train_in_process(config, [recorder], FeedlessTrainer)
    assert recorder.calls == [("train_start",), ("train_end", False)]


def test_the_callback_list_ends_every_callback() -> None:
    class Failing(Callback):
        def on_train_end(self, completed: bool) -> None:
            raise RuntimeError("cannot close")

    first, last = Recorder(), Recorder()
    callbacks = CallbackList([first, Failing(), last])
    callbacks.on_train_end(False)  # after a failed training: logged, the training's error counts
    with pytest.raises(RuntimeError, match="cannot close"):
        callbacks.on_train_end(True)
    assert first.calls == last.calls == [("train_end", False), ("train_end", True)]


def test_replace_makes_a_new_validated_config_and_leaves_the_old_one() -> None:
    config = load_config(None, {"run.workers": 2})
    before = config.to_dict()
    changed = config.replace(run=config.run.replace(workers=4))
    assert (config.run.workers, changed.run.workers) == (2, 4) and config.to_dict() == before
    assert changed.run.val_overlap == config.run.val_overlap == 64
    assert changed.data is config.data  # sections not replaced are shared, not copied
    with pytest.raises(ValidationError, match="std values must be positive"):
        config.data.replace(std=[0.0, 0.1, 0.1, 0.1])
    # the default validation overlap is the config's own: a run section given is not changed
    run = config.run.replace(val_overlap=None)
    Config(run=run)
    assert run.val_overlap is None
