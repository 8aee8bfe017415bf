"""The clean-up of stored notebook outputs, which keeps the rules of :mod:`helpers.course.output_rules` without changing
a result, and the atomic notebook writer.

``clean_notebook`` (command line: ``python -m helpers.course clean-outputs``) only removes or rewrites what carries
no result: tqdm redraws (the last one is kept as the one-line summary a headless run now prints), whitespace-only
stderr outputs, saved widget state, the executing checkout's absolute path prefix in text outputs, and what
an execution writes into the metadata: papermill's ``input_path``, ``output_path``, start and end times and
duration (notebook and cells) and Jupyter's per-cell ``execution`` timestamps. It also tags the parameter
cells ``remove-cell`` (MyST-NB leaves them off the website), the solution cells ``hide-input`` (folded there) and
the expert code cells ``hide-cell`` (source and outputs folded on the website, and in JupyterLab); JupyterLab also
folds the code of a ``hide-input`` cell, whose outputs the website shows.
``course publish`` cleans every notebook this way and points the injected ``results_path`` at the committed results
JSON (``settle_injected_results_path``), so the committed notebooks stay free of machine paths, run folders and
timestamps after each re-execution.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from helpers.course.output_rules import (
    COLLAPSED_TAG,
    EXPERT_TAG,
    HIDDEN_TAG,
    INJECTED_TAG,
    PARAMETER_TAGS,
    SOLUTION_TAG,
    TEXT_MIMES,
    cell_tags,
    check_notebook,
    is_progress_output,
    joined_text,
    output_bytes,
)
from helpers.utils import REPO_ROOT, final_line, format_duration, write_text_atomically

# the last redraw of a tqdm bar, read back into the one-line summary helpers.utils.progress prints
TQDM_FINAL = re.compile(
    r"(?P<desc>[^\r\n:]*): *\d+%\|[^|]*\| *(?P<n>\d+)/(?P<total>\d+) "
    r"\[(?P<elapsed>[\d:]+)<[^,\]]*(?:, *[^,\]]*(?:it/s|s/it))?(?:, *(?P<postfix>[^\]]*))?\]"
)
# what executing a notebook writes into its metadata: where the machine read and wrote it, and when (None: the
# whole entry); removed by clean_notebook
RUN_METADATA = {"papermill": ("input_path", "output_path", "start_time", "end_time", "duration")}
CELL_RUN_METADATA = {"papermill": ("start_time", "end_time", "duration"), "execution": None}
EXPERT_SITE_TAG = "hide-cell"  # MyST-NB: source and outputs folded under one toggle
#: where a published notebook's results JSON lives, relative to notebooks/ (the folder a notebook executes in)
PUBLISHED_RESULTS_PATH = "../results/reference/{stem}.json"


def _tag_for_the_site(cell: dict) -> int:
    """Add the tags that hide a parameter cell, fold a solution and fold an expert code cell on the website, and
    fold every code cell the website folds (expert or ``hide-cell``) in JupyterLab too, and the code of a ``hide-input``
    cell; how many were added."""
    wanted = [HIDDEN_TAG] if set(PARAMETER_TAGS) & set(cell_tags(cell)) else []
    wanted += [COLLAPSED_TAG] if SOLUTION_TAG in cell_tags(cell) else []
    expert = EXPERT_TAG in cell_tags(cell) and cell.get("cell_type") == "code"
    wanted += [EXPERT_SITE_TAG] if expert else []
    missing = [tag for tag in wanted if tag not in cell_tags(cell)]
    if missing:
        cell.setdefault("metadata", {})["tags"] = [*cell_tags(cell), *missing]
    if cell.get("cell_type") != "code":
        return len(missing)
    return len(missing) + _fold_in_jupyterlab(cell, expert or EXPERT_SITE_TAG in cell_tags(cell))


def _fold_in_jupyterlab(cell: dict, folded_whole: bool) -> int:
    """Set JupyterLab's folding flags of a code cell from its tags, as the website folds it: a ``hide-cell`` (or
    expert) cell folded whole; a ``hide-input`` cell its code only, its outputs open; any other cell open (a flag left
    from an earlier tag would hide a main-flow result in JupyterLab only). 1 where the flags changed."""
    wanted = (
        {"source_hidden": True, "outputs_hidden": True}
        if folded_whole
        else {"source_hidden": True}
        if COLLAPSED_TAG in cell_tags(cell)
        else {}
    )
    metadata = cell.setdefault("metadata", {})
    flags = metadata.get("jupyter", {})
    current = {key: True for key in ("source_hidden", "outputs_hidden") if flags.get(key)}
    if current == wanted:
        return 0
    others = {key: value for key, value in flags.items() if key not in ("source_hidden", "outputs_hidden")}
    if wanted or others:
        metadata["jupyter"] = {**others, **wanted}
    else:
        metadata.pop("jupyter", None)
    return 1


def _summary_of_bars(texts: list[str]) -> str | None:
    """The one-line summary ``helpers.utils.progress`` prints, rebuilt from the last redraw of a stored tqdm bar."""
    for text in reversed(texts):
        matches = list(TQDM_FINAL.finditer(text))
        if matches:
            last = matches[-1]
            seconds = 0
            for part in last["elapsed"].split(":"):
                seconds = seconds * 60 + int(part)
            return final_line(
                last["desc"].strip(),
                int(last["n"]),
                int(last["total"]),
                format_duration(seconds),
                (last["postfix"] or "").strip(),
            )
    return None


def _clean_outputs(outputs: list[dict], prefixes: list[str]) -> tuple[list[dict], int]:
    cleaned: list[dict] = []
    bars: list[str] = []
    removed = 0

    def flush() -> None:
        summary = _summary_of_bars(bars)
        if summary is not None:
            cleaned.append({"name": "stdout", "output_type": "stream", "text": [summary + "\n"]})
        bars.clear()

    for output in outputs:
        if is_progress_output(output):
            bars.append(joined_text(output.get("text", output.get("data", {}).get("text/plain", ""))))
            removed += 1
            continue
        if (
            output.get("output_type") == "stream"
            and output.get("name") == "stderr"
            and not joined_text(output.get("text", "")).strip()
        ):
            removed += 1
            continue
        if bars:
            flush()
        cleaned.append(_smaller_images(_relative_paths(output, prefixes)))
    if bars:
        flush()
    return cleaned, removed


def smaller_png(encoded: str) -> str:
    """The same image as a smaller PNG, losslessly, or ``encoded`` itself when that is not smaller.

    Matplotlib's inline backend stores RGBA with every pixel opaque: the alpha channel is dropped and the PNG
    re-encoded with Pillow's ``optimize`` (about 12 % fewer bytes on notebook 06's figures). Every pixel is compared
    before the smaller file is kept, so the figure a reader sees is the same bit for bit.
    """
    raw = base64.b64decode(encoded)
    with Image.open(io.BytesIO(raw)) as image:
        image.load()
        if image.mode == "RGBA" and image.getchannel("A").getextrema() == (255, 255):
            converted = image.convert("RGB")
        elif image.mode in ("RGB", "L", "P"):
            converted = image.copy()
        else:
            return encoded
        buffer = io.BytesIO()
        converted.save(buffer, "PNG", optimize=True)
        if len(buffer.getvalue()) >= len(raw):
            return encoded
        with Image.open(io.BytesIO(buffer.getvalue())) as check:
            if not np.array_equal(np.asarray(check.convert("RGBA")), np.asarray(image.convert("RGBA"))):
                return encoded
    return base64.b64encode(buffer.getvalue()).decode("ascii") + ("\n" if encoded.endswith("\n") else "")


def _smaller_images(output: dict) -> dict:
    """``output`` with each PNG re-encoded by :func:`smaller_png` (already a copy: see :func:`_relative_paths`)."""
    data = output.get("data", {})
    if "image/png" in data:
        stored = data["image/png"]
        data["image/png"] = smaller_png("".join(stored) if isinstance(stored, list) else stored)
    return output


def _relative(text: str, prefixes: list[str]) -> str:
    for prefix in prefixes:
        prefix = prefix.rstrip("/")
        text = text.replace(prefix + "/", "")
        text = re.sub(re.escape(prefix) + r"(?![\w.-])", ".", text)
    return text


def _relative_paths(output: dict, prefixes: list[str]) -> dict:
    output = copy.deepcopy(output)

    def rewrite(value: str | list[str]) -> str | list[str]:  # keeps the stored layout: one string or a line list
        return [_relative(line, prefixes) for line in value] if isinstance(value, list) else _relative(value, prefixes)

    if output.get("output_type") == "stream":
        output["text"] = rewrite(output["text"])
    for mime in TEXT_MIMES:
        if mime in output.get("data", {}):
            output["data"][mime] = rewrite(output["data"][mime])
    return output


def _remove_run_metadata(metadata: dict, entries: dict[str, tuple[str, ...] | None]) -> int:
    """Remove the listed keys of each entry (or the whole entry for None) from ``metadata``; how many were there."""
    removed = 0
    for entry, keys in entries.items():
        if entry not in metadata:
            continue
        if keys is None:
            del metadata[entry]
            removed += 1
        elif isinstance(metadata[entry], dict):
            removed += sum(metadata[entry].pop(key, None) is not None for key in keys)
    return removed


def clean_notebook(nb: dict, repo_roots: list[str] | None = None) -> tuple[dict, dict[str, Any]]:
    """A copy of ``nb`` without progress-bar redraws, blank stderr outputs, widget state and the execution's
    paths and times in the metadata (``RUN_METADATA``, ``CELL_RUN_METADATA``), with every ``repo_roots`` prefix
    (default: this checkout) made relative in text outputs; and what was changed."""
    prefixes = sorted({os.path.abspath(p) for p in (repo_roots or [str(REPO_ROOT)])}, key=len, reverse=True)
    nb = copy.deepcopy(nb)
    metadata = nb.setdefault("metadata", {})
    report: dict[str, Any] = {
        "bytes_before": output_bytes(nb),
        "outputs_removed": 0,
        "widget_state_removed": bool(metadata.pop("widgets", None)),
        "run_metadata_removed": _remove_run_metadata(metadata, RUN_METADATA),
    }
    report["site_tags_added"] = 0
    for cell in nb["cells"]:
        report["run_metadata_removed"] += _remove_run_metadata(cell.get("metadata", {}), CELL_RUN_METADATA)
        report["site_tags_added"] += _tag_for_the_site(cell)
        if cell.get("cell_type") == "code":
            cell["outputs"], removed = _clean_outputs(cell.get("outputs", []), prefixes)
            report["outputs_removed"] += removed
    report["bytes_after"] = output_bytes(nb)
    return nb, report


def settle_injected_results_path(nb: dict, stem: str) -> dict:
    """A copy of ``nb`` whose injected ``results_path`` names the committed results JSON of notebook ``stem``
    (:data:`PUBLISHED_RESULTS_PATH`) instead of the folder of the run that executed it: the same value for every
    run, and where ``course publish`` puts the JSON. The printed outputs that name the run's copy
    (``<run folder>/results/<stem>.json``: the resolved configuration, "results written to …"), however the run
    folder was spelled (``runs/<run>``, ``../../../tmp/<run>`` for a run made outside the repository, absolute),
    name the committed one too (``results/reference/<stem>.json``, relative to the repository root as they were
    printed), and so does papermill's record of the injected values (``metadata.papermill.parameters``)."""
    nb = copy.deepcopy(nb)
    published = json.dumps(PUBLISHED_RESULTS_PATH.format(stem=stem))
    run_copy = re.compile(r"(?<![\w./+-])[\w./+-]*/results/" + re.escape(stem) + r"\.json")
    committed = PUBLISHED_RESULTS_PATH.format(stem=stem).removeprefix("../")
    for cell in nb["cells"]:
        if INJECTED_TAG in cell_tags(cell):
            source = re.sub(
                r"^results_path = .*$",
                lambda _: f"results_path = {published}",
                joined_text(cell.get("source", "")),
                flags=re.M,
            )
            cell["source"] = _stored_like(source, cell.get("source"))
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = _stored_like(
                    run_copy.sub(committed, joined_text(output.get("text", ""))), output["text"]
                )
    recorded = nb.get("metadata", {}).get("papermill", {}).get("parameters", {})
    if "results_path" in recorded:  # papermill's record of the injected values
        recorded["results_path"] = PUBLISHED_RESULTS_PATH.format(stem=stem)
    return nb


def cell_source(cell: dict) -> str:
    """A cell's source as one string: nbformat and papermill store a list of lines, a hand-made cell a string."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def first_source_difference(executed: dict, committed: dict) -> str | None:
    """Where an executed notebook's cell sources differ from the committed notebook's, in words, or None.

    Papermill's injected-parameters cell is left out (it names the executing run); every other cell's type and
    source must match, so a notebook executed before a source edit was merged cannot revert that edit."""

    def sources(nb: dict) -> list[tuple[str, str]]:
        return [
            (cell["cell_type"], cell_source(cell))
            for cell in nb.get("cells", [])
            if "injected-parameters" not in cell.get("metadata", {}).get("tags", [])
        ]

    old, new = sources(executed), sources(committed)
    for index, (ran, kept) in enumerate(zip(old, new)):
        if ran != kept:
            return f"cell {index} (not counting the injected parameters) differs from the committed source"
    if len(old) != len(new):
        return f"it has {len(old)} cells and the committed notebook {len(new)} (not counting the injected parameters)"
    return None


def _stored_like(text: str, stored: Any) -> Any:
    """``text`` in the form ``stored`` had: papermill and nbformat write a list of lines, a hand-made cell a string."""
    return text.splitlines(keepends=True) if isinstance(stored, list) else text


def write_notebook_atomically(nb: dict, path: Path, trailing_newline: bool = True) -> None:
    """The layout nbformat and papermill write (indent 1, sorted keys, UTF-8; sources and texts kept as they are,
    so a clean-up diff shows only what changed), through a temporary file in the same folder."""
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + ("\n" if trailing_newline else "")
    write_text_atomically(path, text)


def clean_files(paths: list[Path], repo_roots: list[str] | None = None) -> list[dict[str, Any]]:
    """Clean every notebook in place; return one report row per notebook (with the rules still failing)."""
    rows = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        nb = json.loads(text)
        cleaned, report = clean_notebook(nb, repo_roots)
        if cleaned != nb:
            write_notebook_atomically(cleaned, Path(path), trailing_newline=text.endswith("\n"))
        failing = [rule for rule, problems in check_notebook(cleaned).items() if problems]
        rows.append({"notebook": Path(path).stem, **report, "rules_failing": failing})
    return rows
