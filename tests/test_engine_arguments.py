"""Issue 29, low-severity defects of the command lines: a GPU share that is not a finite number >= 0, a CPU count
below 1, a Ray option without ``--engine ray`` and a parameter given both by ``-p`` and ``--grid`` stop at once with
a message naming the argument (argparse's usage error), before any notebook, run or Ray cluster is touched."""

from __future__ import annotations

import pytest

from helpers.course import cli, ray_engine, train_runs


@pytest.fixture
def nothing_starts(monkeypatch):
    """Any work started (Ray joined, a run trained, a notebook run) fails the test."""

    def refuse(*args, **kwargs):
        pytest.fail("work started before the arguments were checked")

    monkeypatch.setattr(ray_engine, "connect", refuse)
    monkeypatch.setattr(ray_engine, "train_declared", refuse)
    monkeypatch.setattr(ray_engine, "run_grid", refuse)
    monkeypatch.setattr(cli.runner, "run_course", refuse)
    monkeypatch.setattr(train_runs.suites, "train_declared", refuse)


def _usage_error(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-0.5", "lots"])
def test_train_runs_refuses_a_gpu_share_that_is_not_a_finite_number_at_least_zero(nothing_starts, capsys, value):
    message = _usage_error(train_runs.main, ["train", "--engine", "ray", "--gpus-per-run", value], capsys)
    assert "--gpus-per-run" in message and "finite number >= 0" in message and value in message


@pytest.mark.parametrize("value", ["0", "-2", "1.5"])
def test_train_runs_refuses_a_cpu_count_below_one(nothing_starts, capsys, value):
    message = _usage_error(train_runs.main, ["train", "--engine", "ray", "--cpus-per-run", value], capsys)
    assert "--cpus-per-run" in message and "integer >= 1" in message


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_course_run_refuses_a_gpu_share_that_is_not_a_finite_number_at_least_zero(nothing_starts, capsys, value):
    message = _usage_error(cli.main, ["run", "--engine", "ray", "--grid", "seed=0,1", "--gpus-per-run", value], capsys)
    assert "--gpus-per-run" in message and "finite number >= 0" in message


@pytest.mark.parametrize("option", [["--address", "auto"], ["--gpus-per-run", "0.5"]])
def test_course_run_refuses_ray_options_with_the_local_engine(nothing_starts, capsys, option):
    message = _usage_error(cli.main, ["run", "--profile", "smoke", "--notebooks", "00", *option], capsys)
    assert option[0] in message and "--engine ray" in message


def test_course_run_refuses_a_parameter_given_by_p_and_by_grid(nothing_starts, capsys):
    message = _usage_error(
        cli.main, ["run", "--engine", "ray", "--notebooks", "00", "-p", "seed", "3", "--grid", "seed=0,1"], capsys
    )
    assert "seed" in message and "-p" in message and "--grid" in message


def test_the_engine_functions_check_their_resources_before_joining_ray(monkeypatch):
    monkeypatch.setattr(ray_engine, "connect", lambda *a, **k: pytest.fail("joined Ray before the check"))
    for gpus, cpus in ((float("nan"), 1), (float("inf"), 1), (0.0, 0)):
        with pytest.raises(ValueError, match="gpus_per_run|cpus_per_run"):
            ray_engine.train_declared(["02_losses"], "smoke", {}, gpus_per_run=gpus, cpus_per_run=cpus)
    with pytest.raises(ValueError, match="gpus_per_notebook"):
        ray_engine.run_grid("unused", {"seed": [0]}, selection=["00"], gpus_per_notebook=float("nan"))
    with pytest.raises(ValueError, match=r"seed.*both"):
        ray_engine.run_grid("unused", {"seed": [0, 1]}, selection=["00"], extra={"seed": 3})
