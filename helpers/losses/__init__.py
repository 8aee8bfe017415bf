"""Every loss of the course, importable as ``helpers.losses.NAME``.

Multi-class (``multiclass.py``): cross-entropy, label smoothing, focal / FLSD-53, MbLS, LS+, DCA / MDCA.
Multi-label (``multilabel.py``): BCE, asymmetric focal, ASL, phi recovery, SPA, LPR; (``multilabel_ldace.py``):
LDACE, canonical calibration loss. CCL-Net (``cclnet.py``) and the properness tools (``properness.py``: numerical
minimisers of the conditional risk, links, the recovery map φ). The per-class accuracy of a trained model (LS+'s
input) is :func:`helpers.training.class_accuracy_from_model`: running a model is training's business.

Imports only :mod:`helpers.utils` (and torch): the losses are the floor the training engine stands on.
"""

from helpers.losses.base import MULTI_CLASS, MULTI_LABEL, Composite, MultiClassLoss, MultiLabelLoss
from helpers.losses.cclnet import (  # noqa: F401
    CCLHead,
    CCLNetLoss,
    DictionaryFreezeRule,
    class_correlation_loss,
    normalised_squared_distance,
    pairwise_class_distances,
    soft_labels_from_dictionary,
    uniform_smoothing_epsilon,
)
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
    class_accuracy_from_predictions,
    class_frequencies,
    lsplus_soft_targets,
)
from helpers.losses.multilabel import (
    ASL,
    BCE,
    LPR,
    SPA,
    AsymmetricFocal,
    phi_recovery,
    spa_link_as_printed,
)
from helpers.losses.multilabel_ldace import LDACE, CanonicalCalibrationLoss, LDACEWithCCL
from helpers.losses.properness import (  # noqa: F401
    BrierScore,
    JointRiskMinimum,
    RiskMinimum,
    conditional_risk,
    conditional_risk_minimiser,
    gradient_implied_proba,
    gradient_masses,
    independent_label_distribution,
    inverse_link,
    joint_risk_minimiser,
    lpr_population_minimiser,
    negative_gradient_weight,
    negative_share,
    pairwise_expected_ldace,
    pairwise_risk_minimiser,
    partial_losses,
    stationary_point,
    weight_function,
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
    "normalised_squared_distance",
    "pairwise_class_distances",
    "soft_labels_from_dictionary",
    "class_correlation_loss",
    "uniform_smoothing_epsilon",
    "CCLHead",
    "DictionaryFreezeRule",
    "CCLNetLoss",
    "RiskMinimum",
    "JointRiskMinimum",
    "partial_losses",
    "conditional_risk",
    "conditional_risk_minimiser",
    "independent_label_distribution",
    "joint_risk_minimiser",
    "lpr_population_minimiser",
    "pairwise_expected_ldace",
    "pairwise_risk_minimiser",
    "BrierScore",
    "inverse_link",
    "weight_function",
    "gradient_masses",
    "negative_share",
    "negative_gradient_weight",
    "gradient_implied_proba",
    "stationary_point",
]
