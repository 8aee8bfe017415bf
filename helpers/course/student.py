"""Student versions of the course notebooks: every solution replaced by a stub, every check kept.

Conventions (cell tags, with nbgrader's solution markers but none of its database or grading machinery):

* a cell tagged ``solution`` holds an exercise's solution.

  - Code: the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` become ``# YOUR CODE HERE`` and
    ``raise NotImplementedError()``, indented like the marker, so a function keeps its signature and docstring and
    the check after it runs and fails on the stub. A code solution without markers becomes that stub as a whole.
  - Markdown (derive a step, interpret a result): the text between ``<!-- BEGIN SOLUTION -->`` and
    ``<!-- END SOLUTION -->`` (the whole cell without markers) becomes ``*Your answer here.*``.

* a cell tagged ``check`` follows every code solution (before the next solution) and is kept verbatim: it passes with
  the solution and fails on the stub (for instance the student's focal loss against ``helpers.losses.FocalLoss`` on
  random logits).
* the student version stores no outputs, execution counts or widget state: an output could give a solution away.

``python -m helpers.course.student`` (``make student``) writes ``build/student/notebooks/``; the committed notebooks are
the instructor versions.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from helpers.course.output_cleanup import cell_source, write_notebook_atomically
from helpers.utils import REPO_ROOT, display_path

SOLUTION_TAG = "solution"
CHECK_TAG = "check"
CODE_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
MARKDOWN_MARKERS = ("<!-- BEGIN SOLUTION -->", "<!-- END SOLUTION -->")
CODE_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
MARKDOWN_STUB = "*Your answer here.*"


class ExerciseFormatError(ValueError):
    """A notebook whose solution / check cells do not follow the conventions of this module."""


def _tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _replace_between_markers(text: str, markers: tuple[str, str], stub: list[str], where: str) -> str:
    begin, end = markers
    lines, result, inside, indent = text.splitlines(), [], False, ""
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped == begin:
            if inside:
                raise ExerciseFormatError(f"{where}, line {number}: {begin!r} inside another solution block")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            result += [indent + stub_line for stub_line in stub]
        elif stripped == end:
            if not inside:
                raise ExerciseFormatError(f"{where}, line {number}: {end!r} without {begin!r}")
            inside = False
        elif not inside:
            result.append(line)
    if inside:
        raise ExerciseFormatError(f"{where}: {begin!r} is never closed by {end!r}")
    return "\n".join(result)


def stub_cell(cell: dict, where: str) -> dict:
    """The student's version of one ``solution`` cell (outputs cleared)."""
    cell = copy.deepcopy(cell)
    text = cell_source(cell)
    if cell["cell_type"] == "code":
        markers, stub = CODE_MARKERS, list(CODE_STUB)
    else:
        markers, stub = MARKDOWN_MARKERS, [MARKDOWN_STUB]
    if markers[0] in text or markers[1] in text:
        cell["source"] = _replace_between_markers(text, markers, stub, where)
    else:
        cell["source"] = "\n".join(stub)
    return cell


def check_exercise_layout(nb: dict, name: str = "notebook") -> None:
    """Raise ``ExerciseFormatError`` unless every code solution is followed by a check before the next solution,
    and no cell is tagged both ``solution`` and ``check``."""
    pending = None
    for index, cell in enumerate(nb.get("cells", [])):
        tags = _tags(cell)
        if {SOLUTION_TAG, CHECK_TAG} <= tags:
            raise ExerciseFormatError(f"{name}, cell {index}: tagged both 'solution' and 'check'; split it in two")
        if SOLUTION_TAG in tags and cell["cell_type"] == "code":
            if pending is not None:
                raise ExerciseFormatError(
                    f"{name}, cell {pending}: a code solution with no cell tagged 'check' "
                    "after it (before the next solution)"
                )
            pending = index
        elif CHECK_TAG in tags:
            if cell["cell_type"] != "code":
                raise ExerciseFormatError(f"{name}, cell {index}: a 'check' cell must be a code cell")
            pending = None
    if pending is not None:
        raise ExerciseFormatError(f"{name}, cell {pending}: a code solution with no cell tagged 'check' after it")


def student_notebook(nb: dict, name: str = "notebook") -> dict:
    """The student version of an instructor notebook (see the module docstring)."""
    check_exercise_layout(nb, name)
    student = copy.deepcopy(nb)
    student.get("metadata", {}).pop("widgets", None)
    cells = []
    for index, cell in enumerate(student["cells"]):
        if SOLUTION_TAG in _tags(cell):
            cell = stub_cell(cell, f"{name}, cell {index}")
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    student["cells"] = cells
    return student


def solution_count(nb: dict) -> int:
    return sum(SOLUTION_TAG in _tags(cell) for cell in nb.get("cells", []))


def write_student_versions(notebooks: list[Path], out: Path) -> list[tuple[Path, int]]:
    """Write the student version of every notebook to ``out/notebooks/``; return (path, solutions replaced)."""
    target_dir = Path(out) / "notebooks"
    target_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebooks:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        target = target_dir / Path(path).name
        write_notebook_atomically(student_notebook(nb, Path(path).name), target)
        written.append((target, solution_count(nb)))
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.course.student",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("notebooks", nargs="*", type=Path, help="instructor notebooks (default: notebooks/*.ipynb)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "student", help="default: build/student")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for target, replaced in write_student_versions(notebooks, args.out):
        print(f"{display_path(target)}: {replaced} solution cell(s) replaced by stubs")


if __name__ == "__main__":
    main()
