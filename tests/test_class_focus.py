"""Issue 18: class-specific metrics (melanoma recall) exist only on a data set that has the class."""

import pytest
import torch

from helpers import metrics
from helpers.data import ISIC_CLASS_NAMES
from helpers.metrics import class_focus

DERMA = [
    "actinic keratoses and intraepithelial carcinoma",
    "basal cell carcinoma",
    "benign keratosis-like lesions",
    "dermatofibroma",
    "melanoma",
    "melanocytic nevi",
    "vascular lesions",
]
PNEUMONIA = ["normal", "pneumonia"]


def test_melanoma_recall_is_the_recall_of_the_class_named_melanoma_wherever_it_sits():
    probs = torch.eye(7)[[4, 4, 0, 0, 1]]  # predicts class 4 for the first two images, class 0 for the next two
    labels = torch.tensor([4, 0, 4, 0, 1])
    derma = class_focus.class_recall_metrics(DERMA)["melanoma_recall"](probs, labels)
    isic = class_focus.class_recall_metrics(ISIC_CLASS_NAMES)["melanoma_recall"](probs, labels)
    assert derma == pytest.approx(0.5) == metrics.class_recall(probs, labels, class_index=4)
    assert isic == pytest.approx(0.5) == metrics.class_recall(probs, labels, class_index=0)
    assert (
        class_focus.class_index(DERMA, "Melanoma") == 4 and class_focus.class_index(ISIC_CLASS_NAMES, "melanoma") == 0
    )


def test_a_data_set_without_melanoma_has_no_melanoma_recall_and_its_columns_are_dropped():
    assert class_focus.class_recall_metrics(PNEUMONIA) == {}
    assert class_focus.class_index(PNEUMONIA, "melanoma") is None
    columns = ["accuracy", "auroc_ovr", "melanoma_recall", "ece"]
    assert class_focus.available(columns, PNEUMONIA) == ["accuracy", "auroc_ovr", "ece"]
    assert class_focus.available({"melanoma_recall": 1, "nll": 2}, PNEUMONIA) == {"nll": 2}
    assert not class_focus.has_metric("melanoma_recall", PNEUMONIA)


def test_on_dermamnist_nothing_is_dropped_and_the_order_is_kept():
    columns = ["accuracy", "auroc_ovr", "macro_f1", "cohen_kappa", "melanoma_recall"]
    assert class_focus.available(columns, DERMA) == columns
    table = {"ece": "ECE", "melanoma_recall": "mel.", "nll": "NLL"}
    assert list(class_focus.available(table, DERMA).items()) == list(table.items())
    assert class_focus.has_metric("melanoma_recall", DERMA) and class_focus.has_metric("ece", PNEUMONIA)


def test_class_names_and_names_of_the_wrong_kind_are_refused_with_what_to_pass():
    with pytest.raises(TypeError, match="class_names must be a sequence of class names"):
        class_focus.class_recall_metrics("melanoma")
    with pytest.raises(TypeError, match="names must be a list of metric names or a dict"):
        class_focus.available("melanoma_recall", DERMA)
