"""Issue 29: the two commands on a fresh machine. The repository is cloned into a temporary folder five folders deep,
with no data folder beside it and no data in it, and the command `make test` and `make course` run before their
notebooks is run there: ``python -m helpers.course check-data`` (not the whole suite).

* No route to the data hosts (every proxy variable points at a closed port on this machine, so the official
  Zenodo URL is refused): it stops with one message that names the file, where to put it and the fetch command, and
  leaves the data folder as it was.
* A server on this machine serves a generated DermaMNIST-format file in place of the official one
  (CALIBMED_FETCH_TEST_SOURCES, tests only): the file is fetched into the clone's data/ and the one notebook that
  will be skipped (12, which needs ISIC 2018) is named in one line.

The clone holds the committed HEAD, not uncommitted changes."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from local_server import FileServer, closed_port, dermamnist_bytes, md5, sources
from medmnist import INFO

REPO_ROOT = Path(__file__).resolve().parent.parent
PROXY_VARIABLES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
#: what the environment must not carry into the clone's processes (they would point at this checkout's data)
CLEARED = ("CALIBMED_DATA_DIR", "CALIBMED_REQUIRE_ALL_DATA", "CALIBMED_FETCH_TEST_SOURCES", "PYTHONPATH", "no_proxy")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout to clone")
    root = tmp_path_factory.mktemp("fresh") / "one" / "two" / "three" / "four" / "calibmed"
    root.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(root)], check=True, timeout=300)
    assert not (root.parent / "data").exists()
    assert sorted(path.name for path in (root / "data").iterdir()) == ["README.md"]  # no data file is committed
    return root


def offline_environment(**extra: str) -> dict[str, str]:
    """This process's environment without the course's data settings, every proxy pointed at a closed port."""
    dead = f"http://127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if k not in CLEARED and k.upper() != "NO_PROXY"}
    env.update({name: dead for name in PROXY_VARIABLES}, CALIBMED_PROGRESS="final", **extra)
    return env


def check_data(clone: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers.course", "check-data", "--profile", "smoke"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_offline_without_data_the_check_stops_with_one_message(clone):
    finished = check_data(clone, offline_environment())
    assert finished.returncode == 1, finished.stdout + finished.stderr
    [message] = finished.stderr.strip().splitlines()  # one message, no traceback
    data_dir, info = clone / "data", INFO["dermamnist"]
    for expected in (
        "error: nothing was run. DermaMNIST (dermamnist.npz, 28 px) is missing and could not be downloaded",
        f"could not reach {info['url']}",
        f"Put dermamnist.npz in the data directory {data_dir}",
        "`python -m helpers.data fetch dermamnist`",
        f"(md5 {info['MD5']}) and save it as {data_dir / 'dermamnist.npz'}",
    ):
        assert expected in message, (expected, message)
    assert sorted(path.name for path in data_dir.iterdir()) == ["README.md"]  # nothing written, nothing partial


def test_with_a_local_server_the_check_fetches_dermamnist_and_names_the_skipped_notebook(clone):
    generated = dermamnist_bytes(seed=1)
    with FileServer({"/dermamnist.npz": generated}) as server:
        env = offline_environment(
            no_proxy="127.0.0.1",
            CALIBMED_FETCH_TEST_SOURCES=sources(**{"dermamnist.npz": (server.url("/dermamnist.npz"), md5(generated))}),
        )
        finished = check_data(clone, env)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert (clone / "data" / "dermamnist.npz").read_bytes() == generated
    lines = finished.stdout.splitlines()
    [skipped] = [line for line in lines if "skipped" in line]
    assert skipped.startswith("12_dataset_shift will be skipped: it needs ISIC 2018 Task 3")
    assert "`python -m helpers.data fetch isic2018`" in skipped
    assert lines[-1] == "data check: the data of 13 of 14 notebook(s) are in place"
    (clone / "data" / "dermamnist.npz").unlink()  # the module's other test starts without data


def test_make_test_and_make_course_check_the_data_before_any_notebook(clone):
    if shutil.which("make") is None:
        pytest.skip("needs make")
    env = offline_environment()

    def planned(target: str) -> list[str]:
        listing = subprocess.run(["make", "-n", target], cwd=clone, env=env, capture_output=True, text=True)
        assert listing.returncode == 0, listing.stderr
        return listing.stdout.splitlines()

    def first(lines: list[str], text: str) -> int:
        return next(number for number, line in enumerate(lines) if text in line)

    test = planned("test")
    check = first(test, "-m helpers.course check-data --profile smoke")
    assert check < first(test, "-m pytest tests") < first(test, "-m helpers.course prepare --profile smoke")
    assert sum("check-data" in line for line in test) == 1
    course = planned("course")
    assert first(course, "-m helpers.course check-data") < first(course, "-m helpers.course run")
