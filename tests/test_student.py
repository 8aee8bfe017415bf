"""helpers.course.student: a synthetic notebook with two exercises; its check cells pass on the instructor version and
fail on the student stubs (both executed with nbclient); layout errors; the committed notebooks' student versions."""

import json
from pathlib import Path

import pytest

from helpers.course import student
from helpers.course.output_cleanup import cell_source

ROOT = Path(__file__).resolve().parent.parent

FOCAL_SOLUTION = '''def focal_loss(logits, labels, gamma):
    """Mean focal loss -(1 - p_t)^gamma log p_t (Lin et al. 2017)."""
    ### BEGIN SOLUTION
    log_pt = torch.log_softmax(logits, dim=1).gather(1, labels[:, None]).squeeze(1)
    return (-(1 - log_pt.exp()) ** gamma * log_pt).mean()
    ### END SOLUTION'''

FOCAL_CHECK = """generator = torch.Generator().manual_seed(0)
logits, labels = torch.randn(64, 7, generator=generator), torch.randint(0, 7, (64,), generator=generator)
for gamma in (0.0, 2.0, 5.0):
    assert torch.allclose(focal_loss(logits, labels, gamma), FocalLoss(gamma)(logits, labels), atol=1e-6)
print("focal check passed")"""


def cell(kind, source, *tags):
    base = {"cell_type": kind, "metadata": {"tags": list(tags)}, "source": source}
    return base | ({"outputs": [], "execution_count": None} if kind == "code" else {})


def exercise_notebook():
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            cell("markdown", "# 99 · Exercises"),
            cell("code", "import torch\nfrom helpers.losses import FocalLoss"),
            cell("markdown", "**Exercise 1.** Implement the focal loss in a few lines."),
            cell("code", FOCAL_SOLUTION, "solution"),
            cell("code", FOCAL_CHECK, "check"),
            cell("markdown", "**Exercise 2.** What does γ = 0 give? Why?"),
            cell(
                "markdown",
                "Intro kept.\n<!-- BEGIN SOLUTION -->\nCross-entropy: the factor is 1.\n<!-- END SOLUTION -->",
                "solution",
            ),
            cell("code", "confidence_at_half = 0.5 ** 2  # (1 - p_t)^γ at p_t = 0.5, γ = 2", "solution"),
            cell("code", "assert confidence_at_half == 0.25\nprint('second check passed')", "check"),
        ],
    }


def execute(nb):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.from_dict(nb)
    nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    return notebook


def errors(cell):
    return [o for o in cell.get("outputs", []) if o["output_type"] == "error"]


def stdout(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o["output_type"] == "stream")


def test_stubs_replace_only_the_solutions():
    nb = exercise_notebook()
    version = student.student_notebook(nb)
    sources = [cell_source(c) for c in version["cells"]]
    assert sources[3] == (
        "def focal_loss(logits, labels, gamma):\n"
        '    """Mean focal loss -(1 - p_t)^gamma log p_t (Lin et al. 2017)."""\n'
        "    # YOUR CODE HERE\n    raise NotImplementedError()"
    )
    assert sources[6] == "Intro kept.\n*Your answer here.*"
    assert sources[7] == "# YOUR CODE HERE\nraise NotImplementedError()"
    assert sources[4] == FOCAL_CHECK and sources[8] == cell_source(nb["cells"][8])  # checks kept verbatim
    text = json.dumps(version)
    assert "log_softmax" not in text and "Cross-entropy: the factor" not in text and "0.5 ** 2" not in text
    assert nb == exercise_notebook()  # the instructor version is not modified


@pytest.mark.slow
def test_checks_pass_on_the_instructor_version_and_fail_on_the_student_version():
    instructor = execute(exercise_notebook())
    assert [errors(c) for c in instructor.cells if c.cell_type == "code"] == [[], [], [], [], []]
    assert "focal check passed" in stdout(instructor.cells[4]) and "second check passed" in stdout(instructor.cells[8])

    pupil = execute(student.student_notebook(exercise_notebook()))
    assert errors(pupil.cells[3]) == []  # the stubbed function is still defined...
    assert errors(pupil.cells[4])[0]["ename"] == "NotImplementedError"  # ...and its check fails on it
    assert errors(pupil.cells[7])[0]["ename"] == "NotImplementedError"
    assert errors(pupil.cells[8])[0]["ename"] == "NameError"
    assert "passed" not in stdout(pupil.cells[4]) + stdout(pupil.cells[8])


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda cells: cells.pop(4), "no cell tagged 'check' after it"),
        (lambda cells: cells[4]["metadata"].update(tags=["check", "solution"]), "tagged both"),
        (lambda cells: cells[3].update(source=FOCAL_SOLUTION.replace("    ### END SOLUTION", "")), "never closed"),
        (lambda cells: cells[3].update(source="x = 1\n### END SOLUTION"), "without '### BEGIN SOLUTION'"),
        (lambda cells: cells[4].update(cell_type="markdown"), "must be a code cell"),
    ],
)
def test_layout_errors_name_the_cell(breakage, message):
    nb = exercise_notebook()
    breakage(nb["cells"])
    with pytest.raises(student.ExerciseFormatError, match=message):
        student.student_notebook(nb, "99_x.ipynb")


def test_make_student_writes_every_notebook_without_outputs(tmp_path):
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    written = student.write_student_versions(notebooks, tmp_path)
    assert [path.name for path, _ in written] == [nb.name for nb in notebooks]
    for (path, replaced), original in zip(written, notebooks):
        version, instructor = json.loads(path.read_text()), json.loads(original.read_text())
        assert all(c.get("outputs", []) == [] for c in version["cells"]) and "widgets" not in version["metadata"]
        assert replaced == student.solution_count(instructor)
        kept = [c for c in instructor["cells"] if student.SOLUTION_TAG not in c["metadata"].get("tags", [])]
        assert len(version["cells"]) == len(instructor["cells"])
        assert all(cell_source(c) in {cell_source(v) for v in version["cells"]} for c in kept)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), ids=lambda path: path.stem[:2]
)
def test_every_committed_notebook_has_two_or_three_checked_exercises(path):
    """Issue 28 item 9: every notebook gives the student two or three exercises (cells tagged solution), each code
    solution followed by its check cell (notebook 12 had none)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    student.check_exercise_layout(nb, path.name)  # every code solution has a check cell after it
    assert 2 <= student.solution_count(nb) <= 3, f"{path.name}: {student.solution_count(nb)} solution cells"
