"""What the figures of :mod:`helpers.plots` share: the palette, the two gap marks of a reliability diagram, and the
small helpers that pick the axes, convert tensors and place labels and legends (beside the axes, below them, or
below the whole figure, always off the data)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from mpl_toolkits.axes_grid1 import make_axes_locatable

__all__ = [
    "ACCURACY_COLOR",
    "GAP_COLOR",
    "UNDER_GAP_COLOR",
    "OVER_GAP_COLOR",
    "GAP_EDGE_COLOR",
    "OVER_GAP_LABEL",
    "UNDER_GAP_LABEL",
    "ModelStyle",
    "MODEL_STYLES",
    "MULTICLASS_MODELS",
    "MULTILABEL_MODELS",
    "FALLBACK_COLORS",
    "MIN_GAP_DISTANCE",
    "normalise_model_name",
    "model_style",
    "figure_styles",
]

ACCURACY_COLOR = "#4C72B0"
GAP_COLOR = "#C44E52"  # "worse" in the interval plots, "incorrect" in selective prediction
#: the two gap marks of a reliability diagram add no hue, so no reader takes a gap for a model (red and orange gaps
#: were read as focal's pink and FLSD-53's orange): the over-confidence gap is a grey hatched box above the bar, the
#: under-confidence gap the top of the accuracy bar hatched in white (UNDER_GAP_COLOR is that hatch's colour)
OVER_GAP_COLOR = "#E0E0E0"
UNDER_GAP_COLOR = "#FFFFFF"
GAP_EDGE_COLOR = "#4D4D4D"
#: legend names of the two gap marks of a reliability diagram
OVER_GAP_LABEL = "over-confident gap (confidence above accuracy)"
UNDER_GAP_LABEL = "under-confident gap (accuracy above confidence)"


def figure_and_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is None:
        figure, ax = plt.subplots(figsize=figsize)
        return figure, ax
    return ax.figure, ax


def to_numpy(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def axis_below(ax: Axes) -> Axes:
    """A short axis under ``ax``, sharing its x (the histogram or density strip under a reliability diagram)."""
    return make_axes_locatable(ax).append_axes("bottom", size="25%", pad=0.1, sharex=ax)


def label_axes(ax: Axes, xlabel: str, ylabel: str | None = None, title: str | None = None, grid: bool = False) -> None:
    """Axis labels, the title (when given) and the small legend every line plot here ends with."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    if grid:
        ax.grid(alpha=0.3)


def gap_patch(label: str, linewidth: float = 0.5) -> Rectangle:
    """A patch of one gap mark, drawn as in :func:`helpers.plots.reliability_diagram` (also when no bin has that
    gap): a legend handle, or, with no size and ``linewidth=0``, a placeholder on axes whose bars have none of that
    gap."""
    if label == OVER_GAP_LABEL:
        style = {"facecolor": OVER_GAP_COLOR, "hatch": "//", "edgecolor": GAP_EDGE_COLOR}
    else:
        style = {"facecolor": ACCURACY_COLOR, "hatch": "\\\\", "edgecolor": UNDER_GAP_COLOR}
    return Rectangle((0.0, 0.0), 0.0, 0.0, linewidth=linewidth, label=label, **style)


def _legend_entries(axes: Sequence[Axes]) -> dict[str, Any]:
    """{label: handle} of the artists on ``axes``, first seen first; the gap marks as drawn patches."""
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label in (OVER_GAP_LABEL, UNDER_GAP_LABEL):
                handle = gap_patch(label)
            entries.setdefault(label, handle)
    # the gap marks right after the bars they belong to, wherever their placeholder patch was found
    gaps = [label for label in (OVER_GAP_LABEL, UNDER_GAP_LABEL) if label in entries]
    bars = [label for label, handle in entries.items() if label not in gaps and isinstance(handle, BarContainer)]
    order = bars + gaps + [label for label in entries if label not in bars and label not in gaps]
    return {label: entries[label] for label in order}


def legend_beside(ax: Axes, entries: Mapping[str, Any] | None = None) -> None:
    """The legend to the right of ``ax``, off the data."""
    entries = _legend_entries([ax]) if entries is None else entries
    ax.legend(
        list(entries.values()),
        list(entries),
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize="small",
        borderaxespad=0,
    )


def legend_below(ax: Axes, ncols: int = 2) -> None:
    """The legend under the axes, off the data."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=ncols, fontsize="small", frameon=False)


def figure_legend_below(figure: Figure, axes: Sequence[Axes], ncols: int = 2) -> None:
    """One legend for ``axes`` (entries by label, first seen first) centred below the figure, off every panel."""
    entries = _legend_entries(axes)
    if entries:
        figure.legend(
            list(entries.values()),
            list(entries),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncols=min(ncols, len(entries)),
            fontsize="small",
            frameon=False,
        )


# --- the course palette: one colour and marker per model, in every figure -------------------------------------------
#
# Base palette: Okabe & Ito (2008), "Color Universal Design" (black, bluish green #009E73, reddish purple #CC79A7,
# sky blue #56B4E9, orange #E69F00), extended with Paul Tol's colour-blind-safe "muted" scheme (indigo #332288,
# olive #999933, wine #882255, teal #44AA99, green #117733, cyan #88CCEE), an ochre #997700 and matplotlib's brown
# #8C564B. Within a family no two models are closer than CIELAB ΔE 20 (focal's pink and a mauve FLSD-53 were one
# colour to readers); the exact posteriors are teal: not the grey of the perfect-calibration diagonal, and not a
# purple that readers took for focal's pink. The product of the exact marginals is a dark olive #666633, told apart
# from the exact joint's teal (10's retrieval figure drew both).
# Okabe-Ito blue #0072B2 and vermillion #D55E00 are left out: they are within CIELAB ΔE 30 of ACCURACY_COLOR and of
# the gap colours, which belong to the reliability diagram alone (``MIN_GAP_DISTANCE``).


@dataclass(frozen=True)
class ModelStyle:
    """How one model is drawn: ``color`` and ``marker`` are the model's, ``linestyle`` "-" for a trained loss, "--"
    (with hollow markers) for a post-hoc variant of it ("LS + TS"), ":" (hollow) for its ideal output on the exact
    posteriors ("ideal ASL"), dash-dot and others for a second or third setting of it in one figure."""

    color: str
    marker: str
    linestyle: Any = "-"
    hollow: bool = False

    def line_kwargs(self, markers: bool = True) -> dict[str, Any]:
        """Keyword arguments of ``ax.plot`` / ``ax.errorbar`` for this model (``markers=False``: the line alone)."""
        kwargs: dict[str, Any] = {"color": self.color, "linestyle": self.linestyle}
        if markers:
            kwargs["marker"] = self.marker
            if self.hollow:
                kwargs["markerfacecolor"] = "none"
        return kwargs


#: {canonical model name: style}; colours are unique within the multi-class losses and within the multi-label
#: losses (``MULTICLASS_MODELS``, ``MULTILABEL_MODELS``), (colour, marker) pairs unique across the course except
#: the baseline: BCE is cross-entropy on multi-label outputs and shares its black circles.
MODEL_STYLES: dict[str, ModelStyle] = {
    "cross-entropy": ModelStyle("#000000", "o"),
    "LS": ModelStyle("#009E73", "s"),
    "focal": ModelStyle("#CC79A7", "^"),
    "MbLS": ModelStyle("#332288", "D"),
    "LS+": ModelStyle("#999933", "v"),
    "CCL-Net": ModelStyle("#56B4E9", "P"),
    "DCA": ModelStyle("#882255", "X"),
    "MDCA": ModelStyle("#8C564B", "*"),
    "BCE": ModelStyle("#000000", "o"),
    "ASL": ModelStyle("#E69F00", "<"),
    "ASL (detached)": ModelStyle("#E69F00", "<", "--", True),
    "SPA": ModelStyle("#117733", "d"),
    "SPA+LPR": ModelStyle("#88CCEE", "p"),
    "BCE+LPR": ModelStyle("#997700", "h"),
    "LDACE": ModelStyle("#332288", "H"),
    "LDACE+CCL": ModelStyle("#882255", "8"),
    "FLSD-53": ModelStyle("#E69F00", "h"),
    "class prior": ModelStyle("#999999", "x", ":"),
    "oracle": ModelStyle("#44AA99", "+", "-."),
    "exact marginals": ModelStyle("#666633", "x", ":"),
}
MULTICLASS_MODELS = ("cross-entropy", "LS", "focal", "FLSD-53", "MbLS", "LS+", "CCL-Net", "DCA", "MDCA")
#: the multi-label "focal" is asymmetric focal with (γ⁺, γ⁻) = (0, 4) (:func:`helpers.lessons.course_losses`): one
#: loss, one style, under either name
MULTILABEL_MODELS = ("BCE", "focal", "ASL", "SPA", "SPA+LPR", "BCE+LPR", "LDACE", "LDACE+CCL")
#: colours of names that are not models (seeds, estimators, links, recipes), used in order of appearance in a
#: figure: dark ends of ColorBrewer's colour-blind-safe BrBG and PRGn schemes and Tol's "light" pear, lavender and
#: sand, at least ΔE 15 from every model colour (so no curve that is not a model looks like one)
FALLBACK_COLORS = ("#543005", "#01665E", "#40004B", "#BBCC33", "#C2A5CF", "#00441B", "#ACD39E", "#EEDD88")
#: the smallest CIELAB ΔE (1976) between a model colour and ACCURACY_COLOR, GAP_COLOR or UNDER_GAP_COLOR
MIN_GAP_DISTANCE = 25.0

_ALIASES = {
    "ce": "cross-entropy",
    "cross entropy": "cross-entropy",
    "label smoothing": "LS",
    "focal loss": "focal",
    "ls+": "LS+",
    "ls plus": "LS+",
    "ccl": "CCL-Net",
    "ccl-net": "CCL-Net",
    "binary cross-entropy": "BCE",
    "asl detached": "ASL (detached)",
    "asl, detached": "ASL (detached)",
    "afl": "focal",
    "asymmetric focal": "focal",
    "asymmetric focal loss": "focal",
    "spa + lpr": "SPA+LPR",
    "bce + lpr": "BCE+LPR",
    "ldace + ccl": "LDACE+CCL",
    "constant": "class prior",
    "class-prior": "class prior",
    "prior": "class prior",
    "constant (class prior)": "class prior",
    "class-frequency predictor": "class prior",
    "exact posteriors": "oracle",
    "true probabilities": "oracle",
    "bayes": "oracle",
    "exact joint": "oracle",
    "exact joint posterior": "oracle",
    "flsd53": "FLSD-53",
    "flsd": "FLSD-53",
}
_LOOKUP = {**{name.lower(): name for name in MODEL_STYLES}, **_ALIASES}
#: a post-hoc suffix: "+ TS", "+ temperature scaling", "(TS)", a recovered read-out "+φ" / "+ψ", ...
_POSTHOC = re.compile(
    r"\s*(?:\+\s*(?:TS|VS|φ|ψ|temperature scaling|vector scaling|matrix scaling|Platt|isotonic|histogram binning)"
    r"|\((?:TS|post-hoc|temperature-scaled)\)|,?\s*temperature-scaled)\s*$",
    re.IGNORECASE,
)
# a hyper-parameter tail: "LS α=0.1", "focal (γ = 3)", "SPA (1,1,0,5,3,1)", "MbLS m=6, α=0.1", "SPA λ 0.5"
_PARAMETERS = re.compile(r"\s*(?:\((?!detached\))[^)]*\)|[^\s()]+\s*=\s*\S+,?|[αγλβm]\s*\d\S*,?)\s*$")


def normalise_model_name(name: str) -> tuple[str | None, str | None]:
    """(canonical model name or None when ``name`` is not a model of :data:`MODEL_STYLES`, variant): hyper-parameters
    dropped ("LS α=0.1" → "LS", "SPA (1,1,0,5,3,1)" → "SPA"), aliases resolved ("CE" → "cross-entropy"); the
    variant is "post-hoc" for a post-hoc suffix ("LS + TS", a recovered read-out "ASL+φ"), "ideal" for the ideal
    output of a loss on the exact posteriors ("ideal ASL"), else None. A name "model: what" ("SPA: derived link")
    is a curve of that model."""
    text = str(name).strip()
    variant = None
    if _POSTHOC.search(text):
        variant, text = "post-hoc", _POSTHOC.sub("", text)
    elif text.lower().startswith("ideal "):
        variant, text = "ideal", text[len("ideal ") :]
    while True:
        key = re.sub(r"\s+", " ", text.strip().lower())
        if key in _LOOKUP:
            return _LOOKUP[key], variant
        shorter = _PARAMETERS.sub("", text)
        if shorter == text and ":" in text:  # "SPA: derived link", "FLSD-53: where training rests": the model's
            shorter = text.split(":", 1)[0]
        if shorter == text or not shorter.strip():
            return None, variant
        text = shorter


def _variant_style(style: ModelStyle, variant: str | None) -> ModelStyle:
    """A post-hoc variant dashed, an ideal output dotted, both with hollow markers; the loss's colour and marker."""
    if variant is None:
        return style
    return replace(style, linestyle="--" if variant == "post-hoc" else ":", hollow=True)


def model_style(name: str) -> ModelStyle:
    """The course style of the model ``name`` (any spelling :func:`normalise_model_name` resolves); a variant
    ("LS + TS", "ideal ASL") has its loss's colour and marker, dashed (post-hoc) or dotted (ideal) and hollow.
    Raises KeyError for a name that is no model of :data:`MODEL_STYLES` (use :func:`figure_styles` for figures
    that mix in other curves)."""
    canonical, variant = normalise_model_name(name)
    if canonical is None:
        raise KeyError(f"{name!r} is no model of the course palette; known: {', '.join(MODEL_STYLES)}")
    return _variant_style(MODEL_STYLES[canonical], variant)


#: line styles of the second, third, ... setting of one model in one figure (the first keeps its own)
_REPEAT_LINESTYLES = ("-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))


def figure_styles(names: Sequence[str], avoid: Sequence[str] = ()) -> dict[str, ModelStyle]:
    """{name: style} for the curves of one figure: a model gets its :func:`model_style`; any other name (a seed,
    an estimator, a link, a recipe) the next of :data:`FALLBACK_COLORS` not used by a model of the figure, in the
    order given, with markers "o", "s", "^", ... — deterministic, so the same names in the same order look the
    same. A post-hoc variant of another name ("well-regularised + TS") takes that name's colour and marker, dashed;
    the second, third, ... setting of one model ("LS α=0.05", "LS α=0.3" after "LS α=0.1") keeps the model's
    colour and marker with a line style of its own (dash-dot, dotted, ...). ``avoid``: fallback colours this figure
    must not use because they mean something else in the same notebook (a notebook's recipes brown and teal, its
    estimators then from the colours after them); models keep their colours."""
    styles: dict[str, ModelStyle] = {}
    seen: dict[tuple[str | None, str | None], int] = {}
    for name in names:
        key = normalise_model_name(name)
        if key[0] is not None:
            styles[name] = model_style(name)
            # several settings of one model ("LS α=0.05", "LS α=0.1"): its colour, a line style each
            repeat = seen[key] = seen.get(key, -1) + 1
            if repeat:
                styles[name] = replace(
                    styles[name], linestyle=_REPEAT_LINESTYLES[(repeat - 1) % len(_REPEAT_LINESTYLES)]
                )
    taken = {style.color for style in styles.values()}
    unknown = [color for color in avoid if color not in FALLBACK_COLORS]
    if unknown:
        raise ValueError(f"avoid names colours that are not fallback colours: {unknown}; see FALLBACK_COLORS")
    free = [color for color in FALLBACK_COLORS if color not in taken and color not in avoid] or list(FALLBACK_COLORS)
    bases: dict[str, ModelStyle] = {}
    for name in names:
        if name in styles:
            continue
        variant = "post-hoc" if _POSTHOC.search(str(name)) else None
        base = _POSTHOC.sub("", str(name)).strip()
        if base not in bases:
            index = len(bases)
            line = ("-", "-.", ":")[index // len(free) % 3]
            bases[base] = ModelStyle(free[index % len(free)], "osD^vP"[index % 6], line)
        styles[name] = _variant_style(bases[base], variant)
    return {name: styles[name] for name in names}
