"""helpers.utils.progress (bar / final line / off, and the rule that picks one), helpers.utils.paths, and what the
course prints:
configure's one configuration block, describe() wrapped, save_results' relative path, warnings as one short note."""

import dataclasses
import io
import sys
import warnings

import pytest
import torch
from tiny_bundles import three_class_bundle

from helpers import course
from helpers.course import output_rules
from helpers.data import Split
from helpers.losses import CrossEntropy
from helpers.training import SmallCNN, TrainConfig, fit
from helpers.utils import paths, progress


@pytest.fixture
def clean_env(monkeypatch):
    for name in (progress.PROGRESS_ENV, "CI", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(progress, "_in_jupyter_kernel", lambda: False)
    return monkeypatch


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_explicit_mode_wins_and_a_bad_one_is_refused(clean_env):
    clean_env.setenv("CI", "true")
    clean_env.setenv(progress.PROGRESS_ENV, "bar")
    assert progress.progress_mode() == "bar"
    clean_env.setenv(progress.PROGRESS_ENV, "loud")
    with pytest.raises(ValueError, match="CALIBMED_PROGRESS='loud' is not one of"):
        progress.progress_mode()


def test_ci_gives_one_final_line_even_in_a_terminal(clean_env):
    clean_env.setattr(sys, "stderr", Terminal())
    assert progress.progress_mode() == "bar"
    clean_env.setenv("CI", "true")
    assert progress.progress_mode() == "final"
    clean_env.setenv("CI", "false")
    assert progress.progress_mode() == "bar"


def test_a_kernel_shows_the_bar_only_when_a_jupyter_server_started_it(clean_env):
    clean_env.setattr(progress, "_in_jupyter_kernel", lambda: True)
    clean_env.setattr(sys, "stderr", Terminal())
    assert progress.progress_mode() == "final"  # papermill / nbval / nbconvert
    clean_env.setenv("JPY_SESSION_NAME", "notebooks/01_measuring_calibration.ipynb")
    assert progress.progress_mode() == "bar"  # JupyterLab


def test_outside_a_kernel_a_pipe_gets_the_final_line(clean_env):
    clean_env.setattr(sys, "stderr", io.StringIO())
    assert progress.progress_mode() == "final"


def test_final_line_prints_once_with_count_time_and_postfix(clean_env, capsys):
    clean_env.setenv(progress.PROGRESS_ENV, "final")
    bar = progress.progress_bar(range(3, 6), desc="epochs", total=5, initial=2)
    assert list(bar) == [3, 4, 5]
    bar.set_postfix(train_loss="0.5000", val_nll="0.7000")
    bar.close()
    bar.close()
    captured = capsys.readouterr()
    assert captured.out == "epochs: 5/5 in 0 s (train_loss=0.5000, val_nll=0.7000)\n" and captured.err == ""


def test_a_bar_that_never_advanced_prints_nothing(clean_env, capsys):
    clean_env.setenv(progress.PROGRESS_ENV, "final")
    progress.progress_bar([], desc="epochs", total=0).close()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("seconds, text", [(42.4, "42 s"), (988, "16 min 28 s"), (7380, "2 h 03 min")])
def test_format_duration(seconds, text):
    assert progress.format_duration(seconds) == text


def tiny_bundle():
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(96) % 3
    images = (labels.view(-1, 1, 1, 1) * 80 + torch.randint(0, 40, (96, 1, 8, 8), generator=generator)).to(torch.uint8)
    split = Split(images, labels)
    return three_class_bundle(split, source="memory")


@pytest.mark.parametrize("mode", ["final", "off"])
def test_fit_prints_one_line_or_nothing_and_no_bar(clean_env, capfd, mode):
    clean_env.setenv(progress.PROGRESS_ENV, mode)
    torch.manual_seed(0)
    fit(SmallCNN(1, 3, widths=(4, 8)), CrossEntropy(), tiny_bundle(), TrainConfig(epochs=2, batch_size=32, lr=0.05))
    out, err = capfd.readouterr()
    assert err == ""
    if mode == "final":
        assert out.count("\n") == 1 and out.startswith("epochs: 2/2 in ") and "validation NLL=" in out
        assert "val_nll" not in out and "train_loss" not in out  # words, not raw keys (issue 28, item 3)
    else:
        assert out == ""


# ----------------------------------------------------------------------------------------------------------------
# paths and what the course prints


def test_display_path_is_relative_to_the_repo_or_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(tmp_path / "data"))
    assert paths.display_path(paths.REPO_ROOT / "runs" / "results" / "x.json") == "runs/results/x.json"
    assert paths.display_path(paths.REPO_ROOT) == "."
    assert paths.display_path(tmp_path / "data" / "dermamnist.npz") == "$CALIBMED_DATA_DIR/dermamnist.npz"
    text = paths.shorten_paths(f"from {tmp_path}/data/x.npz (seed 0) and {paths.REPO_ROOT}2/y")
    assert text == f"from $CALIBMED_DATA_DIR/x.npz (seed 0) and {paths.REPO_ROOT}2/y"


PROFILES = {
    name: dict(
        dataset="dermamnist",
        image_size=28,
        model="small_cnn",
        epochs=1,
        batch_size=8,
        lr=0.1,
        bootstrap_samples=100,
        bias_pool=60000,
    )
    for name in course.PROFILE_NAMES
}


def test_configure_prints_nothing_and_details_show_only_the_knobs_the_run_read(capsys):
    """Issue 28, item 3: no settings dump in the main flow; the folded details cell lists the knobs the notebook
    (or the library) read, not the ones it never uses (07 listed epochs and lr though it trains nothing)."""
    cfg = course.configure("01_measuring_calibration", PROFILES, profile="quick")
    assert capsys.readouterr().out == ""
    assert course.used_knobs("01_measuring_calibration") == set()
    _ = cfg.epochs, cfg.extra.get("bootstrap_samples")
    _ = dataclasses.replace(cfg, epochs=2), dataclasses.asdict(cfg), {**cfg.extra}  # copies read no knob
    assert course.used_knobs("01_measuring_calibration") == {"epochs", "bootstrap_samples"}
    text = course.details_text(cfg)
    assert "epochs=1" in text and "bootstrap_samples=100" in text
    assert "bias_pool" not in text and "lr=" not in text
    assert max(len(line) for line in text.splitlines()) <= 110 and str(paths.REPO_ROOT) not in text
    _ = cfg.bias_pool  # a notebook-specific knob read as an attribute counts too
    assert "bias_pool=60000" in course.details_text(cfg)
    course.configure("01_measuring_calibration", PROFILES, profile="quick")
    assert course.used_knobs("01_measuring_calibration") == set()  # a new run starts afresh


def test_describe_wraps_without_splitting_a_class_count(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(tmp_path))
    bundle = tiny_bundle()
    bundle.class_names = [f"a rather long class name number {i}" for i in range(3)]
    bundle.source = str(tmp_path / "synthetic" / "x.npz") + " (generated by helpers.data.synthetic v1, seed 0)"
    bundle.name = "synthetic_dermamnist"
    assert "source" not in bundle.describe(width=60) and "CALIBMED" not in bundle.describe(width=60)
    text = bundle.describe(width=60, details=True)
    first = "synthetic skin-lesion set: multi-class, 3 classes, 8×8 px, 1 channel\n"
    assert text.replace("\n  ", " ").startswith(first)
    assert all(len(line) <= 60 for line in text.splitlines())
    assert "a rather long class name number 2 32" in text.replace("\n  ", " ")
    assert all("a rather long class name number" in line for line in text.splitlines() if line.endswith(" 32,"))
    assert "$CALIBMED_DATA_DIR/synthetic/x.npz" in text and str(tmp_path) not in text


def test_save_results_prints_nothing_and_the_details_name_the_file_relative(capsys):
    cfg = course.configure(
        "99_test",
        PROFILES,
        profile="smoke",
        results_path=str(paths.REPO_ROOT / "build" / "test-results" / "99_test.json"),
    )
    path = course.save_results(cfg, {"x": 1})
    assert capsys.readouterr().out == ""
    course.details(cfg, results_file=path)
    out = capsys.readouterr().out
    assert "results written to build/test-results/99_test.json" in out and "compute time since configure" in out
    assert str(paths.REPO_ROOT) not in out
    path.unlink()


def test_warnings_become_one_short_note_on_stdout(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = course.show_warning_briefly
        warnings.warn_explicit(
            "LS+: class accuracies " + "[0.091, 0.0] " * 12 + "are raised",
            UserWarning,
            str(paths.REPO_ROOT / "helpers" / "losses" / "multiclass.py"),
            263,
        )
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("note (multiclass): LS+: class accuracies")
    assert "multiclass.py:263" not in captured.out and "UserWarning" not in captured.out
    assert max(len(line) for line in captured.out.splitlines()) <= 110


def test_inventory_report_prints_data_paths_under_the_environment_variable(monkeypatch, tmp_path):
    from helpers import data

    monkeypatch.setenv(paths.DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "dermamnist.npz").write_bytes(b"")
    report = data.inventory_report()
    assert report.splitlines()[0] == "data directory: $CALIBMED_DATA_DIR"
    assert "  dermamnist     28 px  present  $CALIBMED_DATA_DIR/dermamnist.npz" in report.splitlines()
    assert "missing  $CALIBMED_DATA_DIR/chestmnist_64.npz" in report and str(tmp_path) not in report


def test_the_runner_injects_a_results_path_relative_to_where_the_notebook_runs(tmp_path):
    pytest.importorskip("papermill")
    course.run_course(tmp_path, profile="smoke", selection=["00"], prepare_only=True)
    nb = (tmp_path / "notebooks" / "00_start_here.ipynb").read_text()
    injected = next(line for line in nb.split("\\n") if "results_path = " in line and "None" not in line)
    relative = injected.split('results_path = \\"', 1)[1].split('\\"', 1)[0]
    assert not relative.startswith("/")
    assert (tmp_path / "notebooks" / relative).resolve() == (tmp_path / "results" / "00_start_here.json").resolve()


def test_describe_prints_a_list_of_names_without_python_quotes(capsys):
    from helpers.course import output_rules

    profiles = {name: {**values, "losses": ["BCE", "focal"], "grid": [0.1, 0.2]} for name, values in PROFILES.items()}
    cfg = course.configure("01_measuring_calibration", profiles, profile="quick")
    _ = cfg.losses, cfg.grid
    out = course.details_text(cfg)
    assert "losses=[BCE, focal]" in out and "grid=[0.1, 0.2]" in out
    assert not output_rules.PRINTED_LIST.search(out)


def test_environment_table_has_its_rows_in_words():
    table = course.environment_table({"python": "3.11.7", "cuda_available": False, "cpu_threads": 2, "medmnist": None})
    assert list(table.index) == ["Python", "CUDA GPU available", "CPU threads used by torch", "medmnist"]
    assert list(table.iloc[:, 0]) == ["3.11.7", "no", "2", "not installed"]
    assert not any(output_rules.RAW_KEY.match(str(name)) for name in [*table.index, *table.columns])
    assert course.in_words("small_cnn_wide") == "wide small CNN" and course.in_words("other_key") == "other_key"
    stored = {path.parent.name for path in (paths.REPO_ROOT / "stored_runs").glob("*/*.npz")}
    assert all(course.in_words(name) != name for name in stored), "a data set of the stored runs has no words"
