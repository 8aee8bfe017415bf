"""Profiles, run configuration, results JSON and the runner's results check."""

import json

import pytest

from helpers import course

PROFILES = {
    "smoke": dict(dataset="dermamnist", image_size=28, model="small_cnn", epochs=1, batch_size=64, lr=0.1,
                  max_train=256, recipes=["regularised"]),
    "quick": dict(dataset="dermamnist", image_size=28, model="small_cnn", epochs=20, batch_size=128, lr=0.1,
                  recipes=["regularised", "overfitting"]),
    "reference": dict(dataset="dermamnist", image_size=28, model="small_cnn", epochs=30, batch_size=128, lr=0.1,
                      recipes=["regularised", "overfitting"], seeds=[0, 1, 2]),
    "full": dict(dataset="dermamnist", image_size=224, model="resnet18", epochs=100, batch_size=128, lr=0.1,
                 recipes=["regularised", "overfitting"]),
}


def test_profile_fills_knobs_left_none(tmp_path):
    cfg = course.configure("99_test", PROFILES, profile="smoke", epochs=None, seed=3,
                           results_path=str(tmp_path / "r.json"))
    assert cfg.epochs == 1 and cfg.max_train == 256 and cfg.seed == 3
    assert cfg.recipes == ["regularised"]  # notebook-specific knob reached through extra


def test_explicit_knob_wins_over_profile():
    cfg = course.configure("99_test", PROFILES, profile="quick", epochs=3, model="resnet18")
    assert (cfg.epochs, cfg.model, cfg.image_size) == (3, "resnet18", 28)
    assert cfg.results_path.endswith("runs/results/99_test.json")


def test_bad_profile_and_missing_knob_are_clear_errors():
    with pytest.raises(ValueError, match="profile must be one of"):
        course.configure("99_test", PROFILES, profile="fast")
    incomplete = {p: {k: v for k, v in table.items() if k != "lr"} for p, table in PROFILES.items()}
    with pytest.raises(ValueError, match=r"no value for \['lr'\]"):
        course.configure("99_test", incomplete, profile="quick")
    with pytest.raises(AttributeError, match="no knob 'alpha'"):
        course.configure("99_test", PROFILES, profile="quick").alpha


def test_save_results_round_trips_tensors_and_config(tmp_path):
    torch = pytest.importorskip("torch")
    cfg = course.configure("99_test", PROFILES, profile="smoke", results_path=str(tmp_path / "out" / "r.json"))
    path = course.save_results(cfg, {"ece": torch.tensor(0.25), "curve": torch.arange(3)}, data_source="x.npz")
    payload = json.loads(path.read_text())
    assert payload["notebook"] == "99_test" and payload["profile"] == "smoke"
    assert payload["results"] == {"ece": 0.25, "curve": [0, 1, 2]}
    assert payload["config"]["epochs"] == 1 and payload["data_source"] == "x.npz"
    assert payload["environment"]["torch"] == torch.__version__


def test_save_results_top_level_keys_sit_beside_results(tmp_path):
    torch = pytest.importorskip("torch")
    cfg = course.configure("99_test", PROFILES, profile="smoke", results_path=str(tmp_path / "r.json"))
    path = course.save_results(cfg, {"a": 1}, top_level={"profile": "smoke", "seeds": torch.tensor([0, 1]),
                                                         "models": {"x": {"ece": 0.1}}})
    payload = json.loads(path.read_text())
    assert payload["seeds"] == [0, 1] and payload["models"] == {"x": {"ece": 0.1}}
    assert payload["results"] == {"a": 1} and payload["profile"] == "smoke"


def test_save_results_top_level_cannot_contradict_the_payload(tmp_path):
    cfg = course.configure("99_test", PROFILES, profile="smoke", results_path=str(tmp_path / "r.json"))
    with pytest.raises(ValueError, match="contradicts the payload's 'profile'"):
        course.save_results(cfg, {}, top_level={"profile": "reference"})
    assert not (tmp_path / "r.json").exists()


def test_check_results_fails_on_a_missing_json(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "notebooks" / "00_a.ipynb").write_text("{}")
    (tmp_path / "summary.json").write_text(json.dumps({"started_at": 0.0, "notebooks": [
        {"notebook": "00_a", "status": "ok", "error": None}]}))
    with pytest.raises(SystemExit, match="00_a: no results JSON"):
        course.check_results(tmp_path)
    (tmp_path / "results" / "00_a.json").write_text(json.dumps({"notebook": "00_a", "results": {"x": 1}}))
    course.check_results(tmp_path)


def test_every_course_notebook_has_a_parameters_cell_and_is_executed():
    import nbformat

    notebooks = course.list_notebooks()
    assert [nb.stem[:2] for nb in notebooks] == sorted(nb.stem[:2] for nb in notebooks)
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
        for knob in ("profile", *course.KNOBS):
            assert f"{knob} =" in tagged[0].source, f"{path.name}: parameters cell lacks {knob}"
        assert nb.cells[0].cell_type == "markdown" and "cc by" in nb.cells[0].source.lower(), \
            f"{path.name}: the first cell must name the data licence (CC BY / CC BY-NC)"
        assert all(c.execution_count for c in code), f"{path.name}: committed without executing every cell"
        errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{path.name}: committed with an error output"
        size = sum(len(json.dumps(c.get("outputs", []))) for c in code)
        assert size < 2_000_000, f"{path.name}: {size / 1e6:.1f} MB of stored outputs (limit 2 MB)"
        assert any(o.get("data", {}).get("image/png") for c in code for o in c.get("outputs", [])), \
            f"{path.name}: no PNG figure in the committed outputs"


def test_notebook_selection_rejects_unknown_prefix():
    with pytest.raises(ValueError, match="no notebook matches"):
        course.list_notebooks(["77"])


def test_compare_tables_tells_identical_from_changed_tables(tmp_path, capsys):
    def notebook(table_html):
        return json.dumps({"cells": [{"cell_type": "code", "source": "df", "metadata": {}, "outputs": [
            {"output_type": "execute_result", "data": {"text/html": table_html, "text/plain": "df"}}]}]})

    committed, run = tmp_path / "committed", tmp_path / "run"
    (run / "notebooks").mkdir(parents=True)
    committed.mkdir()
    (committed / "06_x.ipynb").write_text(notebook("<table><td>0.123</td></table>"))
    (run / "notebooks" / "06_x.ipynb").write_text(notebook("<table><td>0.123</td></table>"))
    assert course.compare_tables(run, committed)
    (run / "notebooks" / "06_x.ipynb").write_text(notebook("<table><td>0.124</td></table>"))
    assert not course.compare_tables(run, committed)
    assert "DIFFERENT (0 of 1 equal)" in capsys.readouterr().out
