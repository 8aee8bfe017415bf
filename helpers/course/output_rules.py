"""The rules every committed notebook keeps, and a clean-up that strips what can be stripped without changing results.

Rules (``check_notebook`` returns the problems per rule; ``tests/test_notebook_outputs.py`` enforces them):

============================  ==========================================================================================
``no_progress_bars``          no tqdm redraws stored (``helpers.utils.progress`` prints one final line in headless runs)
``no_absolute_paths``         no absolute path of the executing machine anywhere in the notebook's JSON: text outputs
                              (``helpers.utils.paths``), cell sources, notebook, cell and output metadata (not images)
``no_timestamps``             no date-and-time anywhere in the notebook's JSON (papermill's and Jupyter's execution
                              times in the metadata are removed by ``clean_notebook``)
``no_raw_warnings``           no stderr output containing "Warning" or matplotlib's "findfont: " font fallback, no
                              ``file.py:12: UserWarning`` line anywhere
``no_long_lines``             no printed line longer than ``MAX_LINE`` characters (tables: DataFrames or markdown)
``no_widget_state``           no saved ipywidgets state (``metadata.widgets``)
``outputs_size``              at most ``MAX_OUTPUT_BYTES`` of stored outputs
``no_errors``                 no error output
``title_summary_licence``     the first cell: ``# title``, a summary paragraph, the licences
``one_parameters_cell``       exactly one cell tagged ``parameters``
``takeaway_cell``             a markdown cell headed "Takeaway"
``main_flow_quiet``           the main flow prints none of the machinery (issue 28, item 3): no md5 or hex hash, no
                              ``$CALIBMED_DATA_DIR``, no results path (``results/….json``), no compute time, no settings
                              dump (``knobs:``, "profile '…', dataset '…'"), no training version, no per-run log line
                              or "(*)" mark, no warning about older training code, no raw log line (``train_loss=…``)
``one_provenance_line``       at most one main-flow line of provenance (``course.provenance``: "72 stored runs ·
                              DermaMNIST 28 px · …"; an old run summary counts too)
``run_details_folded``        a cell calls ``course.save_results``; one code cell calls ``course.details`` and it is
                              tagged ``expert`` (the settings, data files, versions and results path live there)
``no_run_folder_injected``    papermill's injected cell names no folder of one run (``runs/…``), no
                              absolute or home path (``course publish`` names the committed results JSON instead)
``parameters_hidden``         the ``parameters`` and ``injected-parameters`` cells are tagged ``remove-cell``: the
                              website does not show them (``clean_notebook`` adds the tag)
``solutions_collapsed``       every cell tagged ``solution`` is also tagged ``hide-input``: the website shows its code
                              folded under a "Show code cell source" toggle (``clean_notebook`` adds the tag)
``main_flow_outputs_open``    no main-flow code cell has its outputs folded in JupyterLab (``jupyter.outputs_hidden``):
                              a cell retagged from ``hide-cell`` to ``hide-input`` kept the flag, and JupyterLab hid a
                              result the website shows (``clean_notebook`` sets the flags from the tags)
``main_flow_words``           at most ``MAX_MAIN_FLOW_WORDS`` words of main-flow markdown (``MAX_MAIN_FLOW_WORDS_00`` in
                              notebook 00): prose inside an expert block (``<details>`` … ``</details>``) does not count
``main_flow_cells``           no main-flow markdown cell over ``MAX_CELL_WORDS`` words
``no_printed_lists``          no Python list or dict of strings printed as a result (``['a', 'b']``, ``{'a': …}``)
``human_table_headers``       no raw key (``val_ece``, ``map_per_class (%)``) as a column or row header of a table
============================  ==========================================================================================

The **main flow** of outputs is what a code cell not tagged ``expert``, ``hide-cell`` or ``remove-cell`` prints
(:func:`main_flow_outputs`).

**Two layers** (issue 16): the main flow is what a student reads in one sitting; expert material is folded. In
markdown, an expert block is HTML that JupyterLab and the website both fold::

    <details class="expert"><summary>For the expert: why the debiased ECE is not bootstrapped</summary>

    Markdown and $math$ as anywhere else (the blank lines around it matter).

    </details>

A code cell whose output is expert material (a per-seed table, a robustness check) is tagged ``expert``:
``clean_notebook`` adds ``hide-cell`` (the website folds source and outputs under one toggle) and JupyterLab's
``source_hidden`` / ``outputs_hidden`` flags.


The clean-up that makes a notebook keep these rules without changing a result (``clean_notebook``, command line:
``python -m helpers.course clean-outputs``) is :mod:`helpers.course.output_cleanup`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAX_LINE = 120
MAX_OUTPUT_BYTES = 1_000_000
TEXT_MIMES = ("text/plain", "text/html", "text/markdown", "text/latex")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# a tqdm text bar: "epochs:  43%|████▎     | 13/30 [07:22<06:37, 23.37s/it, ...]"
TQDM_BAR = re.compile(r"\d+%\|[^|\n]*\|\s*\d+/\d+|\[\d+:\d+(?::\d+)?<|\d(?:it/s|s/it)[,\]]")
# an absolute POSIX path with at least one folder ("/work/x/…"), not inside a URL or a relative path
ABSOLUTE_PATH = re.compile(r"(?<![\w.~$/:-])/(?:[\w.+-]+/)+[\w.+-]*|\b[A-Za-z]:\\\\?[\w.-]+\\")
LICENCE = re.compile(r"licen[cs]e|\bCC[- ]BY|\bCC0\b|\bMIT\b", re.IGNORECASE)
RAW_WARNING = re.compile(r"\.py:\d+: \w*Warning")
#: matplotlib's message when a font of its cache is missing (a stale font cache on the executing machine)
FONT_FALLBACK = "findfont: "
# a date and a time, as papermill and Jupyter write them ("2026-11-22T20:37:32.775667+00:00") or printed
TIMESTAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")

# run logs (issue 16, items 2 and 9): a per-run line of helpers.training.train_run (and its wrapped second
# line), a suite's summary line (helpers.training.summary_line) and the once-per-process warning
RUN_LISTING_LINE = re.compile(
    r"^.+: (?:stored run \S+/[0-9a-f]{20}|loaded from the run cache \()|^  \(trained on .+ s\)"
)
STALE_RUN_WARNING = "come from older training code"
STALE_MARK = "(*)"

# the machinery a main flow does not print (issue 28, item 3), each with the words a problem names it by
MACHINERY: dict[str, re.Pattern] = {
    "a hex hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{12,}\b"),
    "an md5": re.compile(r"\bmd5\b", re.IGNORECASE),
    "the data folder": re.compile(r"\$CALIBMED_DATA_DIR|\bdata directory\b"),
    "a results path": re.compile(r"\bresults/\S*\.json\b|\bresults written to\b"),
    "a compute time": re.compile(r"\bcompute time\b", re.IGNORECASE),
    "a settings dump": re.compile(r"\bknobs: |profile '[\w-]+', dataset '[\w-]+'|profile='[\w-]+'.*?dataset="),
    "a training version": re.compile(r"\btraining version\b"),
    "a per-run log line": RUN_LISTING_LINE,
    'a "(*)" mark': re.compile(re.escape(STALE_MARK)),
    "the older-training-code warning": re.compile(re.escape(STALE_RUN_WARNING)),
    "a raw log line": re.compile(r"\b(?:train|val)_[a-z_]+=\d"),
}
# a line of provenance: course.provenance's line (helpers.training.run_log.provenance_line, after a profile other than
# the reference one) or an old suite summary (helpers.training.run_log.summary_line)
PROVENANCE_LINE = re.compile(
    r"^(?:\w+ profile · )?(?:\d+ (?:stored runs?|runs? from the run cache|runs? trained here)\b|"
    r"\d+ (?:stored runs loaded|runs loaded from the run cache)\b|.* · no trained model loaded$)"
)
MAX_PROVENANCE_LINES = 1
MAIN_FLOW_HIDDEN_TAGS = ("expert", "hide-cell", "remove-cell")
DETAILS_CALL = re.compile(r"\b(?:course\.)?details\(")

RULES = (
    "no_progress_bars",
    "no_absolute_paths",
    "no_timestamps",
    "no_raw_warnings",
    "no_long_lines",
    "no_widget_state",
    "outputs_size",
    "no_errors",
    "title_summary_licence",
    "one_parameters_cell",
    "takeaway_cell",
    "main_flow_quiet",
    "one_provenance_line",
    "run_details_folded",
    "no_run_folder_injected",
    "parameters_hidden",
    "solutions_collapsed",
    "main_flow_outputs_open",
    "main_flow_words",
    "main_flow_cells",
    "no_printed_lists",
    "human_table_headers",
)

MAX_MAIN_FLOW_WORDS = 2_500
MAX_MAIN_FLOW_WORDS_00 = 1_800
MAX_CELL_WORDS = 350
EXPERT_TAG = "expert"
EXPERT_BLOCK = re.compile(r"<details\b.*?</details>", re.DOTALL | re.IGNORECASE)
WORD = re.compile(r"[^\W_](?:[\w'’-]*\w)?")
# a Python list or dict of strings as repr() prints it: "['LS α=0.1 +4.4', …]", "{'ece': 0.1}"
PRINTED_LIST = re.compile(r"[\[{(]\s*'[^'\n]*'\s*[,:]|[\[{]\s*\"[^\"\n]*\"\s*[,:]")
# a header that is a snake_case key, alone or with a unit: "val_ece", "map_per_class (%)", "multilabel_brier"
RAW_KEY = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?:\s*\([^)]*\))?$")
TABLE_HEADER = re.compile(r"<th\b[^>]*>(.*?)</th>", re.DOTALL | re.IGNORECASE)

PARAMETER_TAGS = ("parameters", "injected-parameters")
HIDDEN_TAG = "remove-cell"  # MyST-NB: the website shows neither the cell nor its outputs
SOLUTION_TAG = "solution"
COLLAPSED_TAG = "hide-input"  # MyST-NB: the code folded under a toggle, the outputs shown
INJECTED_TAG = "injected-parameters"
# a value naming one run's folder, an absolute path or a home folder
LOCAL_FOLDER = re.compile(r"(?:^|/)runs/|^/|^~")


# ----------------------------------------------------------------------------------------------------------------
# reading


def joined_text(value: Any) -> str:
    """A stored text as one string: nbformat stores a source or an output as one string or as a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value)


def text_outputs(nb: dict) -> Iterator[tuple[int, dict, str, str]]:
    """(cell index, output, kind, text) for every text an output stores: ``stdout``/``stderr`` streams,
    the text MIME types of results and displays, and error tracebacks."""
    for index, cell in enumerate(nb.get("cells", [])):
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                yield index, output, output.get("name", "stdout"), joined_text(output.get("text", ""))
            elif kind in ("execute_result", "display_data"):
                for mime in TEXT_MIMES:
                    if mime in output.get("data", {}):
                        yield index, output, mime, joined_text(output["data"][mime])
            elif kind == "error":
                yield index, output, "error", "\n".join(output.get("traceback", []))


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from _strings(item, f"{where}[{position}]")
    elif isinstance(value, str):
        yield where, value


def notebook_strings(nb: dict) -> Iterator[tuple[str, str]]:
    """(where, text) for every string of the notebook's JSON — metadata, cell sources, outputs and their metadata —
    except image data (base64 PNGs, SVG drawings), which holds no path or time; ``where`` reads like
    ``metadata.papermill.input_path`` or ``cells[3].outputs[0].text[2]``."""
    for key, value in nb.items():
        if key != "cells":
            yield from _strings(value, key)
    for index, cell in enumerate(nb.get("cells", [])):
        for key, value in cell.items():
            if key != "outputs":
                yield from _strings(value, f"cells[{index}].{key}")
                continue
            for number, output in enumerate(value):
                for field, content in output.items():
                    if field == "data":
                        content = {mime: data for mime, data in content.items() if not mime.startswith("image/")}
                    yield from _strings(content, f"cells[{index}].outputs[{number}].{field}")


def _found_in_strings(nb: dict, pattern: re.Pattern) -> list[str]:
    """One problem per place (a text output, a cell's source, a metadata entry) where ``pattern`` matches."""
    found: dict[str, set[str]] = {}
    for where, text in notebook_strings(nb):
        matches = pattern.findall(text)
        if matches:
            place = re.sub(r"\[\d+\]$", "", where)  # the lines of one source or one stream count once
            found.setdefault(place, set()).update(matches)
    return [
        f"{place}: {', '.join(sorted(matches)[:3])}" + (" …" if len(matches) > 3 else "")
        for place, matches in found.items()
    ]


def output_bytes(nb: dict) -> int:
    """Bytes of all stored outputs, as compact UTF-8 JSON."""
    return sum(
        len(json.dumps(cell.get("outputs", []), ensure_ascii=False, separators=(",", ":")).encode())
        for cell in nb.get("cells", [])
    )


def _markdown(cell: dict) -> str:
    return joined_text(cell.get("source", "")) if cell.get("cell_type") == "markdown" else ""


def is_progress_output(output: dict) -> bool:
    """Whether an output is a progress bar: a tqdm redraw in a stream (or a carriage return), or a widget bar."""
    if output.get("output_type") == "stream":
        text = joined_text(output.get("text", ""))
        return bool(TQDM_BAR.search(text)) or "\r" in text
    plain = joined_text(output.get("data", {}).get("text/plain", ""))
    return WIDGET_VIEW in output.get("data", {}) and ("Progress(" in plain or plain.startswith("HBox("))


# ----------------------------------------------------------------------------------------------------------------
# the rules: each returns a list of problems, empty when the notebook keeps the rule


def no_progress_bars(nb: dict) -> list[str]:
    cells = sorted(
        {
            index
            for index, cell in enumerate(nb["cells"])
            for output in cell.get("outputs", [])
            if is_progress_output(output)
        }
    )
    count = sum(is_progress_output(o) for cell in nb["cells"] for o in cell.get("outputs", []))
    return [f"{count} progress-bar outputs in cells {cells}"] if count else []


def no_absolute_paths(nb: dict) -> list[str]:
    return _found_in_strings(nb, ABSOLUTE_PATH)


def no_timestamps(nb: dict) -> list[str]:
    return _found_in_strings(nb, TIMESTAMP)


def no_raw_warnings(nb: dict) -> list[str]:
    problems = []
    for index, _, kind, text in text_outputs(nb):
        if (kind == "stderr" and ("Warning" in text or FONT_FALLBACK in text)) or RAW_WARNING.search(text):
            first = next(line for line in text.splitlines() if "Warning" in line or FONT_FALLBACK in line)
            problems.append(f"cell {index} ({kind}): {first[:100]}")
    return problems


def no_long_lines(nb: dict) -> list[str]:
    problems = []
    for index, output, kind, text in text_outputs(nb):
        rich = set(output.get("data", {})) - {"text/plain"}
        if kind not in ("stdout", "stderr", "text/plain") or (kind == "text/plain" and rich):
            continue  # a text/plain that stands beside an HTML table or an image is not what is shown
        longest = max((len(line) for line in re.split(r"[\r\n]", text)), default=0)
        if longest > MAX_LINE:
            problems.append(f"cell {index} ({kind}): a line of {longest} characters")
    return problems


def no_widget_state(nb: dict) -> list[str]:
    state = nb.get("metadata", {}).get("widgets")
    return [f"metadata.widgets holds {len(json.dumps(state)):,} bytes of widget state"] if state else []


def outputs_size(nb: dict) -> list[str]:
    size = output_bytes(nb)
    return [f"{size:,} bytes of outputs > {MAX_OUTPUT_BYTES:,}"] if size > MAX_OUTPUT_BYTES else []


def no_errors(nb: dict) -> list[str]:
    return [
        f"cell {index}: {output.get('ename')}: {output.get('evalue', '')[:100]}"
        for index, output, kind, _ in text_outputs(nb)
        if kind == "error"
    ]


def title_summary_licence(nb: dict) -> list[str]:
    text = _markdown(nb["cells"][0]) if nb["cells"] else ""
    lines = [line for line in text.splitlines() if line.strip()]
    problems = []
    if not lines or not lines[0].startswith("# "):
        problems.append("the first cell is not a markdown cell starting with a '# title'")
    prose = [line for line in lines[1:] if not LICENCE.search(line)]
    if len(" ".join(prose)) < 100:
        problems.append("the first cell has no summary paragraph under the title")
    if not LICENCE.search(text):
        problems.append("the first cell does not state the licences (no 'licence', CC BY… or MIT)")
    return problems


def one_parameters_cell(nb: dict) -> list[str]:
    tagged = [i for i, cell in enumerate(nb["cells"]) if "parameters" in cell.get("metadata", {}).get("tags", [])]
    return [] if len(tagged) == 1 else [f"{len(tagged)} cells tagged 'parameters' ({tagged}); exactly one is needed"]


def takeaway_cell(nb: dict) -> list[str]:
    headed = any(re.search(r"^#+ .*takeaway", _markdown(cell), re.IGNORECASE | re.MULTILINE) for cell in nb["cells"])
    return [] if headed else ["no markdown cell headed 'Takeaway'"]


def _in_main_flow(cell: dict) -> bool:
    """Whether a cell is not tagged ``expert``, ``hide-cell`` or ``remove-cell``: the reader sees it unfolded."""
    return not set(MAIN_FLOW_HIDDEN_TAGS) & set(cell_tags(cell))


def main_flow_outputs(nb: dict) -> Iterator[tuple[int, str]]:
    """(cell index, text) of every text output of a main-flow code cell (:func:`_in_main_flow`)."""
    for index, _, _, text in text_outputs(nb):
        if _in_main_flow(nb["cells"][index]):
            yield index, text


def main_flow_quiet(nb: dict) -> list[str]:
    problems = []
    for index, text in main_flow_outputs(nb):
        for what, pattern in MACHINERY.items():
            found = next((line for line in text.splitlines() if pattern.search(line)), None)
            if found is not None:
                problems.append(f"cell {index} prints {what} in the main flow: {found.strip()[:80]}")
    return problems


def provenance_lines(nb: dict) -> list[tuple[int, str]]:
    """(cell index, line) of every main-flow line of provenance (``PROVENANCE_LINE``)."""
    return [
        (index, line)
        for index, text in main_flow_outputs(nb)
        for line in text.splitlines()
        if PROVENANCE_LINE.search(line.strip())
    ]


def one_provenance_line(nb: dict) -> list[str]:
    found = provenance_lines(nb)
    if len(found) <= MAX_PROVENANCE_LINES:
        return []
    cells = sorted({index for index, _ in found})
    return [f"{len(found)} provenance lines in the main flow (cells {cells}), at most {MAX_PROVENANCE_LINES}"]


def run_details_folded(nb: dict) -> list[str]:
    code = [(i, cell) for i, cell in enumerate(nb["cells"]) if cell.get("cell_type") == "code"]
    problems = []
    if not any("save_results(" in joined_text(cell.get("source", "")) for _, cell in code):
        problems.append("no cell calls course.save_results")
    calls = [i for i, cell in code if DETAILS_CALL.search(joined_text(cell.get("source", "")))]
    if len(calls) != 1:
        problems.append(f"{len(calls)} cells call course.details {calls}; exactly one is needed")
    problems += [
        f"cell {i} calls course.details but is not tagged {EXPERT_TAG!r}"
        for i in calls
        if EXPERT_TAG not in cell_tags(nb["cells"][i])
    ]
    return problems


def cell_tags(cell: dict) -> list[str]:
    """The tags of a cell (its ``metadata.tags``; none when absent)."""
    return cell.get("metadata", {}).get("tags", [])


def _injected_cells(nb: dict) -> list[dict]:
    return [cell for cell in nb["cells"] if INJECTED_TAG in cell_tags(cell)]


def no_run_folder_injected(nb: dict) -> list[str]:
    problems = []
    for cell in _injected_cells(nb):
        try:
            tree = ast.parse(joined_text(cell.get("source", "")))
        except SyntaxError as error:
            problems.append(f"the injected cell cannot be parsed ({error.msg}): re-execute the notebook")
            continue
        problems += [
            f"the injected cell names a local folder: {node.value!r} (course publish names the committed results)"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and LOCAL_FOLDER.search(node.value)
        ]
    recorded = nb.get("metadata", {}).get("papermill", {}).get("parameters", {})
    problems += [
        f"metadata.papermill.parameters.{name} names a local folder: {value!r} (course publish names the committed "
        "results)"
        for name, value in recorded.items()
        if isinstance(value, str) and LOCAL_FOLDER.search(value)
    ]
    return problems


def parameters_hidden(nb: dict) -> list[str]:
    shown = [i for i, cell in enumerate(nb["cells"]) if set(PARAMETER_TAGS) & set(cell_tags(cell))]
    shown = [i for i in shown if HIDDEN_TAG not in cell_tags(nb["cells"][i])]
    return [f"parameter cells {shown} are not tagged {HIDDEN_TAG!r} (clean-outputs adds it)"] if shown else []


def solutions_collapsed(nb: dict) -> list[str]:
    shown = [
        i
        for i, cell in enumerate(nb["cells"])
        if SOLUTION_TAG in cell_tags(cell) and COLLAPSED_TAG not in cell_tags(cell)
    ]
    return [f"solution cells {shown} are not tagged {COLLAPSED_TAG!r} (clean-outputs adds it)"] if shown else []


def main_flow_outputs_open(nb: dict) -> list[str]:
    folded = [
        i
        for i, cell in enumerate(nb["cells"])
        if cell.get("cell_type") == "code"
        and _in_main_flow(cell)
        and cell.get("metadata", {}).get("jupyter", {}).get("outputs_hidden")
    ]
    return (
        [f"main-flow code cells {folded} have their outputs folded in JupyterLab (clean-outputs unfolds them)"]
        if folded
        else []
    )


def _notebook_number(nb: dict) -> str | None:
    title = _markdown(nb["cells"][0]) if nb.get("cells") else ""
    found = re.match(r"#\s*(\d{2})\b", title)
    return found.group(1) if found else None


def main_flow_text(cell: dict) -> str:
    """The markdown a student reads in the main flow: the cell's prose outside its expert blocks."""
    if EXPERT_TAG in cell_tags(cell):
        return ""
    return EXPERT_BLOCK.sub(" ", _markdown(cell))


def count_words(text: str) -> int:
    """Words of markdown prose (math symbols and markup are not words; a number is)."""
    return len(WORD.findall(re.sub(r"<[^>]+>|\]\([^)]*\)", " ", text)))


def main_flow_word_counts(nb: dict) -> list[int]:
    """Main-flow words of each cell (0 for code cells and expert material)."""
    return [count_words(main_flow_text(cell)) for cell in nb.get("cells", [])]


def main_flow_words(nb: dict) -> list[str]:
    limit = MAX_MAIN_FLOW_WORDS_00 if _notebook_number(nb) == "00" else MAX_MAIN_FLOW_WORDS
    total = sum(main_flow_word_counts(nb))
    return (
        [f"{total:,} words of main-flow markdown > {limit:,}: fold expert material into <details>"]
        if total > limit
        else []
    )


def main_flow_cells(nb: dict) -> list[str]:
    return [
        f"markdown cell {index} has {words} main-flow words > {MAX_CELL_WORDS}"
        for index, words in enumerate(main_flow_word_counts(nb))
        if words > MAX_CELL_WORDS
    ]


def no_printed_lists(nb: dict) -> list[str]:
    return [
        f"cell {index} prints a Python list or dict: {found.group()[:40]}…"
        for index, _, kind, text in text_outputs(nb)
        if kind in ("stdout", "text/plain")
        for found in [PRINTED_LIST.search(text)]
        if found
    ]


def table_headers(nb: dict) -> Iterator[tuple[int, str]]:
    """(cell index, text) of every header cell of an HTML table in the outputs (pandas' DataFrames)."""
    for index, _, kind, text in text_outputs(nb):
        if kind == "text/html":
            for header in TABLE_HEADER.findall(text):
                yield index, re.sub(r"<[^>]+>", "", header).strip()


def human_table_headers(nb: dict) -> list[str]:
    return [
        f"cell {index}: table header {header!r} is a raw key"
        for index, header in table_headers(nb)
        if RAW_KEY.match(header)
    ]


def check_notebook(nb: dict) -> dict[str, list[str]]:
    """Every rule's problems for one notebook (as loaded by ``json.load`` or ``nbformat.read``)."""
    return {rule: globals()[rule](nb) for rule in RULES}


def report_table(paths: list[Path]) -> str:
    """A markdown table: per notebook, bytes of outputs and the problems of each failing rule."""
    lines = ["| notebook | output bytes | failing rules |", "|---|---:|---|"]
    for path in paths:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        failing = {rule: problems for rule, problems in check_notebook(nb).items() if problems}
        detail = "; ".join(
            f"{rule}: {problems[0]}" + (f" (+{len(problems) - 1})" if len(problems) > 1 else "")
            for rule, problems in failing.items()
        )
        lines.append(f"| {Path(path).stem} | {output_bytes(nb):,} | {detail or 'none'} |")
    return "\n".join(lines)
