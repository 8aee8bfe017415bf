"""Knob values are checked centrally (helpers.course.knobs through course.configure): a clear error naming the knob, the
value and what is allowed (issue 18, defect 2)."""

import pytest

from helpers import course
from helpers.course import cli, knobs

PROFILES = {
    name: dict(
        dataset="dermamnist",
        image_size=28,
        model="small_cnn",
        epochs=1,
        batch_size=8,
        lr=0.1,
        alpha=0.1,
        n_things=3,
        scale=0.5,
        names=["a"],
    )
    for name in course.PROFILE_NAMES
}


def test_notebook_00_refuses_a_negative_timing_images():
    """Defect 2: notebook 00 with timing_images=-5 ran "ok" and printed a negative time estimate."""
    profiles = course.notebook_profiles("00_start_here")
    with pytest.raises(
        ValueError,
        match=r"(?s)00_start_here.*timing_images=-5 \(int\): timing_images must be an "
        r"integer >= 1",
    ):
        course.configure("00_start_here", profiles, profile="smoke", timing_images=-5)
    assert course.configure("00_start_here", profiles, profile="smoke", timing_images=64).timing_images == 64


def test_lr_true_is_refused_not_read_as_one():
    """Defect 2: lr=True passed as a rate of 1.0."""
    with pytest.raises(ValueError, match=r"lr=True \(bool\): lr must be a number > 0"):
        course.configure("99_test", PROFILES, profile="smoke", lr=True)


def test_lr_as_text_is_refused_naming_the_knob():
    """Defect 2: lr="0.1" failed deep inside training with "can't multiply sequence by non-int of type 'float'"."""
    with pytest.raises(ValueError, match=r"(?s)lr='0\.1' \(str\): lr must be a number > 0.*-p lr 0\.05"):
        course.configure("99_test", PROFILES, profile="smoke", lr="0.1")


@pytest.mark.parametrize(
    "name, value, allowed",
    [
        ("epochs", 0, "an integer >= 1"),
        ("epochs", 2.5, "an integer >= 1"),
        ("batch_size", -1, "an integer >= 1"),
        ("seed", -1, "an integer >= 0"),
        ("seed", True, "an integer >= 0"),
        ("lr", float("nan"), "a number > 0"),
        ("lr", 0, "a number > 0"),
        ("alpha", 1.5, r"a number >= 0 and <= 1"),
        ("max_train", 0, "an integer >= 1"),
        ("image_size", "28", "an integer >= 8"),
        ("dataset", "", "non-empty text"),
        ("model", 3, "non-empty text"),
        ("n_things", "3", "an integer"),
        ("n_things", 2.0, "an integer"),
        ("scale", "big", "a number"),
        ("names", "a", "a list"),
    ],
)
def test_a_knob_value_of_the_wrong_type_or_range_is_refused_naming_knob_value_and_rule(name, value, allowed):
    with pytest.raises(ValueError, match=rf"99_test: knob value.*\n  {name}=.* {name} must be {allowed}"):
        course.configure("99_test", PROFILES, profile="smoke", **{name: value})


def test_allowed_values_pass_and_every_bad_knob_is_listed_at_once():
    cfg = course.configure("99_test", PROFILES, profile="smoke", lr=1, scale=2, n_things=7, alpha=0.0, seed=0)
    assert (cfg.lr, cfg.scale, cfg.n_things, cfg.alpha) == (1, 2, 7, 0.0)
    with pytest.raises(ValueError) as raised:
        course.configure("99_test", PROFILES, profile="smoke", epochs=-1, lr="x")
    assert "epochs=-1" in str(raised.value) and "lr='x'" in str(raised.value)


def test_a_bad_value_in_a_profiles_table_is_refused_too():
    broken = {name: dict(values, batch_size=0) for name, values in PROFILES.items()}
    with pytest.raises(ValueError, match=r"batch_size=0 \(int\)"):
        course.configure("99_test", broken, profile="quick")


@pytest.mark.parametrize("notebook", [path.stem for path in course.list_notebooks()])
def test_every_profile_of_every_notebook_keeps_the_knob_rules(notebook):
    profiles = course.notebook_profiles(notebook)
    for name, values in profiles.items():
        assert knobs.problems(values, profiles) == [], (notebook, name)


def test_every_knob_of_every_notebook_has_a_rule():
    """A knob without a rule would be unchecked: each is in RULES or gets its type from the PROFILES table."""
    unchecked = [
        (path.stem, name)
        for path in course.list_notebooks()
        for name in course.notebook_parameters(path)
        if name != "profile" and knobs.rule_for(name, course.notebook_profiles(path.stem)) is None
    ]
    assert unchecked == []


def test_course_run_refuses_a_bad_knob_value_before_anything_runs(tmp_path, monkeypatch):
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a notebook was executed"))
    with pytest.raises(SystemExit, match=r"timing_images=-5 \(int\): timing_images must be an integer >= 1"):
        cli.main(["run", "--notebooks", "00", "--out", str(tmp_path / "run"), "-p", "timing_images", "-5"])
    assert not (tmp_path / "run").exists()
