"""Issue 18: a fresh clone passes its tests at any depth. The course runner's tests once passed only in a checkout
exactly two folders below ``/`` (their papermill stand-in wrote the injected results path, which is relative to the
notebook's folder, relative to the current folder), so they are run here from a checkout eight folders deeper. The
runner's one slow test (a real papermill kernel, given absolute paths only) is left to the main checkout's run: it
doubled this test's time (issue 29, item 5) and does not depend on where the checkout is."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _deep_checkout(base: Path) -> Path:
    """What the runner's tests need of a checkout, under ``base/a/b/c/d/calibmed``: the library and the tests
    copied (``helpers`` finds the notebooks beside its own resolved folder), the notebooks linked."""
    root = base / "a" / "b" / "c" / "d" / "calibmed"
    shutil.copytree(REPO_ROOT / "helpers", root / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests").mkdir(parents=True)
    for name in ("conftest.py", "test_course_runner.py"):
        shutil.copy2(REPO_ROOT / "tests" / name, root / "tests" / name)
    shutil.copy2(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "notebooks").mkdir()
    for notebook in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        (root / "notebooks" / notebook.name).symlink_to(notebook)
    return root


@pytest.mark.slow
def test_the_course_runner_tests_pass_from_a_checkout_eight_folders_deeper(tmp_path):
    root = _deep_checkout(tmp_path)
    assert len(root.parts) >= 8  # "/" and seven folders at least: far from "two folders below /"
    # one process: it must import the copy's helpers (its folder comes first on sys.path), then run the tests
    script = (
        "import sys, pytest, helpers.course.runner as course\n"
        f"if str(course.NOTEBOOK_DIR) != {str(root / 'notebooks')!r}:\n"
        "    sys.exit(f'imported the wrong helpers: {course.__file__}')\n"
        "sys.exit(pytest.main(['tests/test_course_runner.py', '-q', '-m', 'not slow', '-p', 'no:cacheprovider', "
        f"'--basetemp', {str(tmp_path / 'pytest-tmp')!r}]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    finished = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-2000:]
    assert " passed" in finished.stdout and "failed" not in finished.stdout
