"""The training version names what the training code does (issue 19, item 2): a docstring or an unused metric keeps
it, a loss's arithmetic changes it, and a process keeps the version of the code it loaded."""

import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from helpers import metrics
from helpers.losses import FocalLoss
from helpers.training import run_store, version

HELPERS = Path(version.__file__).resolve().parents[1]  # helpers/ (version.py is helpers/training/version.py)
FOCAL_LINE = "        return _focal_terms(log_pt, self.gamma).mean()\n"
FOCAL_EDITED = "        return _focal_terms(log_pt, self.gamma + 0.5).mean()\n"


def test_the_version_is_computed_once_per_process_and_is_stable(monkeypatch):
    first = version.training_version()
    assert len(first) == 16 and int(first, 16) >= 0
    assert version.compute_training_version() == first  # the probe is deterministic
    assert run_store.training_version is version.training_version
    computed = []
    real = version.compute_training_version
    monkeypatch.setattr(version, "compute_training_version", lambda: computed.append(1) or real())
    monkeypatch.setattr(version, "_computed", None)  # as in a new process
    assert version.training_version() == version.training_version() == first and computed == [1]


def test_a_loss_patched_in_place_as_autoreload_does_gets_its_own_version(monkeypatch):
    """``%autoreload 2`` gives the functions the process holds the code of the edited file (it sets their
    ``__code__``): the version must follow, not stay the one computed before (issue 29)."""
    today = version.training_version()
    source = textwrap.dedent(inspect.getsource(FocalLoss.forward))
    assert source.count(FOCAL_LINE.strip()) == 1
    namespace = {}
    exec(source.replace(FOCAL_LINE.strip(), FOCAL_EDITED.strip()), FocalLoss.forward.__globals__, namespace)
    monkeypatch.setattr(FocalLoss.forward, "__code__", namespace["forward"].__code__)
    edited = version.training_version()
    assert edited != today and edited == version.compute_training_version()
    monkeypatch.undo()
    assert version.training_version() == today


def test_the_probe_covers_every_trained_loss_and_model():
    from helpers.course import suites
    from helpers.lessons import multilabel_analysis

    names = [name for name, _ in version.probe_outputs()]
    assert {f"loss {n}" for n in multilabel_analysis.LOSS_NAMES} <= set(names)
    multiclass = set(suites.MULTICLASS_LOSSES) - {"CCL-Net"}  # CCL-Net's hooks are probed through fit
    assert {f"loss {n}" for n in multiclass} <= set(names) and "CCL-Net head step" in names
    assert {"model small_cnn", "model small_cnn_wide", "model resnet18"} <= set(names)


def test_an_unused_metric_leaves_the_version_and_a_loss_edit_changes_it(monkeypatch):
    today = version.training_version()
    monkeypatch.setattr(metrics, "true_rms", lambda *args: -1.0)
    monkeypatch.setattr(metrics, "brier", lambda *args: -1.0)
    assert version.compute_training_version() == today
    real_forward = FocalLoss.forward
    monkeypatch.setattr(FocalLoss, "forward", lambda self, logits, target: 1.0001 * real_forward(self, logits, target))
    assert version.compute_training_version() != today


def test_rounding_hides_last_bits_only_also_near_zero():
    a = torch.tensor([1e-12, -0.0, 0.5, -0.123456789, float("nan")], dtype=torch.float64)
    b = a + torch.tensor([3e-12, 0.0, 1e-12, -1e-12, 0.0], dtype=torch.float64)
    assert version._rounded(a, 4) == version._rounded(b, 4) == "1:0,0,5000,-1235,nan"
    assert version._rounded(a * 1.001, 4) != version._rounded(a, 4)


def _copy_of_helpers(root: Path) -> Path:
    shutil.copytree(HELPERS, root / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(root: Path, relative: str, old: str, new: str) -> None:
    path = root / "helpers" / relative
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{relative}: the text to edit is not there once"
    path.write_text(text.replace(old, new), encoding="utf-8")


VERSION_SCRIPT = """
import json, pathlib, helpers, helpers.training.run_store as ex
assert pathlib.Path(helpers.__file__).resolve().parent == pathlib.Path.cwd().resolve() / "helpers", helpers.__file__
print(json.dumps({"version": ex.training_version()}))
"""

# imports the code, then the files change on disk (an edit in another window), then it trains, stores and caches
OLD_PROCESS_SCRIPT = """
import json, pathlib, sys, torch, helpers, helpers.training.run_store as ex, helpers.training.recipes as recipes
from helpers.data import DatasetBundle, Split
from helpers.losses import FocalLoss
assert pathlib.Path(helpers.__file__).resolve().parent == pathlib.Path.cwd().resolve() / "helpers", helpers.__file__
source = pathlib.Path("helpers/losses/multiclass.py")
source.write_text(source.read_text().replace(sys.argv[1], sys.argv[2]))
g = torch.Generator().manual_seed(0)
labels = torch.randint(0, 3, (32,), generator=g)
split = Split(torch.randint(0, 250, (32, 1, 8, 8), generator=g, dtype=torch.uint8), labels)
bundle = DatasetBundle(name="tiny", task="multi-class", class_names=["a", "b", "c"], train=split, val=split,
                       test=split, source="test", licence="none", image_size=8)
config = recipes.recipe_config("over-fitting", epochs=1, lr=0.05, batch_size=16, device="cpu", progress=False)
ex.train_run("focal", FocalLoss(2.0), bundle, "small_cnn", config, stored=True, stored_dir="stored")
ex.train_run("focal", FocalLoss(2.0), bundle, "small_cnn", config, cache_dir="cache")
[stored] = pathlib.Path("stored/tiny").glob("*.npz")
import numpy as np
meta = json.loads(np.load(stored)["meta"].tobytes())
before = ex.training_version()
# then the edited file is reloaded (importlib.reload, as a reader in a notebook would) and the loss trained again
import importlib, helpers.losses.multiclass as multiclass
importlib.reload(multiclass)
ex.train_run("focal", multiclass.FocalLoss(2.0), bundle, "small_cnn", config, cache_dir="reloaded")
print(json.dumps({"version": before, "stored": meta["training_version"],
                  "cached": [p.stem.split("-")[1] for p in pathlib.Path("cache").glob("*.pt")],
                  "after_reload": ex.training_version(),
                  "cached_after_reload": [p.stem.split("-")[1] for p in pathlib.Path("reloaded").glob("*.pt")]}))
"""


def _run(root: Path, script: str, *args: str, **variables: str) -> dict:
    environment = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", **variables}
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=root, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cosmetic_edits_and_plain_cpu_kernels_keep_the_version(tmp_path):
    """A fresh process over a copy of the package with a docstring, a comment and an unused metric edited, on
    PyTorch's plain kernels (ATEN_CPU_CAPABILITY=default: what another CPU runs), computes today's version. One
    process checks both (issue 29, item 5: each costs seconds); either change of the version fails it."""
    cosmetic = _copy_of_helpers(tmp_path / "cosmetic")
    _edit(
        cosmetic,
        "losses/multiclass.py",
        "Focal loss ``-(1 - p_t)^γ log p_t`` (Lin et al. 2017)",
        "Focal loss (Lin et al. 2017): the docstring was edited",
    )
    _edit(cosmetic, "losses/multiclass.py", FOCAL_LINE, FOCAL_LINE.rstrip("\n") + "  # a comment\n")
    (cosmetic / "helpers" / "metrics" / "calibration.py").write_text(
        (cosmetic / "helpers" / "metrics" / "calibration.py").read_text()
        + "\n\ndef true_rms(probs, true_posteriors):\n    return -1.0\n"
    )
    script = VERSION_SCRIPT.replace(
        "ex.training_version()", "ex.training_version(), 'cpu': __import__('torch').backends.cpu.get_cpu_capability()"
    )
    outcome = _run(cosmetic, script, ATEN_CPU_CAPABILITY="default")
    assert outcome == {"version": version.training_version(), "cpu": "DEFAULT"}


def test_versions_of_edited_copies_and_a_process_that_imported_older_code(tmp_path):
    """Runs the probe in fresh processes over a modified copy of the package: a loss's arithmetic changes the
    version. A process that imported the code before the loss was edited on disk stores and caches its runs under
    the version of the code it loaded, never the edited one; once it reloads the edited module, under the edited
    code's version."""
    today = version.training_version()

    old_process = _copy_of_helpers(tmp_path / "old")
    outcome = _run(old_process, OLD_PROCESS_SCRIPT, FOCAL_LINE, FOCAL_EDITED)
    assert FOCAL_EDITED in (old_process / "helpers" / "losses" / "multiclass.py").read_text()  # the edit happened
    edited = _run(old_process, VERSION_SCRIPT)["version"]  # a new process loads the edited code
    assert edited != today
    assert outcome["version"] == outcome["stored"] == today and outcome["cached"] == [today]
    # after importlib.reload of the edited module, the process computes the edited code's version and caches under it
    assert outcome["after_reload"] == edited and outcome["cached_after_reload"] == [edited]
