"""Recipes and the run cache: a cached run must reproduce the trained one, and any change must miss the cache."""

import errno
import json
import os

import numpy as np
import pytest
import torch
from tiny_bundles import three_class_bundle

from helpers.data import Split
from helpers.losses import CrossEntropy, LabelSmoothing
from helpers.training import recipes, run_files, run_keys, run_store


def tiny_bundle(seed=0, n=96):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    images = torch.randint(0, 60, (n, 1, 8, 8), generator=generator, dtype=torch.uint8)
    images[:, :, :4] += (labels * 60).to(torch.uint8).view(-1, 1, 1, 1)  # a learnable class signal
    split = Split(images, labels)
    return three_class_bundle(split)


def config(**overrides):
    settings = dict(epochs=2, lr=0.05, batch_size=32, device="cpu", progress=False) | overrides
    return recipes.recipe_config("well-regularised", **settings)


def test_recipes_differ_where_the_course_says():
    regularised = recipes.recipe_config("well-regularised", epochs=3, lr=0.1, batch_size=64)
    overfitting = recipes.recipe_config("over-fitting", epochs=3, lr=0.1, batch_size=64)
    assert (regularised.weight_decay, regularised.augment, regularised.schedule) == (5e-4, True, "onecycle")
    assert (overfitting.weight_decay, overfitting.augment, overfitting.schedule) == (0.0, False, "constant")
    assert overfitting.lr == pytest.approx(0.05) and overfitting.monitor == "epoch"  # keeps the last epoch
    with pytest.raises(ValueError, match="unknown recipe"):
        recipes.recipe_config("long", epochs=1, lr=0.1, batch_size=8)


def test_cached_run_reproduces_the_trained_run(tmp_path):
    bundle = tiny_bundle()
    trained = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    loaded = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    assert not trained.from_cache and loaded.from_cache and trained.key == loaded.key
    assert torch.equal(trained.test_logits, loaded.test_logits)
    assert loaded.history == trained.history
    # the reloaded weights give the stored logits
    from helpers.training import predict_logits

    assert torch.allclose(predict_logits(loaded.model, bundle.test.images), loaded.test_logits, atol=1e-5)
    assert torch.allclose(loaded.test_probs.sum(1), torch.ones(len(bundle.test.labels)))


def test_any_change_of_loss_config_or_data_changes_the_key():
    bundle = tiny_bundle()
    base = run_store.run_key(bundle, "small_cnn", CrossEntropy(), config())
    assert base == run_store.run_key(bundle, "small_cnn", CrossEntropy(), config())
    assert base != run_store.run_key(bundle, "small_cnn", LabelSmoothing(0.1), config())
    assert run_store.run_key(bundle, "small_cnn", LabelSmoothing(0.1), config()) != run_store.run_key(
        bundle, "small_cnn", LabelSmoothing(0.2), config()
    )
    assert base != run_store.run_key(bundle, "small_cnn", CrossEntropy(), config(epochs=3))
    assert base != run_store.run_key(bundle, "resnet18", CrossEntropy(), config())
    assert base != run_store.run_key(tiny_bundle(seed=1), "small_cnn", CrossEntropy(), config())


def test_the_key_follows_the_data_content_not_where_the_data_lives_nor_the_code(monkeypatch, tmp_path):
    bundle = tiny_bundle()
    base = run_store.run_key(bundle, "small_cnn", CrossEntropy(), config())
    moved = tiny_bundle()
    moved.source = "/somewhere/else/tiny.npz"
    assert run_store.run_key(moved, "small_cnn", CrossEntropy(), config()) == base
    assert run_store.run_key(bundle, "small_cnn", CrossEntropy(), config(device="cuda", progress=True)) == base
    monkeypatch.setattr(run_store, "training_version", lambda: "edited-code")
    assert run_store.run_key(bundle, "small_cnn", CrossEntropy(), config()) == base
    # ... but the local cache is per training version: a change of behaviour retrains
    run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    monkeypatch.setattr(run_store, "training_version", lambda: "edited-again")
    assert not run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path).from_cache


def other_test_split(bundle, seed=5):
    from dataclasses import replace

    other = tiny_bundle(seed=seed)
    return replace(bundle, test=Split(other.test.images, other.test.labels))


def test_a_cached_run_never_serves_old_test_logits_when_only_the_test_split_changes(tmp_path):
    """Issue 10, defect 1: the key covered train and validation only, so another test split got stale logits."""
    from helpers.training import predict_logits

    bundle = tiny_bundle()
    first = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    changed = other_test_split(bundle)
    again = run_store.train_run("ce", CrossEntropy(), changed, "small_cnn", config(), cache_dir=tmp_path)
    assert again.key != first.key
    assert torch.allclose(again.test_logits, predict_logits(again.model, changed.test.images), atol=1e-5)


@pytest.mark.parametrize("damage", ["truncate", "empty", "nan_logits", "wrong_shape"])
def test_a_damaged_cache_entry_is_named_and_retrained(tmp_path, capsys, damage):
    """Issue 10, defect 6: a truncated or empty entry raised a bare torch error for good; bad logits loaded."""
    bundle = tiny_bundle()
    trained = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    [path] = list(tmp_path.glob("*.pt"))
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        payload = run_files.read_cached_payload(path)
        payload["test_logits"] = (
            payload["test_logits"] * float("nan") if damage == "nan_logits" else payload["test_logits"][:, :2]
        )
        run_files.write_cached_payload(path, payload)  # sealed: the checks behind the content hash are tested
    capsys.readouterr()
    again = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    out = capsys.readouterr().out
    assert path.name in out and "training it again" in out and not again.from_cache
    assert torch.allclose(again.test_logits, trained.test_logits, atol=1e-5)  # seeded: the same run again


@pytest.mark.parametrize(
    "damage",
    [
        "no_val_logits",
        "a_bare_tensor",
        "a_list",
        "no_seconds",
        "seconds_a_string",
        "no_model_state",
        "history_not_a_list",
    ],
)
def test_a_cached_run_with_missing_or_wrong_entries_is_named_and_retrained(tmp_path, capsys, damage):
    """Issue 18, defect 5: a cached .pt without val_logits raised KeyError, a bare tensor IndexError."""
    bundle = tiny_bundle()
    trained = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    [path] = list(tmp_path.glob("*.pt"))
    payload = run_files.read_cached_payload(path)
    damaged = {
        "no_val_logits": {k: v for k, v in payload.items() if k != "val_logits"},
        "a_bare_tensor": payload["test_logits"],
        "a_list": [payload],
        "no_seconds": {k: v for k, v in payload.items() if k != "seconds"},
        "seconds_a_string": payload | {"seconds": "12"},
        "no_model_state": {k: v for k, v in payload.items() if k != "model"},
        "history_not_a_list": payload | {"history": "none"},
    }[damage]
    run_files.write_sealed(path, lambda file: torch.save(damaged, file))  # sealed: the field checks are tested
    capsys.readouterr()
    again = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    out = capsys.readouterr().out
    assert path.name in out and "training it again" in out and again.source == "trained"
    assert torch.allclose(again.test_logits, trained.test_logits, atol=1e-5)
    assert run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path).from_cache


def _rewrite_stored_meta(path, change):
    import json

    import numpy as np

    with np.load(path) as stored:
        arrays = dict(stored)
    meta = change(json.loads(arrays["meta"].tobytes()))
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    run_files.write_sealed(path, lambda file: np.savez_compressed(file, **arrays))  # the field checks are tested


@pytest.mark.parametrize(
    "damage", ["no_seconds", "a_list", "seconds_a_string", "no_name", "history_not_a_list", "no_loss_state"]
)
def test_stored_run_metadata_that_is_missing_or_wrong_is_named_and_retrained(tmp_path, capsys, damage):
    """Issue 18, defect 5: stored metadata without `seconds` raised KeyError, a list AttributeError, `seconds` a
    string ValueError."""
    bundle = tiny_bundle()
    first = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    path = run_store.stored_run_path(bundle, first.key, tmp_path)
    if damage == "no_loss_state":
        import numpy as np

        with np.load(path) as stored:
            arrays = {k: v for k, v in stored.items() if k != "loss_state"}
        run_files.write_sealed(path, lambda file: np.savez_compressed(file, **arrays))
    else:
        _rewrite_stored_meta(
            path,
            {
                "no_seconds": lambda m: {k: v for k, v in m.items() if k != "seconds"},
                "a_list": lambda m: [m],
                "seconds_a_string": lambda m: m | {"seconds": "fast"},
                "no_name": lambda m: {k: v for k, v in m.items() if k != "name"},
                "history_not_a_list": lambda m: m | {"history": 3},
            }[damage],
        )
    capsys.readouterr()
    again = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    out = capsys.readouterr().out
    assert str(path) in out and "training it again" in out and again.source == "trained"
    assert (
        run_store.train_run(
            "ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path
        ).source
        == "stored"
    )  # the retrained run was stored again


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which folders were already reported as unwritable in this process."""
    monkeypatch.setattr(run_store, "_unwritable_reported", set())


def test_cache_writes_are_atomic(tmp_path, monkeypatch, fresh_warnings):
    """A failed write leaves neither a partial entry nor a temporary file behind (and the run is still returned)."""
    bundle = tiny_bundle()

    def failing_save(obj, file, *args, **kwargs):
        file.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_store.torch, "save", failing_save)
    with pytest.warns(run_store.RunNotSavedWarning, match="No space left"):
        run = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    assert run.source == "trained" and run.test_logits.shape == (96, 3)
    assert list(tmp_path.iterdir()) == []


def _refuse_writes(monkeypatch, error_number: int) -> None:
    def refuse(path, write):
        raise OSError(error_number, os.strerror(error_number), str(path))

    monkeypatch.setattr(run_files.atomic, "write_atomically_with", refuse)  # every run file is written there


@pytest.mark.parametrize("error_number", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_train_run_returns_the_run_when_the_cache_is_read_only(tmp_path, monkeypatch, fresh_warnings, error_number):
    """Issue 18, defect 1: a read-only or full cache folder discarded the trained run with a bare OSError."""
    _refuse_writes(monkeypatch, error_number)
    bundle = tiny_bundle()
    with pytest.warns(run_store.RunNotSavedWarning) as caught:
        run = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
        second = run_store.train_run("ls", LabelSmoothing(0.1), bundle, "small_cnn", config(), cache_dir=tmp_path)
    assert run.source == second.source == "trained" and run.model is not None
    assert torch.isfinite(run.test_logits).all() and run.test_logits.shape == (96, 3)
    [warning] = caught  # once per folder, not once per run
    message = str(warning.message)
    assert os.strerror(error_number) in message and "CALIBMED_CACHE_DIR" in message and "CALIBMED_NO_CACHE" in message


def test_train_run_returns_the_run_when_the_stored_runs_folder_is_read_only(tmp_path, monkeypatch, fresh_warnings):
    _refuse_writes(monkeypatch, errno.EROFS)
    with pytest.warns(run_store.RunNotSavedWarning, match="stored_dir"):
        run = run_store.train_run(
            "ce", CrossEntropy(), tiny_bundle(), "small_cnn", config(), stored=True, stored_dir=tmp_path
        )
    assert run.source == "trained" and run.test_logits.shape == (96, 3)


@pytest.mark.parametrize("stored", [False, True])
def test_a_cache_file_path_that_is_a_folder_is_named_before_training(tmp_path, monkeypatch, capsys, stored):
    """Issue 18, defect 1: a folder in the cache file's place was 'damaged', retrained, then IsADirectoryError."""
    bundle = tiny_bundle()
    key = run_store.run_key(bundle, "small_cnn", CrossEntropy(), config())
    folder = (
        run_store.stored_run_path(bundle, key, tmp_path)
        if stored
        else tmp_path / f"{key}-{run_store.training_version()}.pt"
    )
    (folder / "inside").mkdir(parents=True)
    monkeypatch.setattr(run_store.train, "fit", lambda *a, **k: pytest.fail("trained before checking the path"))
    with pytest.raises(IsADirectoryError, match=rf"{folder.name} is a folder.*remove it"):
        run_store.train_run(
            "ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path, stored=stored, stored_dir=tmp_path
        )
    assert "training it again" not in capsys.readouterr().out  # a folder is not a damaged run file


def test_the_cache_folder_can_be_moved_by_an_environment_variable(tmp_path, monkeypatch):
    """Issue 18, defect 1: the cache was fixed at <repo>/runs/cache, so a read-only checkout could not cache."""
    monkeypatch.setenv("CALIBMED_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert run_store.default_cache_dir() == tmp_path / "elsewhere"
    run = run_store.train_run("ce", CrossEntropy(), tiny_bundle(), "small_cnn", config())
    assert [p.name for p in (tmp_path / "elsewhere").iterdir()] == [f"{run.key}-{run_store.training_version()}.pt"]
    assert run_store.train_run("ce", CrossEntropy(), tiny_bundle(), "small_cnn", config()).source == "cache"
    monkeypatch.delenv("CALIBMED_CACHE_DIR")
    assert run_store.default_cache_dir() == run_store.CACHE_DIR


def test_stored_run_round_trip_without_weights(tmp_path, capsys):
    from helpers.losses import CCLNetLoss

    bundle = tiny_bundle()
    torch.manual_seed(0)
    trained = run_store.train_run(
        "ccl",
        CCLNetLoss(feature_dim=128, num_classes=3),
        bundle,
        "small_cnn",
        config(),
        stored=True,
        stored_dir=tmp_path,
    )
    [path] = list((tmp_path / "tiny").glob("*.npz"))
    assert path.stem == trained.key and trained.source == "trained"
    torch.manual_seed(0)
    loaded = run_store.train_run(
        "ccl",
        CCLNetLoss(feature_dim=128, num_classes=3),
        bundle,
        "small_cnn",
        config(),
        stored=True,
        stored_dir=tmp_path,
    )
    assert loaded.source == "stored" and loaded.model is None
    assert torch.equal(loaded.test_logits, trained.test_logits) and torch.equal(loaded.val_logits, trained.val_logits)
    assert [r["epoch"] for r in loaded.history] == [r["epoch"] for r in trained.history]
    assert loaded.history[-1]["val_nll"] == pytest.approx(trained.history[-1]["val_nll"])
    assert torch.equal(loaded.loss.head.dictionary, trained.loss.head.dictionary)
    assert loaded.loss.epoch_log == trained.loss.epoch_log
    assert "stored run tiny/" not in capsys.readouterr().out  # quiet: the notebook prints one provenance line
    assert run_store.run_log.session_records()[-1].source == "stored"
    meta = run_store.load_stored_run(path, bundle, CCLNetLoss(feature_dim=128, num_classes=3), trained.key)[0]
    assert meta["training_version"] == run_store.training_version()
    assert meta["deterministic"] is True and meta["torch"] == torch.__version__ and meta["device_name"]
    assert {"cuda", "cudnn"} <= meta.keys()
    assert meta["definition"]["split_sizes"] == {"train": 96, "val": 96, "test": 96}


def test_a_stored_run_from_older_code_is_loaded_quietly_and_named_in_the_provenance_line(tmp_path, capsys, monkeypatch):
    """Issue 28, item 3: the main flow prints no warning line; the provenance line says how many runs come from older
    training code and the folded details (helpers.course.details) give the warning with the retrain command."""
    bundle = tiny_bundle()
    run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    monkeypatch.setattr(run_store, "training_version", lambda: "newer-code")
    monkeypatch.setattr(run_store.run_log, "_session", [])
    capsys.readouterr()
    for _ in range(2):
        loaded = run_store.train_run(
            "ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path
        )
    assert loaded.source == "stored" and capsys.readouterr().out == ""
    records = run_store.run_log.session_records()
    assert [record.current for record in records] == [False, False]
    assert run_store.run_log.provenance_line(records, "x").endswith(" · 2 of 2 from older training code")


def test_a_stored_run_for_other_test_images_or_a_damaged_file_is_not_served(tmp_path, capsys, monkeypatch):
    bundle = tiny_bundle()
    first = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    other = run_store.train_run(
        "ce", CrossEntropy(), other_test_split(bundle), "small_cnn", config(), stored=True, stored_dir=tmp_path
    )
    assert other.source == "trained" and other.key != first.key
    path = run_store.stored_run_path(bundle, first.key, tmp_path)
    path.write_bytes(path.read_bytes()[:200])
    capsys.readouterr()
    again = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    assert again.source == "trained" and str(path) in capsys.readouterr().out


def test_retrain_replaces_stored_runs_of_older_code_and_keeps_current_ones(tmp_path, monkeypatch):
    """CALIBMED_RETRAIN=1 (make reference-runs RETRAIN=1) retrained every stored run in every planning round of
    helpers.course.suites.train_declared, so the command never ended; now it retrains the runs whose training version is
    not today's, so it ends, and an interrupted retrain resumes where it stopped."""
    bundle = tiny_bundle()
    monkeypatch.setattr(run_store, "training_version", lambda: "older-code")
    run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    monkeypatch.setattr(run_store, "training_version", lambda: "today")
    monkeypatch.setenv("CALIBMED_RETRAIN", "1")
    with run_store.planning() as plan:
        run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    assert len(plan) == 1  # planned: its stored run is older code
    retrained = run_store.train_run(
        "ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path
    )
    assert retrained.source == "trained"
    path = run_store.stored_run_path(bundle, retrained.key, tmp_path)
    assert run_store.load_stored_run(path, bundle, CrossEntropy(), retrained.key)[0]["training_version"] == "today"
    with run_store.planning() as plan:
        again = run_store.train_run(
            "ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path
        )
    assert plan == [] and again.source == "stored"


def test_cache_can_be_disabled(tmp_path, monkeypatch):
    bundle = tiny_bundle()
    run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    monkeypatch.setenv("CALIBMED_NO_CACHE", "1")
    again = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    assert not again.from_cache


def test_ccl_net_loss_with_non_tensor_extra_state_has_a_key():
    from helpers.losses import CCLNetLoss

    bundle = tiny_bundle()
    torch.manual_seed(0)
    slow = run_store.run_key(bundle, "small_cnn", CCLNetLoss(feature_dim=128, num_classes=3), config())
    torch.manual_seed(0)
    same = run_store.run_key(bundle, "small_cnn", CCLNetLoss(feature_dim=128, num_classes=3), config())
    torch.manual_seed(0)
    fast = run_store.run_key(bundle, "small_cnn", CCLNetLoss(feature_dim=128, num_classes=3, lr_ccl=5e-2), config())
    assert slow == same and slow != fast


def test_ccl_net_run_round_trips_through_the_cache(tmp_path):
    """CCL-Net's non-tensor state (optimiser, freeze rule, epoch log) is stored with the run and restored."""
    from helpers.losses import CCLNetLoss

    bundle = tiny_bundle()
    torch.manual_seed(0)
    trained = run_store.train_run(
        "ccl", CCLNetLoss(feature_dim=128, num_classes=3), bundle, "small_cnn", config(), cache_dir=tmp_path
    )
    torch.manual_seed(0)
    loaded = run_store.train_run(
        "ccl", CCLNetLoss(feature_dim=128, num_classes=3), bundle, "small_cnn", config(), cache_dir=tmp_path
    )
    assert loaded.from_cache and not trained.from_cache
    assert loaded.loss.epoch_log == trained.loss.epoch_log and len(loaded.loss.epoch_log) == 2
    assert torch.equal(loaded.loss.head.dictionary, trained.loss.head.dictionary)
    assert loaded.loss.optimizer.state_dict()["state"].keys() == trained.loss.optimizer.state_dict()["state"].keys()
    assert torch.equal(loaded.test_logits, trained.test_logits)


def test_the_loss_fingerprint_does_not_depend_on_how_pytorch_prints_its_own_layers(monkeypatch):
    """Keys computed with another PyTorch version must match: BatchNorm1d's printed form gained ``bias=True``."""
    from helpers.losses import DCA, CCLNetLoss

    torch.manual_seed(0)
    loss = CCLNetLoss(feature_dim=16, num_classes=3)
    before = run_keys._loss_fingerprint(loss)
    monkeypatch.setattr(torch.nn.BatchNorm1d, "extra_repr", lambda self: "printed differently")
    assert run_keys._loss_fingerprint(loss) == before
    assert run_keys._stable_repr(DCA(beta=2.0)) == repr(DCA(beta=2.0))  # the course's own losses print as usual
    assert run_keys._stable_repr(LabelSmoothing(0.1)) != run_keys._stable_repr(LabelSmoothing(0.2))


def test_a_cache_dir_that_is_a_file_fails_before_training(tmp_path, monkeypatch):
    """Issue 10, defect 13: a cache_dir that is a file failed only after training."""
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    monkeypatch.setattr(run_store.train, "fit", lambda *a, **k: pytest.fail("trained before checking the folder"))
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        run_store.train_run("ce", CrossEntropy(), tiny_bundle(), "small_cnn", config(), cache_dir=blocker)
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        run_store.train_run("ce", CrossEntropy(), tiny_bundle(), "small_cnn", config(), stored=True, stored_dir=blocker)


def test_stored_run_line_keeps_within_the_notebook_line_limit():
    """The multi-label runs' names and data set names made this line 121-150 characters (notebook 11's outputs);
    a long line is split before the parenthesis, a short one stays whole, and "stored run" is never split."""
    from helpers.course import output_rules

    meta = {"device": "cuda:0", "seconds": 88.4}
    where = "synthetic_chestmnist_independent/" + "0123456789abcdef0123"
    long_line = run_store._stored_run_line("SPA+LPR, synthetic_chestmnist_independent, seed 0", where, meta)
    lines = long_line.splitlines()
    assert len(lines) == 2 and max(len(line) for line in lines) <= output_rules.MAX_LINE
    assert "stored run synthetic_chestmnist_independent/" in lines[0] and lines[1] == "  (trained on cuda:0 in 88 s)"
    assert run_store._stored_run_line("BCE", "tiny/abc", meta) == "BCE: stored run tiny/abc (trained on cuda:0 in 88 s)"
    named = run_store._stored_run_line("BCE", "tiny/abc", meta | {"device_name": "NVIDIA H100 80GB HBM3"})
    assert named == "BCE: stored run tiny/abc (trained on NVIDIA H100 80GB HBM3 in 88 s)"


def test_a_retrain_selector_retrains_only_the_runs_it_names(tmp_path, monkeypatch):
    """make reference-runs RETRAIN=1 ONLY="recipe=…" retrains the older runs of one recipe (the CPU tracks) and
    loads the older runs of the other (the GPU-only over-fitting set) as they are."""
    bundle = tiny_bundle()
    over = dict(epochs=2, lr=0.05, batch_size=32, device="cpu", progress=False)
    overfit_config = recipes.recipe_config("over-fitting", **over)
    monkeypatch.setattr(run_store, "training_version", lambda: "older-code")
    for cfg in (config(), overfit_config):
        run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", cfg, stored=True, stored_dir=tmp_path)
    monkeypatch.setattr(run_store, "training_version", lambda: "today")
    monkeypatch.setenv("CALIBMED_RETRAIN", "1")
    monkeypatch.setenv("CALIBMED_RETRAIN_ONLY", "recipe=well-regularised")
    with run_store.planning() as plan:
        for cfg in (config(), overfit_config):
            run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", cfg, stored=True, stored_dir=tmp_path)
    assert [recipes.config_recipe(p.config) for p in plan] == ["well-regularised"]
    assert recipes.config_recipe(config(augment=False)) == "well-regularised"  # the synthetic sets' setting
    monkeypatch.setenv("CALIBMED_RETRAIN_ONLY", f"dataset={bundle.name}-other")
    with run_store.planning() as plan:
        run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    assert plan == []


@pytest.mark.parametrize("text", ["recipe", "recipe=", "colour=red", "recipe=overfitting"])
def test_a_wrong_retrain_selector_is_named(text):
    with pytest.raises(ValueError, match="CALIBMED_RETRAIN_ONLY"):
        recipes.parse_retrain_selector(text)


# ------------------------------------------------------------------------------------------------------------
# issue 29, item 4 (a): a byte flipped in a cached or stored run file is never served


def _flipped(original: bytes, rng) -> tuple[int, bytes]:
    data = bytearray(original)
    where = rng.randrange(len(data))
    data[where] ^= rng.randrange(1, 256)  # a different byte
    return where, bytes(data)


@pytest.mark.parametrize("stored", [False, True], ids=["cached run", "stored run"])
def test_no_run_file_with_one_byte_flipped_is_served_each_is_named_and_retrained(tmp_path, capsys, stored):
    """Issue 29 (a): one byte flipped in runs/cache/*.pt loaded as "cache" with changed logits or weights in 59 of
    60 trials. Now every run file this code writes carries a SHA-256 of its own bytes: 60 seeded single-byte flips
    of a small cached run and of a small stored run are all refused, named, and planned for retraining; the last
    one is retrained and loads again."""
    import contextlib
    import random

    bundle = tiny_bundle()

    def run(plan_only=True):
        with run_store.planning() if plan_only else contextlib.nullcontext():
            return run_store.train_run(
                "ce",
                CrossEntropy(),
                bundle,
                "small_cnn",
                config(),
                cache_dir=tmp_path,
                stored=stored,
                stored_dir=tmp_path,
            )

    first = run(plan_only=False)
    [path] = list(tmp_path.rglob("*.npz" if stored else "*.pt"))
    original = path.read_bytes()
    assert run().source == ("stored" if stored else "cache")  # the intact file is served
    rng = random.Random(29)
    served = []
    for _ in range(60):
        where, damaged = _flipped(original, rng)
        path.write_bytes(damaged)
        capsys.readouterr()
        again = run()
        out = capsys.readouterr().out
        if again.source != "planned" or str(path.name) not in out or "training it again" not in out:
            served.append((where, again.source, out[-200:]))
    assert served == []
    retrained = run(plan_only=False)
    assert retrained.source == "trained" and torch.allclose(retrained.test_logits, first.test_logits, atol=1e-5)
    assert run().source == ("stored" if stored else "cache") and path.read_bytes() != damaged


def _legacy_stored_run(path):
    """Rewrite a stored run as the code before issue 29 wrote it: no integrity seal, no mark in its metadata."""
    import json

    import numpy as np

    with np.load(path) as stored:
        arrays = dict(stored)
    meta = json.loads(arrays["meta"].tobytes())
    meta.pop("integrity", None)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez_compressed(path, **arrays)


def test_a_stored_run_without_a_content_hash_still_loads_and_new_writes_carry_one(tmp_path):
    """The 201 committed stored runs have no content hash: they are verified by the existing checks and keep
    loading; a run stored now carries the hash (the zip comment) and its metadata says so."""
    import zipfile

    bundle = tiny_bundle()
    first = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    path = run_store.stored_run_path(bundle, first.key, tmp_path)
    assert zipfile.ZipFile(path).comment.startswith(b"calibmed-sha256:")
    assert run_store.read_stored_meta(path)["integrity"] == "sha256 of the file in its zip comment"
    _legacy_stored_run(path)
    assert zipfile.ZipFile(path).comment == b""
    loaded = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    assert loaded.source == "stored" and torch.equal(loaded.test_logits, first.test_logits)


def test_every_committed_stored_run_still_reads():
    """The committed stored runs are not rewritten, and each still passes the checks (no content hash needed)."""
    paths = sorted(run_store.STORED_RUNS_DIR.glob("*/*.npz"))
    assert len(paths) >= 201
    for path in paths:
        meta = run_store.read_stored_meta(path)
        assert meta["key"] == path.stem


@pytest.mark.parametrize("sealed", [False, True], ids=["stored before the hash", "stored with the hash"])
@pytest.mark.parametrize("damage", ["loss_state of another loss", "loss_state not a mapping", "deflate data"])
def test_a_damaged_loss_state_or_deflate_stream_is_a_named_damaged_run_that_is_retrained(
    tmp_path, capsys, damage, sealed
):
    """Issue 29, medium: a stored run whose loss_state did not fit the loss raised a raw RuntimeError, and corrupt
    deflate data a zlib.error, naming no file and retraining nothing."""
    import io
    import random
    import zipfile

    import numpy as np

    bundle = tiny_bundle()
    first = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    path = run_store.stored_run_path(bundle, first.key, tmp_path)
    if damage == "deflate data":
        if not sealed:
            _legacy_stored_run(path)
        original = path.read_bytes()
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("val_logits.npy")
        start = info.header_offset + 30 + len(info.filename) + len(info.extra)
        rng = random.Random(0)
        trials = [start + rng.randrange(info.compress_size) for _ in range(20)]
    else:
        state = {"unexpected.weight": torch.ones(2)} if damage == "loss_state of another loss" else [1, 2]
        buffer = io.BytesIO()
        torch.save(state, buffer)
        with np.load(path) as stored:
            arrays = dict(stored)
        arrays["loss_state"] = np.frombuffer(buffer.getvalue(), dtype=np.uint8)
        if sealed:
            run_files.write_sealed(path, lambda file: np.savez_compressed(file, **arrays))
        else:
            np.savez_compressed(path, **arrays)
            _legacy_stored_run(path)
        original, trials = path.read_bytes(), [None]
    for where in trials:
        data = bytearray(original)
        if where is not None:
            data[where] ^= 0x55
        path.write_bytes(bytes(data))
        with pytest.raises(run_store.DamagedRunError, match=str(path)):
            run_store.load_stored_run(path, bundle, CrossEntropy(), first.key)
        capsys.readouterr()
        with run_store.planning() as plan:
            run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
        assert len(plan) == 1 and "training it again" in capsys.readouterr().out


@pytest.mark.parametrize(
    "lr, message",
    [(True, "lr must be a finite real number, got True"), ("0.1", "lr must be a finite real number, got '0.1'")],
)
def test_a_recipe_refuses_a_learning_rate_that_is_not_a_number(lr, message):
    """Issue 29, medium: recipe_config(lr=True) trained at rate 1.0 (True × the recipe's scale passed the check
    as 1.0), and lr="0.1" failed deep inside with a TypeError."""
    for recipe in recipes.RECIPES:
        with pytest.raises(ValueError, match=message):
            recipes.recipe_config(recipe, epochs=1, lr=lr, batch_size=8)
    assert recipes.recipe_config("over-fitting", epochs=1, lr=0.1, batch_size=8).lr == pytest.approx(0.05)


def _rewrite_meta(path, change):
    with np.load(path, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    meta = json.loads(arrays["meta"].tobytes())
    meta.pop("integrity", None)  # rewritten by hand, as the runs stored before the content hash were
    change(meta)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez_compressed(path, **arrays)


def test_a_run_whose_behaviour_was_verified_is_current_but_still_retrained_where_it_is_not_reproducible(
    tmp_path, capsys, monkeypatch
):
    """The over-fitting set predates the training version; today's probe on the code that trained it gives today's
    version, recorded as ``behaviour_verified``: no stale-run warning, yet ``RETRAIN=1`` (on a GPU) still retrains
    it deterministically, since it was trained with autotuned kernels."""
    bundle = tiny_bundle()
    first = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    path = run_store.stored_run_path(bundle, first.key, tmp_path)

    def as_old_gpu_run(meta):
        del meta["training_version"]
        meta["deterministic"] = False
        meta["behaviour_verified"] = {"training_version": run_store.training_version(), "how": "probe"}

    _rewrite_meta(path, as_old_gpu_run)
    meta = run_store.read_stored_meta(path)
    assert run_store.is_current(meta) and not run_store.is_reproducible_here(meta)
    monkeypatch.setattr(run_store.run_log, "_warned_stale", False)
    capsys.readouterr()
    loaded = run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    assert loaded.source == "stored" and "older training code" not in capsys.readouterr().out
    monkeypatch.setenv("CALIBMED_RETRAIN", "1")
    with run_store.planning() as plan:
        run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    assert len(plan) == 1
    _rewrite_meta(path, lambda meta: meta["behaviour_verified"].update(training_version="other"))
    assert not run_store.is_current(run_store.read_stored_meta(path))
