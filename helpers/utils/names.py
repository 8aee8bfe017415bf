"""Display names: the words a notebook prints for the keys the code uses (issue 28, item 4).

One table for the whole course, low in the layers so that data, training, plots, lessons and the course all print the
same words: ``display_name("dataset", "synthetic_chestmnist")`` → "synthetic chest X-rays (coupled labels)". A key
the table does not know is a ``KeyError`` that names the kind and the known keys, so a new data set, site, recipe or
model cannot reach a printed output under its code name without a word for it. Figure legends and their colours are
:mod:`helpers.plots`' business (the course palette); this table only gives the words.
"""

from __future__ import annotations

from collections.abc import Mapping

DISPLAY_NAMES: dict[str, dict[str, str]] = {
    # data sets (helpers.data.load_dataset's names)
    "dataset": {
        "dermamnist": "DermaMNIST",
        "chestmnist": "ChestMNIST",
        "pathmnist": "PathMNIST",
        "octmnist": "OCTMNIST",
        "pneumoniamnist": "PneumoniaMNIST",
        "retinamnist": "RetinaMNIST",
        "breastmnist": "BreastMNIST",
        "bloodmnist": "BloodMNIST",
        "tissuemnist": "TissueMNIST",
        "organamnist": "OrganAMNIST",
        "organcmnist": "OrganCMNIST",
        "organsmnist": "OrganSMNIST",
        "chestxray14": "ChestX-ray14",
        "isic2018": "ISIC 2018",
        "isic2018_heldout": "ISIC 2018 (held-out lesions)",
        "isic2018_sites": "ISIC 2018 (split by acquisition site)",
        "synthetic_dermamnist": "synthetic skin-lesion set",
        "synthetic_chestmnist": "synthetic chest X-rays (coupled labels)",
        "synthetic_chestmnist_independent": "synthetic chest X-rays (independent labels)",
    },
    # acquisition sites of HAM10000 / ISIC 2018 (its metadata's ``dataset`` column, helpers.data.isic2018.SITES)
    "site": {
        "vidir_molemax": "Vienna, MoleMax camera",
        "vidir_modern": "Vienna, modern dermatoscopes",
        "vienna_dias": "Vienna, DIAS system",
        "rosendahl": "Queensland practice (Rosendahl)",
    },
    # training recipes (helpers.training.recipes.RECIPES)
    "recipe": {
        "well-regularised": "well-regularised",
        "over-fitting": "over-fitting",
    },
    # network architectures (helpers.training.models.MODEL_NAMES)
    "model": {
        "small_cnn": "small CNN",
        "small_cnn_wide": "wide small CNN",
        "resnet18": "ResNet-18",
        "resnet50": "ResNet-50",
    },
    # one word per DermaMNIST class (medmnist's label names), for table columns and heatmap axes (04, 05)
    "class_short": {
        "actinic keratoses and intraepithelial carcinoma": "actinic",
        "basal cell carcinoma": "basal",
        "benign keratosis-like lesions": "benign",
        "dermatofibroma": "dermatofibroma",
        "melanoma": "melanoma",
        "melanocytic nevi": "nevi",
        "vascular lesions": "vascular",
    },
}


def display_name(kind: str, key: str) -> str:
    """The words for ``key`` of ``kind`` ("dataset", "site", "recipe", "class_short" or "model"); a ``KeyError``
    naming the kind and the known keys for an unknown kind or key."""
    if kind not in DISPLAY_NAMES:
        raise KeyError(f"no display names of kind {kind!r}; kinds: {', '.join(DISPLAY_NAMES)}")
    names: Mapping[str, str] = DISPLAY_NAMES[kind]
    if key not in names:
        raise KeyError(
            f"no display name for the {kind} {key!r}: add it to helpers.utils.names.DISPLAY_NAMES "
            f"(known {kind} keys: {', '.join(names)})"
        )
    return names[key]


def short_class_names(class_names: list[str]) -> list[str]:
    """One word per class for table columns and heatmap axes ("melanocytic nevi" → "nevi"). A class the table does not
    shorten keeps its name: MedMNIST's class names are words already (another data set's "normal", "pneumonia")."""
    return [DISPLAY_NAMES["class_short"].get(name, name) for name in class_names]
