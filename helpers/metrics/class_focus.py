"""Class-specific metrics, reported only on a data set that has the class.

The multi-class notebooks report, beside the summary metrics, the recall of the class whose miss costs most:
melanoma on DermaMNIST and ISIC 2018 (HAM10000, Tschandl et al., 2018): a missed melanoma is a missed cancer.
Every notebook also runs on any other MedMNIST 2D data set (``-p dataset pneumoniamnist``), whose classes are
others: there such a column has no meaning, so it is left out rather than computed for whatever class happens to
sit at the same index. The class is found by its name in the data set's
``class_names``, never by a fixed index (melanoma is class 4 in DermaMNIST, class 0 in ISIC 2018).

The notebooks write their metric tables for DermaMNIST and pass them through :func:`available`, which drops the
columns of classes the data set lacks, so on DermaMNIST the tables are exactly what they were.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from helpers.metrics import classification

#: metric name -> the class (as named in a data set's ``class_names``) whose recall it is
CLASS_RECALLS: dict[str, str] = {"melanoma_recall": "melanoma"}

Names = TypeVar("Names", list, dict)


def _check_class_names(class_names: Sequence[str]) -> list[str]:
    if isinstance(class_names, str) or not all(isinstance(name, str) for name in class_names):
        raise TypeError(
            f"class_names must be a sequence of class names (a data set's bundle.class_names), got {class_names!r}"
        )
    return list(class_names)


def class_index(class_names: Sequence[str], class_name: str) -> int | None:
    """Index of ``class_name`` in ``class_names`` (case-insensitive), or None when the data set has no such
    class."""
    lowered = [name.lower() for name in _check_class_names(class_names)]
    return lowered.index(class_name.lower()) if class_name.lower() in lowered else None


def class_recall_metrics(class_names: Sequence[str]) -> dict[str, Callable[[Any, Any], float]]:
    """``{metric name: recall of its class}`` (:func:`helpers.metrics.class_recall`) for each class of
    :data:`CLASS_RECALLS` the data set has: ``{"melanoma_recall": ...}`` on DermaMNIST, ``{}`` on PneumoniaMNIST."""
    found = {metric: class_index(class_names, name) for metric, name in CLASS_RECALLS.items()}
    return {
        metric: functools.partial(classification.class_recall, class_index=index)
        for metric, index in found.items()
        if index is not None
    }


def has_metric(metric: str, class_names: Sequence[str]) -> bool:
    """Whether ``metric`` can be computed on a data set with these classes (always, unless it is the recall of a
    class the data set lacks)."""
    return metric not in CLASS_RECALLS or class_index(class_names, CLASS_RECALLS[metric]) is not None


def available(names: Names, class_names: Sequence[str]) -> Names:
    """``names`` (a list of metric names, or a dict keyed by them) without the class recalls of classes the data
    set lacks; same type, same order. On DermaMNIST nothing is dropped."""
    _check_class_names(class_names)
    if isinstance(names, Mapping):
        return {name: value for name, value in names.items() if has_metric(name, class_names)}
    if isinstance(names, (list, tuple)):
        return [name for name in names if has_metric(name, class_names)]
    raise TypeError(f"names must be a list of metric names or a dict keyed by them, got {type(names).__name__}")
