"""The grid of a notebook sweep (``python -m helpers.course run --engine ray --grid NAME=A,B``): parsing the
command line's values, every combination, one folder per grid point, and the checks made before anything runs
(:func:`check_grid_values`: every value against its knob rule; :func:`point_folders`: no two points in one folder).
:mod:`helpers.course.ray_engine` runs the grid.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["split_values", "parse_grid", "grid_points", "point_folder", "point_folders", "check_grid_values"]


def split_values(text: str) -> list[str]:
    """``'0,1'`` → ``['0', '1']``; ``'[0,1],[2]'`` → ``['[0,1]', '[2]']``: split at the commas outside brackets,
    braces and double quotes (a JSON list or text is one value). ValueError for unbalanced brackets or quotes."""
    values, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(text):
        if quoted:
            quoted = char != '"' or text[index - 1] == "\\"
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            values.append(text[start:index])
            start = index + 1
        if depth < 0:
            break
    if depth != 0 or quoted:
        raise ValueError(f"{text!r} has unbalanced brackets or quotes; write JSON values such as [0,1],[2]")
    return values + [text[start:]]


def _same_value(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["seed=0,1,2", "dataset=dermamnist"]`` → ``{"seed": [0, 1, 2], "dataset": ["dermamnist"]}`` (each value
    parsed as JSON when it is JSON, else kept as text; a JSON list such as ``seeds=[0,1],[2]`` is one value).
    A value given twice (``seed=0,0``, ``lr=0.1,1e-1``) is refused."""
    from helpers.course.runner import parse_value

    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not values.strip():
            raise ValueError(f"--grid {item!r}: write NAME=VALUE[,VALUE...], e.g. --grid seed=0,1,2")
        if name in grid:
            raise ValueError(f"--grid names {name!r} twice; give all its values in one --grid {name}=A,B")
        grid[name] = [parse_value(value.strip()) for value in split_values(values)]
        if any(value == "" for value in grid[name]):
            raise ValueError(f"--grid {item!r} has an empty value")
        for index, value in enumerate(grid[name]):
            if any(_same_value(value, earlier) for earlier in grid[name][:index]):
                raise ValueError(
                    f"--grid {item!r} gives {name}={_folder_value(value)} twice: give each value once "
                    "(two equal grid points would run into one folder)"
                )
    return grid


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the order the grid names them."""
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*(grid[name] for name in names))]


def _folder_value(value: Any) -> str:
    """A grid value as a folder name writes it: text as it is, a list or mapping as compact JSON, else str()."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return f"{value}"


def point_folder(point: Mapping[str, Any]) -> str:
    """``{"seed": 0, "dataset": "dermamnist"}`` → ``seed=0,dataset=dermamnist`` (a folder name)."""
    text = ",".join(f"{name}={_folder_value(value)}" for name, value in point.items()) or "default"
    if "/" in text or text.startswith("."):
        raise ValueError(f"grid point {dict(point)} does not make a folder name; use values without '/'")
    return text


def point_folders(out: Path, points: Sequence[Mapping[str, Any]]) -> list[Path]:
    """The folder of every grid point under ``out``; ValueError when two points would share one
    (``seed=0,"0"``: the number 0 and the text "0")."""
    folders = [Path(out) / point_folder(point) for point in points]
    for index, folder in enumerate(folders):
        if folder in folders[:index]:
            shared = [dict(point) for point, other in zip(points, folders) if other == folder]
            raise ValueError(
                f"the grid points {shared} would write into one folder {folder.name}: give values that differ "
                "as text too"
            )
    return folders


def check_grid_values(notebooks: Sequence[Path], grid: Mapping[str, Sequence[Any]], extra: Mapping[str, Any]) -> None:
    """Every grid value and extra parameter checked against its knob rule in every selected notebook
    (:func:`helpers.course.runner.check_parameter_values`), all problems in one ValueError."""
    from helpers.course import runner as course

    problems = []
    for parameters in [dict(extra), *({name: value} for name, values in grid.items() for value in values)]:
        try:
            course.check_parameter_values(list(notebooks), parameters)
        except ValueError as error:
            problems += [line for line in str(error).splitlines()[1:] if line not in problems]
    if problems:
        raise ValueError("nothing was run; grid value(s) not allowed:\n" + "\n".join(problems))
