"""What each course knob may be: one table of rules, checked by :func:`helpers.course.configure` for every knob of
a notebook run (the parameters a reader or papermill passes, and the profile's own values).

A knob named in :data:`RULES` gets its type and range from there; a notebook-specific knob that is not gets its
type from the values the notebook's ``PROFILES`` table gives it (an integer knob stays an integer, a list a list).
Booleans never pass for numbers (``lr=True`` is not a rate), and text never passes for a number (``lr="0.1"``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Rule:
    """What a knob may be: ``description`` completes "<knob> must be ..."; ``optional`` lets ``None`` through (a
    profile's "not used" / "all")."""

    description: str
    accepts: Callable[[Any], bool]
    optional: bool = False


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(minimum: int, optional: bool = False) -> Rule:
    return Rule(f"an integer >= {minimum}", lambda v: _is_integer(v) and v >= minimum, optional)


def number(minimum: float, maximum: float | None = None, above_minimum: bool = False) -> Rule:
    """A finite real number in [minimum, maximum] (or above ``minimum`` when ``above_minimum``)."""
    low = f"> {minimum:g}" if above_minimum else f">= {minimum:g}"
    description = f"a number {low}" + (f" and <= {maximum:g}" if maximum is not None else "")

    def accepts(value: Any) -> bool:
        return (
            _is_number(value)
            and (value > minimum if above_minimum else value >= minimum)
            and (maximum is None or value <= maximum)
        )

    return Rule(description, accepts)


def text() -> Rule:
    return Rule("non-empty text", lambda v: isinstance(v, str) and v.strip() != "")


def path(optional: bool = False) -> Rule:
    return Rule("a path (text)", lambda v: isinstance(v, (str, os.PathLike)) and os.fspath(v) != "", optional)


def list_of(item: Rule, distinct: str = "") -> Rule:
    """A non-empty list of items of the rule ``item``; with ``distinct`` (what a repeat would do), no item twice."""
    return Rule(
        f"a non-empty list, each item {item.description}" + (f", each once ({distinct})" if distinct else ""),
        lambda v: (
            isinstance(v, list)
            and len(v) > 0
            and all(item.accepts(x) for x in v)
            and (not distinct or len(set(v)) == len(v))
        ),
    )


#: the devices :func:`helpers.training.resolve_device` takes (whether one is present is checked when training)
DEVICE_PATTERN = re.compile(r"auto|cpu|mps|cuda(:[0-9]+)?")


def device() -> Rule:
    return Rule(
        "one of 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'",
        lambda v: isinstance(v, str) and DEVICE_PATTERN.fullmatch(v) is not None,
    )


def plain(value: Any) -> Any:
    """A knob's value with numpy scalars as Python ones (``np.int64(3)`` -> 3, also inside lists): a seed from
    ``numpy`` is an integer, and the results JSON takes only Python numbers. numpy booleans stay as they are (a
    boolean is never a number)."""
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


COUNT = integer(1)
RATE = number(0.0, above_minimum=True)
WEIGHT = number(0.0)
PROBABILITY = number(0.0, 1.0)
REPEATED_SEED = "a repeated seed would be counted twice in the mean and sd over seeds"

#: the rules of the course knobs and of the notebook knobs that several notebooks share or that need a range
RULES: dict[str, Rule] = {
    "dataset": text(),
    "model": text(),
    "device": device(),
    "data_dir": path(optional=True),
    "results_path": path(),
    "image_size": integer(8),
    "epochs": COUNT,
    "batch_size": COUNT,
    "lr": RATE,
    "seed": integer(0),
    "max_train": integer(1, optional=True),
    "seeds": list_of(integer(0), distinct=REPEATED_SEED),
    "overfit_seeds": list_of(integer(0), distinct=REPEATED_SEED),  # the over-fitting recipe's (06), a prefix of seeds
    # notebook knobs: counts of images, resamples, repeats, epochs, iterations
    "timing_images": COUNT,
    "bootstrap_samples": COUNT,
    "band_bootstrap": COUNT,
    "bias_repeats": COUNT,
    "smooth_repeats": COUNT,
    "smooth_bootstrap": COUNT,
    "eta_grid": integer(2),
    "lpr_bias_images": COUNT,
    "overfit_epochs": COUNT,
    "max_queries": COUNT,
    "max_length": COUNT,
    "posthoc_max_iter": COUNT,
    "ideal_images": integer(1, optional=True),
    # loss hyper-parameters: rates > 0, weights and exponents >= 0, smoothing factors in [0, 1]
    "lr_ccl": RATE,
    "ccl_b": RATE,  # CCL-Net's distance b (eq. 1); 2 unless the fair contest (helpers.lessons.tuning) sets it
    "synthetic_lr_ccl": RATE,
    "margin": RATE,
    "gamma": WEIGHT,
    "dca_beta": WEIGHT,
    "mdca_beta": WEIGHT,
    "mbls_lambda": WEIGHT,
    "lpr_weight": WEIGHT,
    "alpha": PROBABILITY,
    "lsplus_alpha": PROBABILITY,
    "sweep_margins": list_of(RATE),
    "sweep_lr_ccl": list_of(RATE),
    "smoothing_epsilons": list_of(PROBABILITY),
    "losses": list_of(text()),
    "independent_losses": list_of(text()),
    "site_losses": list_of(text()),
    "recipes": list_of(text()),
    "heldout_fraction": number(0.0, 1.0, above_minimum=True),
    "ccl_optimizer": text(),
    "sweep_recipe": text(),
    "overfit_model": text(),
    "synthetic_dataset": text(),
    "independent_dataset": text(),
}

_KINDS: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    ("true or false", lambda v: isinstance(v, bool)),
    ("an integer", _is_integer),
    ("a number", _is_number),
    ("text", lambda v: isinstance(v, str)),
    ("a list", lambda v: isinstance(v, list)),
    ("a mapping", lambda v: isinstance(v, dict)),
)


def _kind(value: Any) -> str | None:
    return next((name for name, accepts in _KINDS if accepts(value)), None)


def inferred_rule(profile_values: Iterable[Any]) -> Rule | None:
    """The rule of a knob :data:`RULES` does not name: the kind of value its profiles give it (integers and
    floats together make a number), or None when the profiles give no value or values of several kinds."""
    values = list(profile_values)
    kinds = {_kind(value) for value in values if value is not None}
    if kinds == {"an integer", "a number"}:
        kinds = {"a number"}
    if len(kinds) != 1 or None in kinds:
        return None
    [kind] = kinds
    return Rule(kind, dict(_KINDS)[kind], optional=any(value is None for value in values))


def rule_for(name: str, profiles: Mapping[str, Mapping[str, Any]]) -> Rule | None:
    """The rule a knob is checked against: :data:`RULES`, else what the notebook's profiles give it."""
    return RULES.get(name) or inferred_rule(profile[name] for profile in profiles.values() if name in profile)


def problems(values: Mapping[str, Any], profiles: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per knob whose value its rule refuses: the knob, the value (and its type) and what is allowed."""
    found = []
    for name, value in values.items():
        rule = rule_for(name, profiles)
        if rule is None or (value is None and rule.optional) or rule.accepts(value):
            continue
        found.append(f"{name}={value!r} ({type(value).__name__}): {name} must be {rule.description}")
    return found


def check(notebook: str, values: Mapping[str, Any], profiles: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise a ValueError listing every knob of ``values`` that breaks its rule, and how to fix it."""
    found = problems(values, profiles)
    if found:
        raise ValueError(
            f"{notebook}: knob value(s) not allowed:\n  "
            + "\n  ".join(found)
            + "\nPass allowed values (papermill -p NAME VALUE, or `course run -p NAME VALUE` with VALUE "
            "as JSON, e.g. -p lr 0.05) or fix the notebook's PROFILES table."
        )


def check_results_path(notebook: str, value: Any) -> None:
    """Raise a ValueError now, not after the notebook ran, when the results JSON cannot be written at ``value``:
    it is a folder, a file is where one of its folders would be, or its folder is read-only to this user."""
    path = Path(os.fspath(value)).absolute()
    fix = f"pass a results_path in a folder this user can write, e.g. runs/results/{notebook}.json"
    if path.is_dir():
        raise ValueError(f"{notebook}: results_path={value!r} is a folder; it names the results JSON file. {fix}")
    folder = path.parent
    while not os.path.exists(folder) and folder != folder.parent:
        folder = folder.parent  # the folders that do not exist yet are created when the results are written
    if not folder.is_dir():
        raise ValueError(f"{notebook}: results_path={value!r}: {folder} is a file, not a folder. {fix}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{notebook}: results_path={value!r}: this user cannot write into {folder}. {fix}")
