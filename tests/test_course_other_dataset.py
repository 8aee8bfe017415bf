"""Issue 18: every notebook whose ``dataset`` is multi-class runs on another MedMNIST 2D data set. A small
PneumoniaMNIST-format file (grayscale, K = 2, classes "normal" and "pneumonia") is generated in a temporary data
folder, the course runs on it in the smoke profile (``-p dataset pneumoniamnist``), and ``course check`` passes.
The multi-label notebooks (07-11), whose ``dataset`` is a multi-label set, are not run."""

import json
import os

import numpy as np
import pytest

from helpers import course, data
from helpers.course import cli, suites

REPO_ROOT = course.REPO_ROOT

DATASET = "pneumoniamnist"
SPLIT_SIZES = {"train": 320, "val": 160, "test": 240}  # the smoke profile keeps at most 512 training images


def write_binary_grayscale_medmnist(path, seed=0):
    """A medmnist-format .npz (``{split}_images`` uint8 (N, 28, 28), ``{split}_labels`` uint8 (N, 1)): class 1
    (70 % of the images) has a brighter central blob than class 0, so a small CNN learns something."""
    rng = np.random.default_rng(seed)
    rows, columns = np.mgrid[:28, :28]
    blob = np.exp(-((rows - 14) ** 2 + (columns - 14) ** 2) / 40.0)
    arrays = {}
    for split, n in SPLIT_SIZES.items():
        labels = (rng.random(n) < 0.7).astype(np.uint8)
        strength = rng.normal(0.5 + 0.8 * labels, 0.5)
        images = 80 + 60 * strength[:, None, None] * blob + rng.normal(0, 25, (n, 28, 28))
        arrays[f"{split}_images"] = np.clip(images, 0, 255).astype(np.uint8)
        arrays[f"{split}_labels"] = labels[:, None]
    np.savez_compressed(path, **arrays)


#: notebooks that study one data set's own structure and refuse another (12: ISIC 2018's lesions, test set and sites)
BOUND_TO_THEIR_DATASET = ("12_dataset_shift",)


def multiclass_notebooks():
    """The notebooks whose ``dataset`` parameter takes any multi-class set (their profiles name one). The multi-label
    notebooks take ``dataset`` too, for a multi-label set (ChestMNIST or a synthetic one)."""
    return [
        nb.stem
        for nb in course.list_notebooks()
        if "dataset" in course.notebook_parameters(nb)
        and data.dataset_task(course.notebook_profiles(nb.stem)["smoke"]["dataset"]) == data.MULTI_CLASS
        and nb.stem not in BOUND_TO_THEIR_DATASET
    ]


def test_the_notebooks_that_take_a_multiclass_dataset_are_the_start_and_the_multiclass_ones():
    assert [stem[:2] for stem in multiclass_notebooks()] == ["00", "01", "02", "03", "04", "05", "06"]


def test_the_shift_notebook_refuses_another_dataset_by_name():
    cfg = suites.reference_config("12_dataset_shift", dataset=DATASET)
    with pytest.raises(ValueError, match="notebook 12 studies ISIC 2018"):
        suites.shift_bundles(cfg)


@pytest.mark.slow
def test_the_course_runs_in_the_smoke_profile_on_a_binary_grayscale_medmnist_set(tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_binary_grayscale_medmnist(data_dir / f"{DATASET}.npz")
    monkeypatch.setenv("CALIBMED_DATA_DIR", str(data_dir))
    # every run trained here, on this data, into an empty run cache of its own (nothing read from or written to
    # runs/cache): the notebooks share the runs they have in common, as in a course run, instead of each training
    # them again (CALIBMED_NO_CACHE=1 did that: 286 s for the seven notebooks, 221 s with the shared cache)
    monkeypatch.delenv("CALIBMED_NO_CACHE", raising=False)
    monkeypatch.setenv("CALIBMED_CACHE_DIR", str(tmp_path / "run-cache"))
    # the kernels start in notebooks/ and must import this checkout's helpers, not those of another editable install
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    out = tmp_path / "run"
    stems = multiclass_notebooks()
    cli.main(["run", "--profile", "smoke", "--out", str(out), "--notebooks", *stems, "-p", "dataset", DATASET])
    cli.main(["check", str(out)])
    assert list((tmp_path / "run-cache").glob("*.pt")), "no run was trained into the test's own cache"
    for stem in stems:
        payload = json.loads((out / "results" / f"{stem}.json").read_text())
        assert payload["config"]["dataset"] == DATASET, stem
        if stem != "00_start_here":  # the multi-class notebooks: no melanoma column on a set without melanoma
            assert "melanoma" not in json.dumps(payload["results"]), stem
