"""helpers/course/ray_engine.py without a cluster: grids, atomic writes under content keys, rebuilding a run from its
name, and the command-line checks of --engine ray (the two-node cluster test is tests/test_scale_cluster.py)."""

from __future__ import annotations

import os
import sys

import pytest
from test_suites import tiny_bundle, tiny_config

from helpers.course import cli, ray_engine, suites, train_runs
from helpers.training import run_store
from helpers.utils import REPO_ROOT


def test_a_grid_is_parsed_as_json_values_and_expands_to_every_combination_in_order():
    grid = ray_engine.parse_grid(["seed=0,1", "dataset=dermamnist,synthetic_dermamnist", "alpha=0.05"])
    assert grid == {"seed": [0, 1], "dataset": ["dermamnist", "synthetic_dermamnist"], "alpha": [0.05]}
    points = ray_engine.grid_points(grid)
    assert [ray_engine.point_folder(p) for p in points] == [
        "seed=0,dataset=dermamnist,alpha=0.05",
        "seed=0,dataset=synthetic_dermamnist,alpha=0.05",
        "seed=1,dataset=dermamnist,alpha=0.05",
        "seed=1,dataset=synthetic_dermamnist,alpha=0.05",
    ]


@pytest.mark.parametrize(
    "items, message",
    [
        (["seed"], "NAME=VALUE"),
        (["seed="], "NAME=VALUE"),
        (["seed=0", "seed=1"], "twice"),
        (["seed=0,,1"], "empty value"),
        (["2x=1"], "NAME=VALUE"),
    ],
)
def test_a_malformed_grid_is_refused_with_the_form_it_needs(items, message):
    with pytest.raises(ValueError, match=message):
        ray_engine.parse_grid(items)


def test_a_grid_value_that_is_no_folder_name_is_refused():
    with pytest.raises(ValueError, match="folder name"):
        ray_engine.point_folder({"data_dir": "/tmp/x"})


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_are_written_atomically_with_the_permissions_the_umask_gives(tmp_path, umask):
    previous = os.umask(umask)
    try:
        assert ray_engine.keep_file(tmp_path, "a/run.npz", b"logits") == "kept"
    finally:
        os.umask(previous)
    assert (tmp_path / "a" / "run.npz").read_bytes() == b"logits"
    assert (tmp_path / "a" / "run.npz").stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["run.npz"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    ray_engine.keep_file(tmp_path, "run.npz", b"old")
    with pytest.raises(TypeError):
        ray_engine.keep_file(tmp_path, "run.npz", "not bytes")
    assert (tmp_path / "run.npz").read_bytes() == b"old" and len(list(tmp_path.iterdir())) == 1


def test_a_file_sent_twice_is_kept_once_and_names_outside_the_store_are_refused(tmp_path):
    assert ray_engine.keep_file(tmp_path, "tiny/abc.npz", b"run") == "kept"
    assert ray_engine.keep_file(tmp_path, "tiny/abc.npz", b"run") == "present"  # a retried task, or a shared folder
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["abc.npz"]
    for name in ("/etc/abc.npz", "../abc.npz", "tiny/../../abc.npz"):
        with pytest.raises(ValueError, match="relative"):
            ray_engine.keep_file(tmp_path, name, b"run")


@pytest.fixture
def tiny_suite(tmp_path, monkeypatch):
    """A declared notebook 'tiny' (cross-entropy and LS+ on 64 tiny images, reference profile: stored runs)."""
    bundle = tiny_bundle()
    monkeypatch.setitem(
        suites.DECLARED_RUNS,
        "tiny",
        lambda cfg: suites.multiclass_runs(cfg, bundle, ("cross-entropy", "LS+"), recipes=("well-regularised",)),
    )
    monkeypatch.setattr(suites, "reference_config", lambda notebook, profile, **knobs: tiny_config(profile))
    return {"stored_dir": str(tmp_path / "stored"), "cache_dir": str(tmp_path / "cache")}


def test_a_run_is_rebuilt_from_its_name_trained_once_and_its_dependants_declared_in_the_next_round(tiny_suite):
    with ray_engine.store_roots(tiny_suite["stored_dir"], tiny_suite["cache_dir"]):
        [(name, planned)] = ray_engine.missing_runs(["tiny"], "reference", {})
    assert (name.notebook, name.profile, name.title) == ("tiny", "reference", "cross-entropy, well-regularised, seed 0")

    outcome = ray_engine.train_named_run(name, **tiny_suite)
    assert (outcome["status"], outcome["file"]) == ("trained", f"tiny/{name.key}.npz")
    stored_file = os.path.join(tiny_suite["stored_dir"], outcome["file"])
    assert outcome["payload"] == open(stored_file, "rb").read()
    assert ray_engine.train_named_run(name, **tiny_suite)["status"] == "already stored"  # a retried task trains nothing

    with ray_engine.store_roots(tiny_suite["stored_dir"], tiny_suite["cache_dir"]):
        assert [n.title for n, _ in ray_engine.missing_runs(["tiny"], "reference", {})] == [
            "LS+, well-regularised, seed 0"
        ]
    assert run_store.STORED_RUNS_DIR == REPO_ROOT / "stored_runs"  # the roots were restored


def test_a_key_the_node_does_not_declare_is_refused_with_the_reason(tiny_suite):
    unknown = ray_engine.RunName("tiny", "reference", (), "0" * 20, "LS, made up")
    with pytest.raises(LookupError, match="does not declare run 0{20}.*same checkout and the same data"):
        ray_engine.train_named_run(unknown, **tiny_suite)


def _outcome(**changes):
    """A task's outcome as train_named_run returns it (its file's bytes are given by the caller)."""
    outcome = {
        "key": "a" * 20,
        "title": "LS",
        "status": "trained",
        "seconds": 1.0,
        "host": "node-b",
        "node": "",
        "pid": 1,
        "training_version": run_store.training_version(),
        "stored": True,
        "file": f"tiny/{'a' * 20}.npz",
        "payload": b"run",
    }
    return outcome | changes


def test_a_run_trained_with_other_training_code_is_not_kept(tmp_path):
    outcome = _outcome(training_version="other")
    with pytest.raises(RuntimeError, match="training version other.*same checkout"):
        ray_engine.keep_run(outcome, training_version="mine", key=outcome["key"])


class _RunsCodeWhenLoaded:
    """A pickled object whose loading calls Path.touch(marker): what a crafted run file can do with a full
    unpickler."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (Path(self.marker),))


def test_a_crafted_cached_run_runs_no_code_when_loaded_and_is_retrained(tmp_path, capsys):
    """Issue 29 (b): the run cache was read with torch.load(weights_only=False), so a crafted file ran code when a
    notebook loaded it. Now it is read with weights_only=True: the file is refused, named, and the run retrained."""
    import torch

    from helpers.losses import CrossEntropy
    from helpers.training import TrainConfig, run_files

    bundle = tiny_bundle()
    config = TrainConfig(epochs=1, batch_size=32, lr=0.05, device="cpu", progress=False)
    first = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config, cache_dir=tmp_path / "cache")
    [path] = list((tmp_path / "cache").glob("*.pt"))
    payload = run_files.read_cached_payload(path)
    marker = tmp_path / "code-ran"
    crafted = payload | {"history": [_RunsCodeWhenLoaded(marker)]}
    run_files.write_sealed(path, lambda file: torch.save(crafted, file))  # a valid content hash: crafted, not damaged
    capsys.readouterr()
    again = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config, cache_dir=tmp_path / "cache")
    assert not marker.exists()
    out = capsys.readouterr().out
    assert again.source == "trained" and path.name in out and "training it again" in out
    assert torch.allclose(again.test_logits, first.test_logits, atol=1e-5)


def test_a_node_payload_is_checked_before_it_is_written(tiny_suite, tmp_path):
    """Issue 29 (b): the Ray driver wrote whatever bytes a node returned into the run cache or the store. Now the
    outcome's structure, the file's name (the run it was asked for), its content hash and its content (read with
    allow_pickle=False / weights_only=True) are checked first; a good one is kept."""
    import torch

    from helpers.training import run_files

    with ray_engine.store_roots(tiny_suite["stored_dir"], tiny_suite["cache_dir"]):
        [(name, _)] = ray_engine.missing_runs(["tiny"], "reference", {})
    good = ray_engine.train_named_run(name, **tiny_suite)
    store = tmp_path / "driver-store"
    marker = tmp_path / "code-ran"
    crafted_pt = tmp_path / "crafted.pt"
    run_files.write_sealed(crafted_pt, lambda file: torch.save({"model": _RunsCodeWhenLoaded(marker)}, file))
    version = run_store.training_version()
    bad = {
        "not a mapping": [good],
        "no payload": {k: v for k, v in good.items() if k != "payload"},
        "payload not bytes": good | {"payload": "text"},
        "stored not a bool": good | {"stored": "yes"},
        "another run's key": good | {"key": "b" * 20},
        "a file name outside the store": good | {"file": "../elsewhere.npz"},
        "a file name of another run": good | {"file": f"tiny/{'b' * 20}.npz"},
        "a data set that is no folder name": good | {"file": f"../{name.key}.npz"},
        "one byte changed": good
        | {"payload": good["payload"][:100] + bytes([good["payload"][100] ^ 1]) + good["payload"][101:]},
        "not a run file": good | {"payload": b"PK\x05\x06" + bytes(18)},
        "a cached run that runs code": good
        | {"stored": False, "file": f"{name.key}-{version}.pt", "payload": crafted_pt.read_bytes()},
    }
    with ray_engine.store_roots(store / "stored", store / "cache"):
        for what, outcome in bad.items():
            with pytest.raises((ValueError, TypeError, run_files.DamagedRunError)):
                ray_engine.keep_run(outcome, version, key=name.key)
            assert not [p for p in store.rglob("*") if p.is_file()], what
        assert not marker.exists()
        assert ray_engine.keep_run(good, version, key=name.key) == "kept"
    assert (store / "stored" / good["file"]).read_bytes() == good["payload"]


def test_ray_options_without_the_ray_engine_are_refused(capsys):
    with pytest.raises(SystemExit):
        train_runs.main(["train", "--address", "auto", "--notebooks", "01"])
    assert "--address only apply with --engine ray" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_runs.main(["train", "--engine", "ray", "--workers", "4", "--notebooks", "01"])
    assert "--workers is the local process pool" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run", "--grid", "seed=0,1", "--notebooks", "00"])
    assert "--grid runs through Ray: add --engine ray" in capsys.readouterr().err


def test_the_ray_engine_without_ray_installed_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(SystemExit, match=r"pip install -e '\.\[scale\]'"):
        ray_engine.require_ray()


def test_retraining_through_ray_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.setenv("CALIBMED_RETRAIN", "1")
    monkeypatch.setattr(ray_engine, "connect", lambda *args: pytest.fail("Ray was started"))
    with pytest.raises(SystemExit, match="does not retrain stored runs"):
        ray_engine.train_declared(["01_measuring_calibration"], "smoke", {})


def test_a_run_the_node_did_not_write_is_reported_with_the_setting_that_stopped_it(tiny_suite, monkeypatch):
    monkeypatch.setattr(suites, "reference_config", lambda notebook, profile, **knobs: tiny_config("smoke"))
    monkeypatch.setenv("CALIBMED_NO_CACHE", "1")
    with ray_engine.store_roots(tiny_suite["stored_dir"], tiny_suite["cache_dir"]):
        [(name, _)] = ray_engine.missing_runs(["tiny"], "smoke", {})
    with pytest.raises(FileNotFoundError, match="unset CALIBMED_NO_CACHE"):
        ray_engine.train_named_run(name, **tiny_suite)


# ------------------------------------------------------------------------------------------------------------
# issue 29, item 4 (c) and the grid's values: everything is checked before an output folder is touched


def _earlier_sweep(out):
    """A sweep folder as an earlier `run --engine ray --grid seed=0,1` left it; returns its files and contents."""
    for point in ("seed=0", "seed=1"):
        for relative in ("notebooks/01_measuring_calibration.ipynb", "results/01_measuring_calibration.json"):
            (out / point / relative).parent.mkdir(parents=True, exist_ok=True)
            (out / point / relative).write_text(f"{point} {relative}")
        (out / point / "summary.json").write_text("{}")
    (out / "summary.md").write_text("# earlier sweep")
    return {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}


def test_a_sweep_without_ray_installed_leaves_the_earlier_sweep_as_it_was(tmp_path, monkeypatch):
    """Issue 29 (c): `run --engine ray --grid ... --out <earlier sweep>` without Ray removed the earlier sweep's
    files and only then said Ray is missing."""
    earlier = _earlier_sweep(tmp_path / "sweep")
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    argv = ["run", "--engine", "ray", "--grid", "seed=0,1", "--notebooks", "01", "--out", str(tmp_path / "sweep")]
    with pytest.raises(SystemExit, match=r"needs Ray.*pip install -e '\.\[scale\]'"):
        cli.main(argv)
    assert {path: path.read_bytes() for path in (tmp_path / "sweep").rglob("*") if path.is_file()} == earlier


@pytest.mark.parametrize(
    "grid, message",
    [
        ("epochs=0,-1", r"epochs=0 \(int\): epochs must be an integer >= 1"),
        ("lr=true", r"lr=True \(bool\): lr must be a number > 0"),
        ("seed=NaN", r"seed=nan \(float\): seed must be an integer >= 0"),
        ("seed=0,0", r"seed=0 twice"),
        ('seed=0,"0"', r"seed='0' \(str\): seed must be an integer >= 0"),
        ("lr=0.1,1e-1", r"lr=0.1 twice"),
    ],
)
def test_grid_values_are_checked_and_two_points_never_share_a_folder(tmp_path, monkeypatch, grid, message):
    """Issue 29, medium: grid values were never checked (epochs=0,-1, lr=true, seed=NaN ran), and seed=0,0 (or
    0,"0", 0.1,1e-1) put two grid points into one folder. Each is refused, naming the knob and the value, before
    Ray starts or an output folder is touched."""
    earlier = _earlier_sweep(tmp_path / "sweep")
    monkeypatch.setattr(ray_engine, "connect", lambda *args: pytest.fail("Ray was started"))
    argv = ["run", "--engine", "ray", "--grid", grid, "--notebooks", "01", "--out", str(tmp_path / "sweep")]
    with pytest.raises(SystemExit, match=message):
        cli.main(argv)
    assert {path: path.read_bytes() for path in (tmp_path / "sweep").rglob("*") if path.is_file()} == earlier


def test_two_grid_points_that_would_share_a_folder_are_refused(tmp_path):
    """The number 0 and the text "0" are two values but one folder name (seed=0): refused, naming both points."""
    with pytest.raises(ValueError, match=r"grid points \[\{'x': 0\}, \{'x': '0'\}\] would write into one folder x=0"):
        ray_engine.point_folders(tmp_path, ray_engine.grid_points(ray_engine.parse_grid(['x=0,"0"'])))
    assert [f.name for f in ray_engine.point_folders(tmp_path, [{"x": 0}, {"x": 1}])] == ["x=0", "x=1"]


def test_a_json_list_in_a_grid_is_one_value_not_split_at_its_commas():
    """Issue 29, medium: `--grid seeds=[0,1],[2]` was split at every comma into "[0", "1]" and "[2]"."""
    assert ray_engine.parse_grid(["seeds=[0,1],[2]", "dataset=dermamnist"]) == {
        "seeds": [[0, 1], [2]],
        "dataset": ["dermamnist"],
    }
    assert ray_engine.parse_grid(['losses=["LS","focal"],["MbLS"]'])["losses"] == [["LS", "focal"], ["MbLS"]]
    assert ray_engine.point_folder({"seeds": [0, 1]}) == "seeds=[0,1]"
    with pytest.raises(ValueError, match="unbalanced"):
        ray_engine.parse_grid(["seeds=[0,1"])
