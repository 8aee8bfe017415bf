"""Every loss of the course, importable as ``helpers.losses.NAME``.

Multi-class (``multiclass.py``): cross-entropy, label smoothing, focal / FLSD-53, MbLS, LS+, DCA / MDCA.
Multi-label (``multilabel.py``): BCE, asymmetric focal, ASL, phi recovery, SPA, LPR, LDACE, canonical calibration
loss. CCL-Net has its own module, ``helpers.losses.cclnet``.
"""

from helpers.losses.base import MULTI_CLASS, MULTI_LABEL, Composite, MultiClassLoss, MultiLabelLoss
from helpers.losses.multiclass import (
    DCA,
    FLSD53,
    MDCA,
    CrossEntropy,
    DCARegulariser,
    FocalLoss,
    LabelSmoothing,
    LSPlus,
    MbLS,
    MDCARegulariser,
    class_accuracy_from_model,
    class_accuracy_from_predictions,
    class_frequencies,
    lsplus_soft_targets,
)
from helpers.losses.multilabel import (
    ASL,
    BCE,
    LDACE,
    LPR,
    SPA,
    AsymmetricFocal,
    CanonicalCalibrationLoss,
    LDACEWithCCL,
    phi_recovery,
    spa_link_as_printed,
)

__all__ = [
    "MULTI_CLASS",
    "MULTI_LABEL",
    "Composite",
    "MultiClassLoss",
    "MultiLabelLoss",
    "CrossEntropy",
    "LabelSmoothing",
    "FocalLoss",
    "FLSD53",
    "MbLS",
    "LSPlus",
    "DCA",
    "MDCA",
    "DCARegulariser",
    "MDCARegulariser",
    "class_accuracy_from_model",
    "class_accuracy_from_predictions",
    "class_frequencies",
    "lsplus_soft_targets",
    "BCE",
    "AsymmetricFocal",
    "ASL",
    "phi_recovery",
    "SPA",
    "spa_link_as_printed",
    "LPR",
    "LDACE",
    "CanonicalCalibrationLoss",
    "LDACEWithCCL",
]
