"""Issue 29, low-severity argument defects: each wrong argument is refused up front by a ValueError that names it,
says what was wrong and how to fix it (not an UnboundLocalError, StopIteration or "min() arg is empty" from deep
inside, and not an error that blames another argument); right arguments of other numeric types (numpy integers)
are taken; a tie at the threshold is decided the same way in float32 and float64."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import course
from helpers.calibration import MatrixScaling, shift
from helpers.metrics import decisions

PROFILES = {
    name: dict(dataset="dermamnist", image_size=28, model="small_cnn", epochs=1, batch_size=8, lr=0.1, seeds=[0, 1])
    for name in course.PROFILE_NAMES
}


def _configure(tmp_path, **knobs):
    knobs.setdefault("results_path", str(tmp_path / "results" / "nb.json"))
    return course.configure("nb", PROFILES, "smoke", **knobs)


# ---------------------------------------------------------------------------------------------------------------
# configure
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["tpu", "meta", "cuda:x", "gpu", "cpu:0:1"])
def test_configure_refuses_a_device_torch_does_not_train_on_here(tmp_path, device):
    with pytest.raises(ValueError, match=rf"device={device!r} .*device must be .*'auto', 'cpu', 'cuda', 'cuda:N'"):
        _configure(tmp_path, device=device)


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", "mps"])
def test_configure_takes_the_devices_the_course_trains_on(tmp_path, device):
    assert _configure(tmp_path, device=device).device == device  # whether it is present is checked when training


def test_configure_refuses_a_seed_given_twice(tmp_path):
    with pytest.raises(ValueError, match=r"seeds=\[0, 1, 0\].*seeds must be .*each once.*counted twice"):
        _configure(tmp_path, seeds=[0, 1, 0])


def test_configure_takes_numpy_integer_seeds_as_plain_integers(tmp_path):
    cfg = _configure(tmp_path, seed=np.int64(3), seeds=[np.int64(0), np.int32(2)], epochs=np.int64(2))
    assert cfg.seed == 3 and type(cfg.seed) is int and type(cfg.epochs) is int
    assert cfg.seeds == [0, 2] and all(type(s) is int for s in cfg.seeds)
    with pytest.raises(ValueError, match=r"seed=np.True_|seed=True"):
        _configure(tmp_path, seed=np.bool_(True))


def test_configure_refuses_a_results_path_under_a_file(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=rf"results_path.*{blocker.name}.*not a folder"):
        _configure(tmp_path, results_path=str(blocker / "results" / "nb.json"))


def test_configure_refuses_a_results_path_that_is_a_folder(tmp_path):
    with pytest.raises(ValueError, match=r"results_path.*is a folder"):
        _configure(tmp_path, results_path=str(tmp_path))


def test_configure_refuses_a_results_path_this_user_cannot_write(tmp_path):
    """As another user (root writes anywhere), in a forked child: the folder is read-only to that user."""
    base = Path(tempfile.mkdtemp(prefix="calibmed-results-"))  # pytest's tmp_path is private to root
    os.chmod(base, 0o755)
    folder = base / "read-only"
    folder.mkdir(mode=0o555)
    os.chmod(folder, 0o555)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become nobody, configure, report through the pipe
        message = "no error"
        try:
            os.close(read)
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            _configure(tmp_path, results_path=str(folder / "nb.json"))
        except ValueError as error:
            message = str(error)
        except BaseException as error:  # noqa: BLE001 (reported to the parent, which fails the test)
            message = f"unexpected {type(error).__name__}: {error}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    os.waitpid(pid, 0)
    shutil.rmtree(base)
    assert "results_path" in message and "read-only" in message and "cannot write" in message, message


# ---------------------------------------------------------------------------------------------------------------
# decisions
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_probability_equal_to_the_threshold_is_treated_in_either_precision(dtype):
    probs = torch.tensor([[0.3, 0.7], [0.3, 0.7], [0.9, 0.1], [0.9, 0.1]], dtype=dtype)
    labels = torch.tensor([1, 0, 0, 1])
    outcome = decisions.threshold_outcome(probs, labels, 1, threshold=0.7)
    assert (outcome.true_positives, outcome.false_positives) == (1, 1)  # p = t: treated ("treat when p >= t")
    assert decisions.net_benefit(probs, labels, 1, threshold=0.7) == pytest.approx(0.25 - 0.25 * 0.7 / 0.3)
    curve = decisions.decision_curve(probs, labels, 1, thresholds=[0.7])
    assert curve.model[0] == pytest.approx(outcome.net_benefit)


def test_decision_record_refuses_no_curves():
    with pytest.raises(ValueError, match=r"curves is empty.*decision_curve"):
        decisions.decision_record({}, {}, "melanoma")


# ---------------------------------------------------------------------------------------------------------------
# calibration
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_iter", [0, -3, 2.5, True])
def test_em_target_prior_refuses_a_max_iter_below_one(max_iter):
    probs = torch.softmax(torch.randn(20, 3, generator=torch.Generator().manual_seed(0)), 1)
    with pytest.raises(ValueError, match=rf"max_iter must be an integer >= 1, got {max_iter!r}"):
        shift.em_target_prior(probs, torch.tensor([0.3, 0.3, 0.4]), max_iter=max_iter)


def test_crossfit_temperature_names_folds_when_a_fold_would_be_empty():
    logits = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 1, 2, 0, 1])
    with pytest.raises(ValueError, match=r"folds=7.*largest class has 2 images.*folds <= 2"):
        shift.crossfit_temperature(logits, labels, folds=7)
    with pytest.raises(ValueError, match=r"folds must be an integer, at least 2.*got 2.0"):
        shift.crossfit_temperature(logits, labels, folds=2.0)


@pytest.mark.parametrize("grid, problem", [((), "empty"), ([0.1, -1.0], "-1"), ([float("nan")], "nan")])
def test_matrix_scaling_cross_validation_refuses_an_empty_or_negative_grid(grid, problem):
    logits = torch.randn(30, 3, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(30) % 3
    with pytest.raises(ValueError, match=rf"grid .*{problem}.*penalties > 0"):
        MatrixScaling.cross_validated(logits, labels, grid=grid, folds=2)
