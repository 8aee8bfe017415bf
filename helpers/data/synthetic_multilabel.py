"""The ChestMNIST-like multi-label sets: 28x28 grayscale chest-like images, 14 findings in medmnist's order, and
exact posteriors given the template matches phi(x) of eq. (1) of :mod:`helpers.data.synthetic_common`:

* coupled given the image (``synthetic_chestmnist``):
      P(y | x) ∝ exp( sum_t (c_t + phi_t(x)) y_t + sum_{s<t} J_st y_s y_t )                               (3)
* independent given the image (``synthetic_chestmnist_independent``):
      P(y | x) = prod_t σ( c_t + phi_t(x) + sum_{k≠t} W_tk (phi_k(x) - mean phi_k) )  (shift folded into c)   (4)

Marginals of (3), and exact samples from its joint, come from the enumeration of
:mod:`helpers.data.pairwise_label_model`. The bundle's ground truth holds ``offsets`` c, ``mixing`` M = I + W (the
identity for (3)) and ``couplings`` J (zero for (4)), so the exact joint P(y | x) of any image is h(x) = c + M phi(x)
with J, by enumeration.

The chest labels are grounded in real data: ``helpers/data/data_files/chestxray14_label_stats.json`` holds the
prevalences and pairwise co-occurrence counts of the first 40,000 images (10,447 patients) of NIH ChestX-ray14
(Wang et al., CVPR 2017; see ``helpers.data.label_stats``). The findings drawn into an image come from the latent
maximum-entropy pairwise model with exactly these prevalences and co-occurrences (fitted by enumeration). The
posterior is then fitted on a fixed reference sample of 20,000 images (fixed seed) so that its *population*
statistics, the reference-sample averages of the exact posteriors E_x[P(y_t | x)] and E_x[P(y_s, y_t | x)], equal
the real ones: for (3) c and J jointly by convex moment matching (Newton, exact Hessian by enumeration;
``fit_pairwise_moments``); for (4) c and W by Gauss-Newton (``fit_independent_posterior``). Both match to
float precision (max relative prevalence error < 1e-10, max correlation error < 1e-10; tolerances tested: 10 %
and 0.02). In (3) labels are coupled given the image (``|J|`` up to 2.5: SPA's conditional-independence assumption 1,
Cheng & Vasconcelos CVPR 2024, fails); in (4) they are dependent only through the image (assumption 1 holds).
The fit is deterministic and cached per process (about 10-25 s per variant on 2 shared cores). The same reference
sample gives the population label co-occurrence and correlation.

Measured with the default sizes (20,000 / 2,500 / 5,000) and seed 0 on the 5,000 test images: coupled: macro AUROC
of the exact marginals 0.817, macro AP 0.384, 57.3 % of images without finding; independent: macro AUROC 0.818,
macro AP 0.379, 57.2 % without finding (ChestX-ray14: 57.7 %). Generating one chest set (27,500 images) takes about
4.5 s after the fit.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from medmnist import INFO
from scipy.special import expit, softmax

from helpers.data import label_stats
from helpers.data.bundle import MULTI_LABEL
from helpers.data.pairwise_label_model import (
    PairwiseEnumerator,
    fit_pairwise_moments,
    label_configurations,
    multilabel_expected_cooccurrence,
    multilabel_marginals,
)
from helpers.data.synthetic_common import (
    CHUNK_ROWS,
    IMAGE_SIZE,
    REFERENCE_SEED,
    REFERENCE_SIZE,
    PlacedTemplates,
    SyntheticDataset,
    SyntheticSplit,
    build_template_bank,
    check_split_sizes,
    one_blas_thread,
    pixel_grid,
    quantise,
    split_rngs,
)

CHEST_FINDINGS: list[str] = [INFO["chestmnist"]["label"][str(t)] for t in range(14)]
#: "coupled": labels coupled given the image (eq. 3, J != 0); "independent": independent given it (eq. 4)
CHEST_VARIANTS: tuple[str, ...] = ("coupled", "independent")
CHEST_NOISE = 0.06
CHEST_AMPLITUDE_RANGE = (0.4, 1.6)  # multiplies each finding's amplitude


def _chest_anatomy() -> np.ndarray:
    yy, xx = pixel_grid()

    def ellipse(cy: float, cx: float, ry: float, rx: float, soft: float = 1.0) -> np.ndarray:
        d = np.sqrt(((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2)
        return 1.0 / (1.0 + np.exp((d - 1.0) * min(ry, rx) / soft))

    body = ellipse(14.5, 13.5, 15, 12.5, 1.5)
    lungs = ellipse(12, 8, 8, 4.2) + ellipse(12, 19, 8, 4.2)
    heart = ellipse(18.5, 15, 5, 5.5)
    diaphragm = ellipse(27, 13.5, 5, 13)
    return 0.08 + 0.5 * body - 0.3 * lungs + 0.25 * heart + 0.2 * diaphragm


def _chest_findings() -> list[tuple[np.ndarray, list[tuple[int, int]], float, float]]:
    """(pattern centred at the image centre, allowed shifts, amplitude, beta) per finding, medmnist's order."""
    yy, xx = pixel_grid()
    cy0, cx0 = 14, 14

    def gauss(dy: float, dx: float, sy: float, sx: float | None = None) -> np.ndarray:
        sx = sy if sx is None else sx
        return np.exp(-((yy - cy0 - dy) ** 2 / (2 * sy**2) + (xx - cx0 - dx) ** 2 / (2 * sx**2)))

    def ellipse(ry: float, rx: float) -> np.ndarray:
        d = np.sqrt(((yy - cy0) / ry) ** 2 + ((xx - cx0) / rx) ** 2)
        return 1.0 / (1.0 + np.exp((d - 1.0) * min(ry, rx)))

    def at(points: list[tuple[float, float]]) -> list[tuple[int, int]]:
        return [(int(r - cy0), int(c - cx0)) for r, c in points]

    def both_sides(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return at(points + [(r, 27 - c) for r, c in points])

    lungs = both_sides([(r, c) for r in range(6, 21, 2) for c in range(5, 11, 2)])
    upper = both_sides([(r, c) for r in range(6, 14, 2) for c in range(5, 11, 2)])
    middle = both_sides([(r, c) for r in (13, 14, 15) for c in (6, 8, 10)])
    lower = both_sides([(r, c) for r in (17, 19) for c in (6, 8, 10)])
    periphery = both_sides([(r, c) for r in (6, 8, 10, 12) for c in (4, 5)])
    lungs_both = -(np.roll(ellipse(8, 4.2), (-2, -6), axis=(0, 1)) + np.roll(ellipse(8, 4.2), (-2, 5), axis=(0, 1)))
    # name order follows CHEST_FINDINGS; amplitude on the [0, 1] scale; beta tuned for Bayes AUROC ~0.75-0.9
    return [
        (gauss(0, 0, 0.8, 2.5), middle, 0.25, 2.6),  # atelectasis: plate-like band
        (ellipse(6.2, 7.2) - ellipse(5, 5.5), at([(18.5, 15)]), 0.18, 1.6),  # cardiomegaly: enlarged border
        (gauss(0, 0, 1.6, 2.2), at([(22, c) for c in (5, 7, 20, 22)]), 0.30, 1.6),  # effusion: costophrenic angles
        (gauss(0, 0, 3.0), lungs, 0.15, 1.2),  # infiltration: diffuse haze
        (gauss(0, 0, 2.0), upper, 0.30, 1.7),  # mass
        (gauss(0, 0, 0.9), lungs, 0.45, 5.0),  # nodule: small spot
        (gauss(0, 0, 2.5), lower, 0.20, 0.7),  # pneumonia: patchy haze
        (-gauss(0, 0, 2.0, 1.5), at([(r, c) for r in (5, 7) for c in (5, 7, 20, 22)]), 0.30, 2.6),  # pneumothorax
        (gauss(0, 0, 1.6, 2.2), lower, 0.30, 2.0),  # consolidation: dense patch
        (gauss(0, -4, 2.5, 2.0) + gauss(0, 4, 2.5, 2.0), at([(12, 14)]), 0.15, 1.0),  # edema: perihilar butterfly
        (lungs_both, [(0, 0)], 0.08, 0.9),  # emphysema: hyperlucent lungs
        (gauss(-1.5, 0, 2.5, 0.6) + gauss(1.5, 0, 2.5, 0.6), periphery, 0.30, 1.4),  # fibrosis: peripheral streaks
        (gauss(0, 0, 3.0, 0.7), at([(r, c) for r in (9, 12, 15) for c in (3, 24)]), 0.30, 2.7),  # pleural thickening
        (gauss(0, 0, 1.8), at([(20, 14)]), 0.30, 2.0),  # hernia: retrocardiac mass
    ]


@dataclass(frozen=True)
class SyntheticChestModel:
    """The ChestMNIST-like generator and its exact posterior, eqs. (1), (3) and (4).

    Images: findings drawn from the latent pairwise model P(z) ∝ exp(latent_fields·z + ½ zᵀ latent_couplings z).
    Labels: P(y | x) ∝ exp(sum_t h_t(x) y_t + ½ yᵀ J y) with fields h(x) = offsets + mixing @ phi(x); the
    ``coupled`` variant has mixing = I and J ≠ 0 (eq. 3), the ``independent`` variant J = 0 (eq. 4).
    """

    variant: str
    bank: PlacedTemplates
    placed_findings: np.ndarray  # (M, 28, 28) raw finding patterns at each allowed position
    amplitude: np.ndarray  # (T,)
    couplings: np.ndarray  # J (T, T) of the posterior (zero for the independent variant)
    offsets: np.ndarray  # c_t
    mixing: np.ndarray  # (T, T): h(x) = offsets + mixing @ phi(x); the identity for the coupled variant
    latent_fields: np.ndarray  # fields of the image-free latent model that draws which findings are drawn in
    latent_couplings: np.ndarray  # couplings of that latent model
    anatomy: np.ndarray  # (28, 28)

    n_labels = 14

    def features(self, images: np.ndarray) -> np.ndarray:
        return self.bank.features(images)

    def fields(self, images: np.ndarray) -> np.ndarray:
        """h(x) = c + mixing @ phi(x), eqs. (3)-(4)."""
        return self.fields_from_features(self.features(images))

    def fields_from_features(self, features: np.ndarray) -> np.ndarray:
        return features @ self.mixing.T + self.offsets

    def posterior(self, images: np.ndarray) -> np.ndarray:
        """Exact marginals P(y_t = 1 | x) (N, 14) for uint8 images (N, 28, 28)."""
        return multilabel_marginals(self.fields(images), self.couplings)

    def sample_latent(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n exact draws (n, 14) bool of the findings drawn into the images, from the latent pairwise model."""
        all_configs = label_configurations(self.n_labels)
        energy = all_configs @ self.latent_fields + 0.5 * np.einsum(
            "ci,ij,cj->c", all_configs, self.latent_couplings, all_configs
        )
        return all_configs[rng.choice(len(all_configs), size=n, p=softmax(energy))].astype(bool)

    def sample_images(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n uint8 images (n, 28, 28): findings drawn from the latent model, each drawn at a random allowed position
        and strength on a chest-like anatomy, plus white noise (float32, built in chunks)."""
        drawn = self.sample_latent(n, rng)
        gain = rng.uniform(0.85, 1.15, size=n).astype(np.float32)
        offset = rng.normal(0, 0.03, size=n).astype(np.float32)
        starts = np.flatnonzero(np.r_[True, np.diff(self.bank.group) != 0])
        counts = np.bincount(self.bank.group)
        placement = [starts[t] + rng.integers(0, counts[t], size=n) for t in range(self.n_labels)]
        strength = [self.amplitude[t] * rng.uniform(*CHEST_AMPLITUDE_RANGE, size=n) for t in range(self.n_labels)]
        findings = self.placed_findings.astype(np.float32)
        images = np.empty((n, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
        for lo in range(0, n, CHUNK_ROWS):
            rows = slice(lo, min(n, lo + CHUNK_ROWS))
            chunk = self.anatomy.astype(np.float32)[None] * gain[rows, None, None] + offset[rows, None, None]
            for t in range(self.n_labels):  # a loop over the 14 findings, vectorised over images
                weight = (strength[t][rows] * drawn[rows, t]).astype(np.float32)
                chunk += findings[placement[t][rows]] * weight[:, None, None]
            chunk += CHEST_NOISE * rng.standard_normal(chunk.shape, dtype=np.float32)
            images[rows] = quantise(chunk)
        return images

    def sample_labels(self, fields: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Labels (N, 14) uint8 drawn exactly from the joint P(y | x) given the fields h(x) (see ``fields``)."""
        return PairwiseEnumerator(self.couplings).sample(fields, rng)


def _scaled_moment_residuals(cooccurrence: np.ndarray):
    """Residual scaling: prevalence errors relative to the prevalence, pair errors in correlation units."""
    prevalence = np.diag(cooccurrence)
    first, second = np.triu_indices(len(prevalence), 1)
    sd = np.sqrt(prevalence * (1 - prevalence))
    scale = np.r_[prevalence, sd[first] * sd[second]]
    return np.r_[prevalence, cooccurrence[first, second]], scale, first, second


def fit_independent_posterior(features: np.ndarray, cooccurrence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets c and mixing M = I + W (W zero on the diagonal) of eq. (4), P(y | x) = prod_t σ(c_t + (M phi(x))_t),
    whose population moments (1/N) sum_n σ_t and (1/N) sum_n σ_s σ_t equal ``cooccurrence``.

    Labels are independent given the image, so their dependence comes only from the images: the drawn findings are
    correlated (the latent model) and the evidence for one finding shifts the others' log-odds (W), as it would in
    a Bayes posterior under correlated findings. The 105 moment equations in 196 unknowns are not convex: solved
    by Gauss-Newton with minimum-norm steps (the least change of (c, W) that zeroes the linearised residuals,
    ``numpy.linalg.lstsq``) from W = 0, halving a step until the residual norm falls; prevalence errors are
    measured relative to the prevalence and pair errors in correlation units. Features are centred for
    conditioning only (the shift is folded into c).
    """
    features = np.asarray(features, dtype=np.float64)
    n_labels, n = features.shape[1], len(features)
    target, scale, first, second = _scaled_moment_residuals(cooccurrence)
    mean = features.mean(axis=0)
    centred = features - mean
    off_diagonal = ~np.eye(n_labels, dtype=bool)

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        weights = np.zeros((n_labels, n_labels))
        weights[off_diagonal] = theta[n_labels:]
        return theta[:n_labels], weights

    def probabilities(theta: np.ndarray) -> np.ndarray:
        offsets, weights = unpack(theta)
        return expit(offsets + features + centred @ weights.T)

    def residuals(p: np.ndarray) -> np.ndarray:
        moments = np.r_[p.mean(axis=0), (p.T @ p / n)[first, second]]
        return (moments - target) / scale

    def jacobian(p: np.ndarray) -> np.ndarray:
        slope = p * (1 - p)
        d_offset = slope.T @ p / n  # mean σ'_u σ_t
        d_weight = np.stack([(slope[:, u, None] * p).T @ centred for u in range(n_labels)]) / n  # σ'_u σ_t phi_k
        eye = np.eye(n_labels)
        rows = [
            np.r_[eye[t] * slope[:, t].mean(), (eye[t][:, None] * (slope[:, t] @ centred / n))[off_diagonal]]
            for t in range(n_labels)
        ]
        for s, t in zip(first, second):  # the pair (s, t) depends on rows s and t of (c, W)
            grad_offset, grad_weight = np.zeros(n_labels), np.zeros((n_labels, n_labels))
            grad_offset[s], grad_offset[t] = d_offset[s, t], d_offset[t, s]
            grad_weight[s], grad_weight[t] = d_weight[s, t], d_weight[t, s]
            rows.append(np.r_[grad_offset, grad_weight[off_diagonal]])
        return np.array(rows) / scale[:, None]

    prevalence = np.diag(cooccurrence)
    theta = np.r_[np.log(prevalence / (1 - prevalence)) - np.median(features, axis=0), np.zeros(off_diagonal.sum())]
    with one_blas_thread():
        p = probabilities(theta)
        error = residuals(p)
        for _ in range(100):
            if np.abs(error).max() < 1e-10:
                offsets, weights = unpack(theta)
                return offsets - weights @ mean, np.eye(n_labels) + weights
            step = np.linalg.lstsq(jacobian(p), error, rcond=None)[0]
            for _ in range(40):
                trial_p = probabilities(theta - step)
                trial_error = residuals(trial_p)
                if np.linalg.norm(trial_error) < np.linalg.norm(error):
                    break
                step = step / 2
            theta, p, error = theta - step, trial_p, trial_error
    raise RuntimeError(
        f"fitting the independent chest posterior did not converge: largest scaled moment error "
        f"{np.abs(error).max():.2e}"
    )


def chest_real_statistics() -> dict[str, np.ndarray]:
    """Real ChestX-ray14 label statistics the generator is fitted to (see ``helpers.data.label_stats``)."""
    stats = label_stats.load_label_stats()
    return {key: stats[key].copy() for key in ("prevalence", "cooccurrence", "correlation")}


@functools.lru_cache(maxsize=1)
def _chest_bank() -> tuple[PlacedTemplates, np.ndarray]:
    """The chest findings' template bank (eq. 1) and placed patterns: fixed, no fitting involved."""
    findings = _chest_findings()
    return build_template_bank(
        [p[..., None] for p, *_ in findings], [s for _, s, _, _ in findings], np.array([beta for *_, beta in findings])
    )


def chest_fields(images, offsets, mixing) -> np.ndarray:
    """Fields h(x) = c + M phi(x) (N, 14) of stored uint8 chest images, eqs. (1), (3)-(4), from a set's ground truth
    (``offsets`` c, ``mixing`` M; e.g. ``bundle.ground_truth``) without refitting the generator. With the set's
    ``couplings`` J they give the exact joint P(y | x): ``multilabel_marginals(h, J)`` reproduces the stored
    posteriors. ``images``: (N, 28, 28) or (N, 1, 28, 28) uint8, numpy or torch."""
    images = np.asarray(images.numpy() if hasattr(images, "numpy") else images)
    if images.ndim == 4 and images.shape[1] == 1:
        images = images[:, 0]
    if images.ndim != 3 or images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE):
        raise ValueError(f"chest images must be (N, 28, 28) or (N, 1, 28, 28), got shape {images.shape}")
    offsets = np.asarray(offsets, dtype=np.float64).reshape(-1)
    mixing = np.asarray(mixing, dtype=np.float64)
    if offsets.shape != (14,) or mixing.shape != (14, 14):
        raise ValueError(f"offsets must be (14,) and mixing (14, 14), got {offsets.shape} and {mixing.shape}")
    return _chest_bank()[0].features(images) @ mixing.T + offsets


@functools.lru_cache(maxsize=len(CHEST_VARIANTS))
def _chest_model_and_reference(variant: str = "coupled") -> tuple[SyntheticChestModel, dict[str, np.ndarray]]:
    if variant not in CHEST_VARIANTS:
        raise ValueError(f"unknown chest variant {variant!r}; valid: {', '.join(CHEST_VARIANTS)}")
    findings = _chest_findings()
    bank, placed = _chest_bank()
    real = chest_real_statistics()
    latent_fields, latent_couplings = fit_pairwise_moments(np.zeros((1, 14)), real["cooccurrence"])
    identity, zeros = np.eye(14), np.zeros((14, 14))
    model = SyntheticChestModel(
        variant,
        bank,
        placed[..., 0],
        np.array([a for _, _, a, _ in findings]),
        zeros,
        np.zeros(14),
        identity,
        latent_fields,
        latent_couplings,
        _chest_anatomy(),
    )
    features = model.features(model.sample_images(REFERENCE_SIZE, np.random.default_rng(REFERENCE_SEED)))
    if variant == "coupled":
        offsets, couplings = fit_pairwise_moments(features, real["cooccurrence"])
        mixing = identity
    else:
        (offsets, mixing), couplings = fit_independent_posterior(features, real["cooccurrence"]), zeros
    model = dataclasses.replace(model, couplings=couplings, offsets=offsets, mixing=mixing)
    fields = model.fields_from_features(features)
    cooccurrence = multilabel_expected_cooccurrence(fields, couplings)
    reference = {
        "couplings": couplings.copy(),
        "offsets": offsets.copy(),
        "mixing": mixing.copy(),
        "latent_fields": latent_fields.copy(),
        "latent_couplings": latent_couplings.copy(),
        "label_cooccurrence": cooccurrence,
        "label_correlation": label_stats.correlation_from_moments(cooccurrence),
        "prevalence": np.diag(cooccurrence).copy(),
        "real_prevalence": real["prevalence"],
        "real_correlation": real["correlation"],
        "beta": bank.beta.copy(),
    }
    return model, reference


def chest_model(variant: str = "coupled") -> SyntheticChestModel:
    """The fitted ChestMNIST-like model of a variant (built once per process: seconds)."""
    return _chest_model_and_reference(variant)[0]


def chest_label_statistics(variant: str = "coupled") -> dict[str, np.ndarray]:
    """Real (ChestX-ray14) and synthetic population label statistics side by side, for plotting and checks.

    ``real_prevalence`` / ``synthetic_prevalence`` (14,), ``real_correlation`` / ``synthetic_correlation``
    (14, 14) Pearson (phi) correlations of the binary labels (helpers.data.label_stats eq. 1), ``real_cooccurrence`` /
    ``synthetic_cooccurrence`` E[y_s y_t]. Synthetic = averages of the exact posteriors over the fixed reference
    sample of 20,000 images (the population the generator was fitted on).
    """
    truth = _chest_model_and_reference(variant)[1]
    real = chest_real_statistics()
    return {
        "findings": list(CHEST_FINDINGS),
        "real_prevalence": real["prevalence"],
        "synthetic_prevalence": truth["prevalence"].copy(),
        "real_correlation": real["correlation"],
        "synthetic_correlation": truth["label_correlation"].copy(),
        "real_cooccurrence": real["cooccurrence"],
        "synthetic_cooccurrence": truth["label_cooccurrence"].copy(),
    }


def make_synthetic_chestmnist(
    n_train: int = 20000, n_val: int = 2500, n_test: int = 5000, seed: int = 0, variant: str = "coupled"
) -> SyntheticDataset:
    """ChestMNIST-like set: 28x28 grayscale chest-like images, 14 findings, exact marginals P(y_t = 1 | x).

    Population prevalences and pairwise label correlations are those of ChestX-ray14 (see the module docstring).
    ``variant="coupled"`` (data set ``synthetic_chestmnist``): labels coupled given the image, eq. (3), J ≠ 0;
    ``variant="independent"`` (``synthetic_chestmnist_independent``): independent given the image, eq. (4).
    Labels are sampled from the exact joint. ``ground_truth``: ``couplings`` J (zero for independent),
    ``offsets`` c and ``mixing`` M (fields h(x) = c + M phi(x): with J they give the exact joint of any image),
    ``label_cooccurrence`` E[y_s y_t] and ``label_correlation`` (population), ``prevalence``, ``real_prevalence``,
    ``real_correlation``, ``latent_fields``, ``latent_couplings``, ``beta``.
    """
    check_split_sizes(n_train=n_train, n_val=n_val, n_test=n_test)
    model, reference = _chest_model_and_reference(variant)
    splits = []
    for n, rng in zip((n_train, n_val, n_test), split_rngs(seed, stream=14)):
        images = model.sample_images(n, rng)
        fields = model.fields(images)
        posteriors = multilabel_marginals(fields, model.couplings)
        splits.append(SyntheticSplit(images, model.sample_labels(fields, rng), posteriors))
    name = "synthetic_chestmnist" if variant == "coupled" else f"synthetic_chestmnist_{variant}"
    return SyntheticDataset(
        name,
        MULTI_LABEL,
        "chestmnist",
        list(CHEST_FINDINGS),
        *splits,
        seed=seed,
        ground_truth={k: v.copy() for k, v in reference.items()},
    )
