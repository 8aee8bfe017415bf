"""Deterministic training (issue 19, item 1): one seed gives the same run bit for bit, and each stored run records
how it was trained."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_experiments import config, tiny_bundle

from helpers.losses import CrossEntropy
from helpers.training import determinism, run_store


class SpyingCE(CrossEntropy):
    """Cross-entropy that notes, at every training step, whether deterministic mode is on."""

    def __init__(self):
        super().__init__()
        self.modes = []

    def forward(self, logits, target):
        if self.training:
            self.modes.append(
                (
                    torch.are_deterministic_algorithms_enabled(),
                    torch.backends.cudnn.benchmark,
                    torch.backends.cudnn.deterministic,
                )
            )
        return super().forward(logits, target)


def _stored_arrays(path):
    with np.load(path) as stored:
        return {name: stored[name] for name in ("val_logits", "test_logits", "loss_state")}


def test_two_runs_of_one_seed_agree_bit_for_bit_and_record_how_they_were_trained(tmp_path):
    bundle = tiny_bundle()
    settings = config(epochs=2, seed=3)  # well-regularised: one-cycle schedule and random augmentation
    runs, spies = [], []
    for folder in ("first", "second"):
        spy = SpyingCE()
        runs.append(
            run_store.train_run("ce", spy, bundle, "small_cnn", settings, stored=True, stored_dir=tmp_path / folder)
        )
        spies.append(spy)
    first, second = runs
    assert torch.equal(first.val_logits, second.val_logits) and torch.equal(first.test_logits, second.test_logits)
    strip = lambda history: [{k: v for k, v in r.items() if k != "seconds"} for r in history]  # noqa: E731
    assert strip(first.history) == strip(second.history)
    files = [tmp_path / folder / "tiny" / f"{first.key}.npz" for folder in ("first", "second")]
    arrays = [_stored_arrays(path) for path in files]
    assert all(np.array_equal(arrays[0][name], arrays[1][name]) for name in arrays[0])
    # every training step ran in deterministic mode, and the mode is switched off again afterwards
    assert spies[0].modes and set(spies[0].modes) == {(True, False, True)}
    assert not torch.are_deterministic_algorithms_enabled()
    meta = run_store.load_stored_run(files[0], bundle, CrossEntropy(), first.key)[0]
    assert meta["deterministic"] is True and meta["torch"] == torch.__version__
    assert meta["cuda"] == torch.version.cuda and meta["device_name"].startswith("CPU")
    other_seed = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(epochs=2, seed=4), cache=False)
    assert not torch.equal(other_seed.test_logits, first.test_logits)


def test_deterministic_mode_restores_the_previous_settings_even_after_an_error():
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
    )
    with pytest.raises(ZeroDivisionError):
        with determinism.deterministic():
            assert torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.benchmark
            raise ZeroDivisionError("a failing training step")
    assert (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
    ) == before


def test_a_cublas_setting_that_is_not_deterministic_is_refused_on_cuda(monkeypatch):
    monkeypatch.setattr(determinism.torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    with pytest.raises(RuntimeError, match="CUBLAS_WORKSPACE_CONFIG is ':0:0'.*:4096:8"):
        with determinism.deterministic():
            pass
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    with determinism.deterministic():
        pass


def test_importing_the_training_engine_sets_the_cublas_workspace_before_cuda_starts():
    environment = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    code = (
        "import os, helpers.training.train, torch; "
        "print(os.environ['CUBLAS_WORKSPACE_CONFIG'], torch.cuda.is_initialized())"
    )
    root = Path(determinism.__file__).resolve().parents[2]  # "-c" puts the working folder first on the path
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [":4096:8", "False"]
