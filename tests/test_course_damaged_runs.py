"""`course check` and `course compare` on missing or damaged run folders: a clear failure naming the file and what
is wrong, never a bare exception or a silent pass (issue 18, defects 3 and 4)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import course
from helpers.course import cli

REPO_ROOT = Path(__file__).resolve().parent.parent
STEM = "00_start_here"


def a_good_run(tmp_path: Path) -> Path:
    """A run folder as `course run` leaves it after one successful notebook."""
    out = tmp_path / "run"
    (out / "results").mkdir(parents=True)
    (out / "notebooks").mkdir()
    (out / "summary.json").write_text(
        json.dumps(
            {
                "profile": "smoke",
                "started_at": time.time() - 5,
                "notebooks": [{"notebook": STEM, "status": "ok", "seconds": 1.0, "error": None, "results": "x"}],
            }
        )
    )
    (out / "results" / f"{STEM}.json").write_text(json.dumps({"notebook": STEM, "results": {"x": 1}}))
    return out


def test_check_passes_a_good_run(tmp_path):
    course.check_results(a_good_run(tmp_path))


SUMMARY_DAMAGE = {
    "not JSON": (b'{"notebooks": [', r"summary\.json is not valid JSON"),
    "not UTF-8": (b'{"notebooks": "\xff\xfe"}', r"summary\.json is not UTF-8 text"),
    "a list": (json.dumps([1, 2]).encode(), r"summary\.json holds a list, not a JSON object"),
    "no notebooks key": (json.dumps({"started_at": 1.0}).encode(), r"summary\.json has no 'notebooks' list"),
    "notebooks not a list": (
        json.dumps({"started_at": 1.0, "notebooks": "00"}).encode(),
        r"summary\.json has no 'notebooks' list",
    ),
    "no notebooks listed": (
        json.dumps({"started_at": 1.0, "notebooks": []}).encode(),
        r"summary\.json lists no notebooks",
    ),
    "a row without a status": (
        json.dumps({"started_at": 1.0, "notebooks": [{"notebook": STEM}]}).encode(),
        r"summary\.json: notebook row 1 .*'status'",
    ),
    "a row that is a string": (
        json.dumps({"started_at": 1.0, "notebooks": [STEM]}).encode(),
        r"summary\.json: notebook row 1 .*'notebook'",
    ),
    "started_at not a number": (
        json.dumps({"started_at": "today", "notebooks": []}).encode(),
        r"summary\.json: started_at must be a number",
    ),
}


@pytest.mark.parametrize("damage", list(SUMMARY_DAMAGE))
def test_course_check_names_a_damaged_summary_json(tmp_path, damage):
    """Defect 4: not JSON → bare JSONDecodeError; no `notebooks` → KeyError; non-UTF-8 → UnicodeDecodeError; a
    summary listing no notebooks passed."""
    out = a_good_run(tmp_path)
    content, message = SUMMARY_DAMAGE[damage]
    (out / "summary.json").write_bytes(content)
    with pytest.raises(SystemExit, match=message):
        course.check_results(out)


RESULTS_DAMAGE = {
    "a list": (json.dumps([{"notebook": STEM}]).encode(), r"results JSON at .*00_start_here\.json holds a list"),
    "not UTF-8": (b'{"notebook": "\xff"}', r"results JSON at .*00_start_here\.json is not UTF-8 text"),
    "not JSON": (b"{", r"results JSON at .*00_start_here\.json is not valid JSON"),
    "another notebook": (json.dumps({"notebook": "01", "results": {"x": 1}}).encode(), r"names another notebook"),
}


@pytest.mark.parametrize("damage", list(RESULTS_DAMAGE))
def test_course_check_names_a_damaged_results_json(tmp_path, damage):
    """Defect 4: a results JSON that is a list raised AttributeError, non-UTF-8 UnicodeDecodeError."""
    out = a_good_run(tmp_path)
    content, message = RESULTS_DAMAGE[damage]
    (out / "results" / f"{STEM}.json").write_bytes(content)
    with pytest.raises(SystemExit, match=message):
        course.check_results(out)


def test_course_check_on_a_damaged_folder_exits_non_zero_with_the_message(tmp_path):
    out = a_good_run(tmp_path)
    (out / "summary.json").write_text("not json")
    finished = subprocess.run(
        [sys.executable, "-m", "helpers.course", "check", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode != 0 and "summary.json is not valid JSON" in finished.stderr
    assert "Traceback" not in finished.stderr


def test_course_compare_on_a_missing_run_folder_fails_clearly(tmp_path):
    """Defect 3: `python -m helpers.course compare /no/such/run` exited 0 with no output."""
    missing = tmp_path / "no" / "such" / "run"
    finished = subprocess.run(
        [sys.executable, "-m", "helpers.course", "compare", str(missing)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode != 0
    assert f"{missing} is not a folder" in finished.stderr and "Traceback" not in finished.stderr


def test_course_compare_on_a_folder_without_executed_notebooks_fails_clearly(tmp_path):
    (tmp_path / "notebooks").mkdir()
    with pytest.raises(SystemExit, match=r"no executed notebooks in .*notebooks.*course run"):
        cli.main(["compare", str(tmp_path)])


def test_course_compare_names_an_executed_notebook_with_no_committed_copy(tmp_path):
    (tmp_path / "run" / "notebooks").mkdir(parents=True)
    (tmp_path / "committed").mkdir()
    (tmp_path / "run" / "notebooks" / "99_extra.ipynb").write_text(json.dumps({"cells": []}))
    with pytest.raises(SystemExit, match=r"99_extra\.ipynb: no committed notebook"):
        course.compare_tables(tmp_path / "run", tmp_path / "committed")


def test_course_compare_names_an_executed_notebook_that_is_not_json(tmp_path):
    (tmp_path / "run" / "notebooks").mkdir(parents=True)
    (tmp_path / "committed").mkdir()
    for folder in ("run/notebooks", "committed"):
        (tmp_path / folder / "01_x.ipynb").write_text(json.dumps({"cells": []}))
    (tmp_path / "run" / "notebooks" / "01_x.ipynb").write_text("{")
    with pytest.raises(SystemExit, match=r"01_x\.ipynb is not valid JSON"):
        course.compare_tables(tmp_path / "run", tmp_path / "committed")
