"""Issue 10: the course runner and results JSON. Parameters are checked before anything runs, `check` reads this
run's summary, stale results are cleared, results are written atomically as strict JSON."""

import json
import math
import os
import time

import nbformat
import numpy as np
import pytest
import torch

from helpers import course
from helpers.course import cli

PROFILES = {
    name: dict(dataset="dermamnist", image_size=28, model="small_cnn", epochs=1, batch_size=8, lr=0.1, alpha=0.1)
    for name in course.PROFILE_NAMES
}


@pytest.fixture
def papermill_calls(monkeypatch):
    """papermill.execute_notebook replaced by a recorder; set .fail to make every execution raise."""
    import papermill

    calls = []

    def execute(source, target, parameters, prepare_only, **kwargs):
        calls.append((source, parameters))
        if getattr(execute, "fail", False):
            raise RuntimeError("the kernel died")
        if not prepare_only:
            # papermill's kernel starts in `cwd` and the injected results_path is relative to it, not to this
            # process's folder (with the latter the file landed right only in a checkout two folders below /)
            path = os.path.join(kwargs.get("cwd") or os.getcwd(), parameters["results_path"])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                json.dump({"notebook": os.path.basename(target)[:-6], "results": {"x": 1}}, handle)
        with open(target, "w") as handle:
            handle.write("{}")

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    execute.calls = calls
    return execute


# ------------------------------------------------------------------------------------------------------------
# defect 5: unknown parameter names fail before anything runs
# ------------------------------------------------------------------------------------------------------------
def test_a_misspelled_parameter_fails_before_anything_runs_and_lists_the_parameters(tmp_path, papermill_calls):
    out = tmp_path / "run"
    with pytest.raises(SystemExit, match=r"00_start_here.*'epoch'.*epochs") as error:
        cli.main(["run", "--notebooks", "00", "-p", "epoch", "3", "--out", str(out)])
    assert "batch_size" in str(error.value)  # the notebook's parameters are named
    assert papermill_calls.calls == [] and not out.exists()


def test_a_parameter_must_be_declared_by_every_selected_notebook(tmp_path, papermill_calls):
    assert "alpha" in course.notebook_parameters(course.list_notebooks(["02"])[0])
    with pytest.raises(SystemExit, match=r"01_measuring_calibration.*'alpha'"):
        cli.main(["run", "--notebooks", "01", "02", "-p", "alpha", "0.2", "--out", str(tmp_path / "run")])
    assert papermill_calls.calls == []
    cli.main(["run", "--notebooks", "02", "-p", "alpha", "0.2", "--out", str(tmp_path / "run")])
    assert papermill_calls.calls[0][1]["alpha"] == 0.2


def test_configure_rejects_a_knob_that_neither_the_profiles_nor_the_core_knobs_declare():
    with pytest.raises(ValueError, match=r"99_test.*'gamma'.*alpha"):
        course.configure("99_test", PROFILES, profile="quick", gamma=None)
    assert course.configure("99_test", PROFILES, profile="quick", alpha=0.3).alpha == 0.3


@pytest.mark.slow
def test_papermill_on_one_notebook_fails_on_a_misspelled_parameter(tmp_path):
    """The same for a direct `papermill -p epoch 3` run: configure finds the injected name the notebook does
    not declare (IPython's input history holds papermill's injected cell)."""
    import papermill

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    parameters = nbformat.v4.new_code_cell('profile = "quick"\nepochs = None\nresults_path = None')
    parameters.metadata["tags"] = ["parameters"]
    notebook.cells = [
        parameters,
        nbformat.v4.new_code_cell(
            f"from helpers import course\nPROFILES = {PROFILES!r}\n"
            "cfg = course.configure('99_test', PROFILES, profile=profile, epochs=epochs, results_path=results_path)\n"
            "print('configured', cfg.epochs)"
        ),
    ]
    source = tmp_path / "99_test.ipynb"
    nbformat.write(notebook, source)
    # one kernel (issue 29, item 5: each start costs seconds): the declared `epochs` is injected beside the
    # misspelled `epoch`, and the error must name exactly the undeclared one
    with pytest.raises(papermill.PapermillExecutionError, match=r"parameter\(s\) \['epoch'\] were injected") as error:
        papermill.execute_notebook(
            str(source),
            str(tmp_path / "bad.ipynb"),
            parameters={"epochs": 3, "epoch": 3},
            cwd=str(course.REPO_ROOT),
            kernel_name="python3",
            progress_bar=False,
        )
    assert "but are not declared by this notebook's parameters cell" in str(error.value)


# ------------------------------------------------------------------------------------------------------------
# defect 4: check reads this run's summary; stale results are cleared at the start of a run
# ------------------------------------------------------------------------------------------------------------
def test_check_fails_after_a_failed_run_into_a_folder_with_old_results(tmp_path, papermill_calls):
    out = tmp_path / "run"
    cli.main(["run", "--notebooks", "00", "--out", str(out)])
    course.check_results(out)  # a good run passes
    stale = out / "results" / "00_start_here.json"
    assert stale.exists()
    papermill_calls.fail = True
    with pytest.raises(SystemExit, match="notebooks failed"):
        cli.main(["run", "--notebooks", "00", "--out", str(out)])
    assert not stale.exists()  # cleared when the run started
    with pytest.raises(SystemExit, match=r"00_start_here: failed in this run"):
        course.check_results(out)


def test_check_refuses_results_older_than_the_run_and_notebooks_the_run_did_not_execute(tmp_path, papermill_calls):
    out = tmp_path / "run"
    cli.main(["prepare", "--notebooks", "00", "01", "--profile", "smoke", "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    assert [row["status"] for row in summary["notebooks"]] == ["prepared", "prepared"]
    for stem in ("00_start_here", "01_measuring_calibration"):  # what nbval's execution of the copies writes
        (out / "results" / f"{stem}.json").write_text(json.dumps({"notebook": stem, "results": {"x": 1}}))
    course.check_results(out)
    old = time.time() - 3600
    os.utime(out / "results" / "01_measuring_calibration.json", (old, old))
    with pytest.raises(SystemExit, match=r"01_measuring_calibration: results JSON .* older than this run"):
        course.check_results(out)
    (out / "summary.json").write_text(json.dumps({"notebooks": summary["notebooks"]}))  # an older runner's
    with pytest.raises(SystemExit, match="older runner"):
        course.check_results(out)
    (out / "summary.json").unlink()
    with pytest.raises(SystemExit, match="no summary"):
        course.check_results(out)


# ------------------------------------------------------------------------------------------------------------
# defect 7: results JSON is written atomically and is strict JSON
# ------------------------------------------------------------------------------------------------------------
def _strict_loads(text):
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_results_json_is_strict_with_null_for_nan_and_infinity(tmp_path):
    cfg = course.configure("99_test", PROFILES, profile="smoke", alpha=None, results_path=str(tmp_path / "r.json"))
    results = {
        "nan": math.nan,
        "inf": math.inf,
        "tensor": torch.tensor([1.0, math.nan, -math.inf]),
        "numpy": np.float64("nan"),
        "nested": {"values": [0.5, math.inf]},
        "fine": 0.25,
    }
    path = course.save_results(cfg, results)
    payload = _strict_loads(path.read_text())
    assert payload["results"] == {
        "nan": None,
        "inf": None,
        "tensor": [1.0, None, None],
        "numpy": None,
        "nested": {"values": [0.5, None]},
        "fine": 0.25,
    }


def test_results_json_is_replaced_atomically(tmp_path, monkeypatch):
    cfg = course.configure("99_test", PROFILES, profile="smoke", alpha=None, results_path=str(tmp_path / "r.json"))
    course.save_results(cfg, {"ece": 0.1})
    replaced = []
    real_replace = os.replace

    def checking_replace(source, target):
        # until the rename the reader still sees the complete previous file; the new one sits next to it
        assert _strict_loads(open(target).read())["results"] == {"ece": 0.1}
        assert os.path.dirname(os.path.abspath(source)) == os.path.dirname(os.path.abspath(target))
        replaced.append(target)
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", checking_replace)
    course.save_results(cfg, {"ece": 0.2})
    assert replaced and _strict_loads((tmp_path / "r.json").read_text())["results"] == {"ece": 0.2}
    with pytest.raises(TypeError):
        course.save_results(cfg, {"ece": object()})  # not serialisable: the previous file stays whole
    assert _strict_loads((tmp_path / "r.json").read_text())["results"] == {"ece": 0.2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


# ------------------------------------------------------------------------------------------------------------
# defect 14: an unknown notebook prefix is a one-line error and leaves no folders
# ------------------------------------------------------------------------------------------------------------
def test_prepare_with_an_unknown_notebook_fails_cleanly_and_leaves_nothing(tmp_path, papermill_calls):
    out = tmp_path / "run"
    with pytest.raises(SystemExit, match=r"no notebook matches \['99'\]"):
        cli.main(["prepare", "--notebooks", "99", "--out", str(out)])
    assert not out.exists() and papermill_calls.calls == []
