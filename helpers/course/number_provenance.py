"""Number provenance (issue 28, item 2): every decimal number the main-flow prose quotes is printed above it.

A student who reads "the cross-entropy ECE is 0.041" must be able to find 0.041 in an output they have already
read, in the same notebook and outside the folded expert material. ``unprinted_numbers`` lists each number that
breaks the rule; ``tests/test_number_provenance.py`` runs it on every committed notebook.

What counts:

* **Quoted**: each decimal number (``0.041``, ``76.2``, ``−2.2``, ``1,234.5``) in the main flow of a markdown cell
  (the prose outside ``<details>`` expert blocks of a cell not tagged ``expert``, as
  :func:`helpers.course.output_rules.main_flow_text` reads it), outside ``$math$``, code spans, link targets,
  licence names ("CC BY-NC 4.0") and section references ("section 3.2", "sec. 4 and 5.3", "§5.1"), and each
  count written with a thousands separator ("7,007 training images": a fact of the data the student should find
  printed). Other integers are not checked: they are seeds, sizes and section numbers far more often than results.
* **Printed**: every number in the text outputs (streams, plain text, HTML and markdown displays) of the code cells
  above the markdown cell that are in the main flow — not tagged ``expert`` (nor ``hide-cell``, ``hide-output``,
  ``remove-cell``, ``remove-output``, which fold or remove the output) — with ``<details>`` blocks of an HTML output
  left out.
* **Match**: a printed number with at least as many decimals as the quoted one that rounds to it (half up, or half
  to even as Python's format does: a printed 0.6184 supports 0.62 and 0.618, a printed 0.62 does not support 0.620);
  a number quoted as a percentage ("76.2 %") also matches a printed fraction times 100 (0.7621). Signs are ignored
  (prose writes −2.2 where a table prints -2.2 or a column is headed "drop").
* **Constants** in :data:`ALLOWED_CONSTANTS` (hyper-parameters and textbook values a notebook sets rather than measures)
  need no print; each entry says why it is there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

from helpers.course import output_rules

# a decimal number with an optional sign and thousands commas, not part of a word, a version ("1.2.3") or an
# identifier ("v2.1b3"); the minus sign may be the typographic one (U+2212)
PROSE_DECIMAL = re.compile(r"(?<![\w.])[−+-]?\d[\d,]*\.\d+(?![\w.]*\d)")
# a count written with a thousands separator ("7,007", "1,234,567"), not part of a decimal or a word
PROSE_COUNT = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w.,]*\d)")
# any number a cell prints, integers included (a prose 12.0 is not supported by a printed 12: too few decimals)
PRINTED_NUMBER = re.compile(r"(?<![\w.])[−+-]?\d[\d,]*(?:\.\d+)?(?![\w.]*\d)")
# what the prose says that is not prose: display and inline math, code spans, link targets, HTML tags, licences,
# and references to a paper's sections ("section 3.2", "sec. 4 and 5.3", "§5.1"), which are names, not results
NOT_PROSE = re.compile(
    r"\$\$.*?\$\$|\$[^$\n]+\$|`[^`]*`|\]\([^)]*\)|<[^>]+>|\bCC[- ]BY(?:[- ](?:NC|SA|ND))*[- ]\d\.\d"
    r"|(?:\b[Ss]ections?|\b[Ss]ecs?\.|§)\s*\d+(?:\.\d+)*(?:\s*(?:,|and|or|–)\s*\d+(?:\.\d+)*)*",
    re.DOTALL,
)
# a percentage: the number followed by "%", with or without a (narrow, no-break) space
PERCENT_AFTER = re.compile(r"^[\s\u00a0\u202f]*%")
FOLDED_OUTPUT = re.compile(r"<details\b.*?</details>", re.DOTALL | re.IGNORECASE)

# tags that fold or remove a code cell's outputs on the website (MyST-NB) or mark them expert material
HIDDEN_OUTPUT_TAGS = frozenset({output_rules.EXPERT_TAG, "hide-cell", "hide-output", "remove-cell", "remove-output"})

# The reviewed allow-list: numbers the prose may quote without a print, because the notebook sets them (a knob, a
# textbook value) rather than measures them. Keep it short: a measured result never belongs here.
ALLOWED_CONSTANTS: dict[str, str] = {
    # worked examples the prose sets up in words (00's "0.9 melanoma", a triage threshold, 10's small posteriors)
    "0.9": "00's opening example forecast ('0.9 melanoma'); 06's recipe table: SGD momentum 0.9",
    "0.1": "00's example triage threshold; the label-smoothing weight alpha = 0.1 (Müller et al. 2019); 06's peak lr",
    "0.01": "10's example of a small posterior (0.01 against 0.1) whose log the focal/ASL optimum compresses",
    # settings of a method or a recipe, taken from its paper or the course's training recipes
    "0.2": "FLSD-53's switch point: gamma = 5 where p_y < 0.2, else 3 (Mukhoti et al. 2020)",
    "0.05": "02's slider step for alpha; 06's recipe table: the constant learning rate 0.05",
    "0.5": "02's slider step for gamma; the decision threshold of a binary label",
    "0.85": "06's recipe table: the one-cycle momentum range 0.85-0.95",
    "0.95": "06's recipe table: the one-cycle momentum range 0.85-0.95",
    # a unit, not a measurement: net benefit and biopsies "per 1,000 images"; 13's sample of 1,000 real X-rays
    "1000": "the unit of 'per 1,000 images' (net benefit, biopsies); 13's sample of 1,000 ChestX-ray14 images",
}


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def _plain(number: str) -> str:
    """The number without sign and thousands commas: ``"−1,234.50"`` → ``"1234.50"``."""
    return number.replace(",", "").lstrip("+-−")


def prose_numbers(markdown: str) -> list[tuple[str, bool]]:
    """(number, is a percentage) for each decimal number of a markdown text, in order, outside math, code spans,
    link targets, HTML tags and licence names; the number is written without sign and thousands commas."""
    if not isinstance(markdown, str):
        raise TypeError(f"prose_numbers reads markdown text, not {type(markdown).__name__}")
    prose = NOT_PROSE.sub(" ", markdown)
    found = sorted([*PROSE_DECIMAL.finditer(prose), *PROSE_COUNT.finditer(prose)], key=lambda match: match.start())
    return [(_plain(match.group()), bool(PERCENT_AFTER.match(prose[match.end() :]))) for match in found]


def visible_output_texts(cell: dict) -> Iterator[str]:
    """The text of each output of a code cell (streams and the text MIME types), folded ``<details>`` left out."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            yield output_rules.joined_text(output.get("text", ""))
        for mime in ("text/plain", "text/html", "text/markdown"):
            if mime in output.get("data", {}):
                yield FOLDED_OUTPUT.sub(" ", output_rules.joined_text(output["data"][mime]))


def printed_numbers(cell: dict) -> set[str]:
    """Every number (integers included) a code cell prints, without sign and thousands commas."""
    return {_plain(found) for text in visible_output_texts(cell) for found in PRINTED_NUMBER.findall(text)}


def output_in_main_flow(cell: dict) -> bool:
    """Whether a code cell's outputs are shown in the main flow (not expert, folded or removed)."""
    return not HIDDEN_OUTPUT_TAGS & set(output_rules.cell_tags(cell))


def printed_supports(printed: str, quoted: str, percent: bool = False) -> bool:
    """Whether a printed number supports a quoted one: it has at least the quoted decimals and rounds to it (half
    up or half to even); for a percentage, the printed number times 100 also counts."""
    target, decimals = Decimal(quoted), _decimals(quoted)
    quantum = Decimal(1).scaleb(-decimals)
    candidates = [(Decimal(printed), _decimals(printed))]
    if percent:
        candidates.append((Decimal(printed).scaleb(2), max(_decimals(printed) - 2, 0)))
    return any(
        places >= decimals and value.quantize(quantum, rounding=rounding) == target
        for value, places in candidates
        for rounding in (ROUND_HALF_UP, ROUND_HALF_EVEN)
    )


def quote_is_supported(quoted: str, percent: bool, printed: Iterable[str]) -> bool:
    """Whether a quoted number is an allowed constant or supported by one of the printed numbers."""
    return quoted in ALLOWED_CONSTANTS or any(printed_supports(value, quoted, percent) for value in printed)


def unprinted_numbers(nb: dict) -> list[str]:
    """One problem per decimal number of the main-flow prose that no main-flow output above it supports, saying
    whether it is printed further down or in no main-flow output at all (then: in a folded cell, or nowhere)."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("unprinted_numbers reads a notebook as json.load or nbformat.read returns it (with 'cells')")
    cells = nb["cells"]
    shown = [output_in_main_flow(cell) and cell.get("cell_type") == "code" for cell in cells]
    everywhere = {number for cell, visible in zip(cells, shown) if visible for number in printed_numbers(cell)}
    above: set[str] = set()
    problems = []
    for index, cell in enumerate(cells):
        if shown[index]:
            above |= printed_numbers(cell)
        if cell.get("cell_type") != "markdown":
            continue
        for quoted, percent in prose_numbers(output_rules.main_flow_text(cell)):
            if quote_is_supported(quoted, percent, above):
                continue
            where = "printed only below it" if quote_is_supported(quoted, percent, everywhere) else "not printed"
            written = f"{int(quoted):,}" if "." not in quoted else quoted  # a count as the prose writes it
            problems.append(f"markdown cell {index}: {written}{' %' if percent else ''} is {where} in the main flow")
    return problems
