"""Synthetic sets: the posteriors are exact, the generators are deterministic, the files load like real data.

Statistical tolerances. Given the images, labels are independent draws from the stored posteriors, so within a
set of samples the count of positives has mean sum_i p_i and variance sum_i p_i (1 - p_i) exactly. Every check
below allows 4 such standard errors plus a small slack; with the ~100 checks made here the chance that a correct
generator fails one is below 1 % (the seeds are fixed, so a run is reproducible either way). Each statistical
check is paired with a negative control showing that a wrong posterior of realistic size fails it.
"""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import data
from helpers.data import (
    label_stats,
    load_dataset,
    load_medmnist,
    synthetic_multiclass,
    synthetic_multilabel,
)

REAL_CSV = "chestxray14_labels_first40k.csv"
PREVALENCE_TOLERANCE = 0.10  # relative, issue 9
CORRELATION_TOLERANCE = 0.02  # absolute

SE_MULTIPLIER = 4.0


@pytest.fixture(scope="module")
def derma():
    return data.make_synthetic_dermamnist(seed=0)  # DermaMNIST's sizes 7007 / 1003 / 2005


@pytest.fixture(scope="module")
def chest():
    return data.make_synthetic_chestmnist(n_train=12000, n_val=1000, n_test=1000, seed=0)


@pytest.fixture(scope="module")
def chest_independent():
    return data.make_synthetic_chestmnist(n_train=12000, n_val=1000, n_test=1000, seed=0, variant="independent")


def _all(dataset: data.SyntheticDataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    splits = dataset.splits().values()
    return (
        np.concatenate([s.images for s in splits]),
        np.concatenate([s.labels for s in splits]),
        np.concatenate([s.posteriors for s in splits]),
    )


def _binned_violations(
    probs: np.ndarray, outcomes: np.ndarray, n_bins: int = 10, min_count: int = 30, slack: float = 0.005
) -> list[str]:
    """Bins of equal width over the true probability; a bin fails when its positive rate is further from the mean
    probability than SE_MULTIPLIER * sqrt(sum p (1 - p)) / n + slack."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.digitize(probs, edges[1:-1]), 0, n_bins - 1)
    failures = []
    for b in range(n_bins):
        members = index == b
        n = int(members.sum())
        if n < min_count:
            continue
        p = probs[members]
        standard_error = np.sqrt(np.sum(p * (1 - p))) / n
        gap = abs(outcomes[members].mean() - p.mean())
        if gap > SE_MULTIPLIER * standard_error + slack:
            failures.append(f"bin {b}: n={n}, mean p={p.mean():.4f}, frequency={outcomes[members].mean():.4f}")
    return failures


# ---------------------------------------------------------------------------------------------------------------
# Exact enumeration against brute force
# ---------------------------------------------------------------------------------------------------------------
def _brute_force(fields: np.ndarray, couplings: np.ndarray):
    """Explicit loop over every configuration (independent of the factorised implementation)."""
    n_labels = len(couplings)
    upper = np.triu(couplings, 1)  # sum over s < t
    out = []
    for h in fields:
        z, first, second = 0.0, np.zeros(n_labels), np.zeros((n_labels, n_labels))
        energies = []
        for config in itertools.product((0.0, 1.0), repeat=n_labels):
            y = np.array(config)
            energies.append((y, h @ y + y @ upper @ y))
        shift = max(e for _, e in energies)
        for y, e in energies:
            w = np.exp(e - shift)
            z += w
            first += w * y
            second += w * np.outer(y, y)
        out.append((first / z, np.log(z) + shift, second / z))
    return out


def test_enumeration_of_all_2_14_configurations_matches_a_brute_force_loop():
    rng = np.random.default_rng(1)
    couplings = data.chest_model("coupled").couplings
    fields = rng.normal(-2.0, 2.0, size=(2, 14))
    expected = _brute_force(fields, couplings)
    marginals = data.multilabel_marginals(fields, couplings)
    log_z = data.multilabel_log_partition(fields, couplings)
    moment = data.multilabel_expected_cooccurrence(fields, couplings)
    for row, (first, lz, _) in enumerate(expected):
        np.testing.assert_allclose(marginals[row], first, rtol=0, atol=1e-12)
        np.testing.assert_allclose(log_z[row], lz, rtol=1e-13)
    np.testing.assert_allclose(moment, np.mean([second for *_, second in expected], axis=0), atol=1e-12)


def test_enumeration_with_uneven_halves_and_extreme_fields():
    rng = np.random.default_rng(2)
    couplings = np.triu(rng.normal(0, 1.5, size=(5, 5)), 1)
    couplings = couplings + couplings.T
    fields = np.vstack([rng.normal(0, 2, size=(3, 5)), [[40.0, -40.0, 35.0, -60.0, 0.0]]])
    expected = _brute_force(fields, couplings)
    np.testing.assert_allclose(
        data.multilabel_marginals(fields, couplings), np.array([first for first, *_ in expected]), atol=1e-12
    )
    np.testing.assert_allclose(
        data.multilabel_log_partition(fields, couplings), np.array([lz for _, lz, _ in expected]), rtol=1e-12
    )


def test_enumeration_rejects_invalid_couplings():
    with pytest.raises(ValueError, match="symmetric"):
        data.multilabel_marginals(np.zeros((1, 3)), np.triu(np.ones((3, 3)), 1))
    with pytest.raises(ValueError, match="square"):
        data.multilabel_marginals(np.zeros((1, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"shape \(N, 4\)"):
        data.multilabel_marginals(np.zeros((2, 3)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="finite"):
        data.multilabel_marginals(np.full((1, 2), np.nan), np.zeros((2, 2)))


# ---------------------------------------------------------------------------------------------------------------
# The posterior is the documented closed form of the stored uint8 image
# ---------------------------------------------------------------------------------------------------------------
def test_multiclass_posterior_is_eq_1_2_of_the_stored_image(derma):
    """Eq. (1)-(2) recomputed with explicit loops over classes and shifts for a few stored images."""
    model = data.derma_model()
    lesions = synthetic_multiclass._derma_lesions()
    shifts = range(-data.DERMA_MAX_SHIFT, data.DERMA_MAX_SHIFT + 1)
    images = derma.test.images[:3]
    for image, stored in zip(images, derma.test.posteriors[:3]):
        x = image.astype(np.float64) / 255.0
        logits = []
        for k, lesion in enumerate(lesions):
            template = lesion - lesion.mean(axis=(0, 1))
            scores = [
                data.DERMA_BETA * np.sum(x * np.roll(template, (dy, dx), axis=(0, 1))) for dy in shifts for dx in shifts
            ]
            logits.append(model.bias[k] + np.log(np.mean(np.exp(scores))))
        expected = np.exp(logits) / np.sum(np.exp(logits))
        np.testing.assert_allclose(stored, expected, rtol=1e-9, atol=1e-12)
    assert images.dtype == np.uint8


def _explicit_chest_fields(images: np.ndarray, model: data.SyntheticChestModel) -> np.ndarray:
    """h(x) = c + M phi(x) with eq. (1) evaluated by explicit loops over findings and positions."""
    features = np.empty((len(images), 14))
    for t, (pattern, shifts, _, beta) in enumerate(synthetic_multilabel._chest_findings()):
        template = pattern - pattern.mean()
        for row, image in enumerate(images):
            x = image.astype(np.float64) / 255.0
            scores = [beta * np.sum(x * np.roll(template, shift, axis=(0, 1))) for shift in shifts]
            features[row, t] = np.log(np.mean(np.exp(scores)))
    return model.offsets + features @ model.mixing.T


def test_multilabel_posterior_is_eq_1_3_of_the_stored_image(chest):
    """Coupled variant: the stored marginals are those of eq. (3), by brute-force enumeration of all 2^14 y."""
    model = data.chest_model("coupled")
    np.testing.assert_array_equal(model.mixing, np.eye(14))
    fields = _explicit_chest_fields(chest.test.images[:2], model)
    expected = np.array([first for first, *_ in _brute_force(fields, model.couplings)])
    np.testing.assert_allclose(chest.test.posteriors[:2], expected, atol=1e-10)


def test_independent_variant_posterior_factorises(chest_independent):
    """Eq. (4): J = 0, so the brute-force joint of every pair is the product of the marginals, which are σ(h)."""
    model = data.chest_model("independent")
    assert np.all(model.couplings == 0) and np.all(chest_independent.ground_truth["couplings"] == 0)
    fields = _explicit_chest_fields(chest_independent.test.images[:2], model)
    off_diagonal = ~np.eye(14, dtype=bool)
    for (first, _, second), stored in zip(_brute_force(fields, model.couplings), chest_independent.test.posteriors):
        np.testing.assert_allclose(stored, first, atol=1e-10)
        np.testing.assert_allclose(second[off_diagonal], np.outer(first, first)[off_diagonal], atol=1e-12)
    np.testing.assert_allclose(chest_independent.test.posteriors[:2], 1 / (1 + np.exp(-fields)), atol=1e-10)


def test_coupled_variant_couples_labels_given_the_image(chest):
    """J != 0: for an image, the joint of a strongly coupled pair differs from the product of its marginals."""
    model = data.chest_model("coupled")
    couplings = chest.ground_truth["couplings"]
    np.testing.assert_array_equal(couplings, model.couplings)
    assert np.abs(couplings).max() > 0.5
    s, t = np.unravel_index(np.abs(couplings).argmax(), couplings.shape)
    fields = model.fields(chest.test.images[:3])
    pairs = data.PairwiseEnumerator(model.couplings).pair_statistics(fields)[0]
    marginals = chest.test.posteriors[:3]
    assert np.all(np.abs(pairs[:, s, t] - marginals[:, s] * marginals[:, t]) > 1e-4)


def test_posterior_rejects_non_uint8_images():
    with pytest.raises(ValueError, match="uint8"):
        data.derma_model().posterior(np.zeros((2, 28, 28, 3), dtype=np.float32))


def test_multiclass_posterior_is_invariant_to_flips(derma):
    """Radially symmetric templates and a symmetric shift set: flipped images have the same posterior."""
    images, model = derma.val.images[:200], data.derma_model()
    for flipped in (images[:, :, ::-1], images[:, ::-1, :]):
        np.testing.assert_allclose(model.posterior(flipped.copy()), derma.val.posteriors[:200], atol=1e-9)
    shifted = np.roll(images, 3, axis=2)  # not invariant to everything: the test can fail
    assert np.abs(model.posterior(shifted) - derma.val.posteriors[:200]).max() > 1e-3


# ---------------------------------------------------------------------------------------------------------------
# Labels are distributed as the posteriors say
# ---------------------------------------------------------------------------------------------------------------
def test_multiclass_label_frequencies_match_the_posteriors_per_bin(derma):
    _, labels, posteriors = _all(derma)
    for k in range(7):
        failures = _binned_violations(posteriors[:, k], labels == k)
        assert not failures, f"class {k}: " + "; ".join(failures)
    # negative control: a posterior sharpened like an over-confident network (temperature 0.7) is caught
    sharpened = np.exp(np.log(posteriors) / 0.7)
    sharpened /= sharpened.sum(axis=1, keepdims=True)
    assert any(_binned_violations(sharpened[:, k], labels == k) for k in range(7))


def test_multilabel_label_frequencies_match_the_marginals_per_bin(chest):
    _, labels, marginals = _all(chest)
    for t in range(14):
        failures = _binned_violations(marginals[:, t], labels[:, t] == 1)
        assert not failures, f"{data.CHEST_FINDINGS[t]}: " + "; ".join(failures)
    sharpened = 1 / (1 + np.exp(-np.log(marginals / (1 - marginals)) / 0.7))
    assert any(_binned_violations(sharpened[:, t], labels[:, t] == 1) for t in range(14))


def test_multilabel_labels_are_drawn_from_the_joint_not_the_marginals(chest):
    images, labels, marginals = _all(chest)
    model = data.chest_model()
    fields = model.fields(images)
    n = len(images)
    expected = data.multilabel_expected_cooccurrence(fields, model.couplings) * n
    observed = labels.T.astype(np.float64) @ labels
    np.testing.assert_allclose(np.diag(expected), marginals.sum(axis=0), rtol=1e-9)
    # var(count of y_s y_t = 1) <= expected count: the Bernoulli variance bound gives the standard error
    assert np.all(np.abs(observed - expected) <= SE_MULTIPLIER * np.sqrt(expected) + 3), np.round(
        (observed - expected) / np.sqrt(expected + 1), 1
    )
    # power: labels drawn independently from the marginals would have expected counts sum_n m_s m_t; for some
    # coupled pairs (e.g. atelectasis & effusion) that is further from the truth than the tolerance above
    independent = marginals.T @ marginals
    off_diagonal = ~np.eye(14, dtype=bool)
    assert np.any((np.abs(independent - expected) > SE_MULTIPLIER * np.sqrt(expected) + 3) & off_diagonal)


# ---------------------------------------------------------------------------------------------------------------
# Imbalance, dependency structure, similarity
# ---------------------------------------------------------------------------------------------------------------
def test_multiclass_imbalance_is_dermamnist_like(derma):
    counts = np.bincount(derma.train.labels, minlength=7)
    expected = 7007 * data.DERMA_PRIOR
    # binomial standard error, plus 3 % for the offsets being fitted on a finite reference sample
    tolerance = SE_MULTIPLIER * np.sqrt(expected * (1 - data.DERMA_PRIOR)) + 0.03 * expected
    assert np.all(np.abs(counts - expected) <= tolerance), (counts, expected.round())
    np.testing.assert_allclose(data.DERMA_PRIOR * 7007, [228, 359, 769, 80, 779, 4693, 99])
    _, _, posteriors = _all(derma)
    np.testing.assert_allclose(posteriors.sum(axis=1), 1.0, atol=1e-12)
    bayes_accuracy = posteriors.max(axis=1).mean()
    assert 0.75 <= bayes_accuracy <= 0.92, bayes_accuracy


@pytest.mark.parametrize("variant", ["coupled", "independent"])
def test_sampled_labels_follow_the_population_prevalences(variant, chest, chest_independent):
    dataset = chest if variant == "coupled" else chest_independent
    _, labels, _ = _all(dataset)
    n = len(labels)
    prevalence = dataset.ground_truth["prevalence"]
    tolerance = SE_MULTIPLIER * np.sqrt(prevalence * (1 - prevalence) / n) + 0.05 * prevalence
    assert np.all(np.abs(labels.mean(axis=0) - prevalence) <= tolerance), labels.mean(axis=0).round(4)
    assert 0.5 < (labels.sum(axis=1) == 0).mean() < 0.65  # ChestX-ray14: 57.7 % of images have no finding
    assert labels.dtype == np.uint8 and set(np.unique(labels)) == {0, 1}


@pytest.mark.parametrize("variant", ["coupled", "independent"])
def test_population_label_statistics_match_chestxray14(variant):
    """Population = reference-sample averages of the exact posteriors (recomputed here from the model, not read
    from the stored ground truth); prevalences within 10 % relative, correlations within 0.02 of the real ones."""
    model, _ = synthetic_multilabel._chest_model_and_reference(variant)
    images = model.sample_images(data.REFERENCE_SIZE, np.random.default_rng(data.REFERENCE_SEED))
    cooccurrence = data.multilabel_expected_cooccurrence(model.fields(images), model.couplings)
    real = label_stats.load_label_stats()
    prevalence = np.diag(cooccurrence)
    assert np.abs(prevalence / real["prevalence"] - 1).max() <= PREVALENCE_TOLERANCE
    correlation = label_stats.correlation_from_moments(cooccurrence)
    assert np.abs(correlation - real["correlation"]).max() <= CORRELATION_TOLERANCE
    side_by_side = data.chest_label_statistics(variant)
    np.testing.assert_allclose(side_by_side["synthetic_correlation"], correlation, atol=1e-9)
    np.testing.assert_allclose(side_by_side["real_prevalence"], real["prevalence"])
    # negative control: labels independent with the real prevalences are further from the real correlations
    independent = real["prevalence"][:, None] * real["prevalence"][None, :]
    np.fill_diagonal(independent, real["prevalence"])
    assert np.abs(label_stats.correlation_from_moments(independent) - real["correlation"]).max() > 0.1


def test_fit_pairwise_moments_recovers_a_known_model():
    """Moments of a known pairwise model (brute force) fitted back give its parameters: image-free and with
    per-image fields."""
    rng = np.random.default_rng(3)
    couplings = np.triu(rng.normal(0, 1.0, size=(5, 5)), 1)
    couplings = couplings + couplings.T
    offsets = rng.normal(-1.5, 0.5, size=5)
    features = rng.normal(0, 1.0, size=(40, 5))
    moments = np.mean([second for *_, second in _brute_force(features + offsets, couplings)], axis=0)
    fitted_offsets, fitted_couplings = data.fit_pairwise_moments(features, moments)
    np.testing.assert_allclose(fitted_offsets, offsets, atol=1e-8)
    np.testing.assert_allclose(fitted_couplings, couplings, atol=1e-8)
    latent = _brute_force(offsets[None], couplings)[0][2]
    fitted_offsets, fitted_couplings = data.fit_pairwise_moments(np.zeros((1, 5)), latent)
    np.testing.assert_allclose(fitted_couplings, couplings, atol=1e-8)
    with pytest.raises(ValueError, match="symmetric"):
        data.fit_pairwise_moments(features, np.triu(moments))


def test_fit_independent_posterior_matches_the_moments_it_is_given():
    rng = np.random.default_rng(4)
    features = rng.normal(0, 1.0, size=(5000, 4)) + rng.normal(0, 1.0, size=(5000, 1))  # a shared factor
    target = np.full((4, 4), 0.02)
    np.fill_diagonal(target, [0.1, 0.2, 0.05, 0.15])
    offsets, mixing = data.fit_independent_posterior(features, target)
    probabilities = 1 / (1 + np.exp(-(offsets + features @ mixing.T)))
    moments = probabilities.T @ probabilities / len(features)
    np.fill_diagonal(moments, probabilities.mean(axis=0))
    np.testing.assert_allclose(moments, target, rtol=1e-8)
    np.testing.assert_array_equal(np.diag(mixing), 1.0)


def test_label_stats_file_is_what_the_real_csv_gives(tmp_path):
    """The committed statistics regenerate from the real ChestX-ray14 label file (skipped where it is absent)."""
    roots = [os.environ.get("CALIBMED_SHARED_DATA"), Path(__file__).resolve().parents[1] / ".." / "shared" / "data"]
    csv_paths = [Path(root) / REAL_CSV for root in roots if root and (Path(root) / REAL_CSV).is_file()]
    if not csv_paths:
        pytest.skip(f"{REAL_CSV} not found in $CALIBMED_SHARED_DATA or ../shared/data")
    regenerated = label_stats.load_label_stats(label_stats.write_label_stats(csv_paths[0], tmp_path / "stats.json"))
    committed = label_stats.load_label_stats()
    for key in (
        "source_md5",
        "n_images",
        "n_patients",
        "n_no_finding",
        "positive_counts",
        "cooccurrence_counts",
        "findings",
        "chestxray14_names",
    ):
        assert regenerated[key] == committed[key], key
    assert committed["n_images"] == 40000 and committed["n_patients"] == 10447
    assert abs(committed["n_no_finding"] / committed["n_images"] - 0.577) < 0.001  # shared/data/README.md


def test_label_stats_reader_maps_the_chestxray14_names(tmp_path):
    """Every one of the 14 names lands in ChestMNIST's column (Pleural_Thickening -> pleural), No Finding -> 0."""
    rows = ["Image Index,Finding Labels,Follow-up #,Patient ID"]
    rows += [f"{t}.png,{name},0,{t}" for t, name in enumerate(label_stats.CHESTXRAY14_NAMES.values())]
    rows += ["a.png,No Finding,0,1", "b.png,Effusion|Pleural_Thickening,1,1"]
    path = tmp_path / "labels.csv"
    path.write_text("\n".join(rows) + "\n")
    labels, patients = label_stats.read_labels(path)
    np.testing.assert_array_equal(labels[:14], np.eye(14))
    assert labels[14].sum() == 0
    assert [data.CHEST_FINDINGS[t] for t in np.flatnonzero(labels[15])] == ["effusion", "pleural"]
    assert label_stats.FINDINGS == data.CHEST_FINDINGS and len(np.unique(patients)) == 14
    path.write_text(rows[0] + "\nx.png,Pleural Thickening,0,1\n")
    with pytest.raises(ValueError, match="unknown finding"):
        label_stats.read_labels(path)


def test_true_class_similarity_is_the_conditional_mean_posterior(derma):
    """S[k, j] = E[P(j|x) | y=k]: compare with the plain average of posterior rows grouped by sampled label."""
    _, labels, posteriors = _all(derma)
    similarity = data.true_class_similarity(posteriors)
    np.testing.assert_allclose(similarity.sum(axis=1), 1.0, atol=1e-12)
    for k in range(7):
        rows = posteriors[labels == k]
        standard_error = rows.std(axis=0) / np.sqrt(len(rows))
        assert np.all(np.abs(rows.mean(axis=0) - similarity[k]) <= SE_MULTIPLIER * standard_error + 0.01)
    with pytest.raises(ValueError, match="summing to 1"):
        data.true_class_similarity(posteriors * 2)


def test_designed_similar_pairs_are_the_most_confused(derma):
    truth = derma.ground_truth
    templates = truth["template_similarity"]
    paired = {k for pair in data.DERMA_SIMILAR_PAIRS for k in pair}
    for k, j in data.DERMA_SIMILAR_PAIRS:  # mutual nearest neighbours among the paired classes
        for a, b in ((k, j), (j, k)):
            others = [i for i in paired if i not in (a, b)]
            assert templates[a, b] > templates[a, others].max()
    symmetric = truth["true_class_similarity"] + truth["true_class_similarity"].T
    pairs = {tuple(sorted(p)) for p in data.DERMA_SIMILAR_PAIRS}
    designed = min(symmetric[p] for p in pairs)
    other = max(symmetric[k, j] for k in range(7) for j in range(k + 1, 7) if (k, j) not in pairs)
    assert designed > other


# ---------------------------------------------------------------------------------------------------------------
# Determinism and files
# ---------------------------------------------------------------------------------------------------------------
def test_same_seed_gives_identical_arrays_and_file_bytes(tmp_path):
    first = data.make_synthetic_dermamnist(n_train=300, n_val=50, n_test=60, seed=3)
    second = data.make_synthetic_dermamnist(n_train=300, n_val=50, n_test=60, seed=3)
    other_seed = data.make_synthetic_dermamnist(n_train=300, n_val=50, n_test=60, seed=4)
    bigger_train = data.make_synthetic_dermamnist(n_train=400, n_val=50, n_test=60, seed=3)
    for name in ("train", "val", "test"):
        a, b = first.splits()[name], second.splits()[name]
        assert np.array_equal(a.images, b.images) and np.array_equal(a.labels, b.labels)
        assert np.array_equal(a.posteriors, b.posteriors)
    assert not np.array_equal(first.train.images, other_seed.train.images)
    assert np.array_equal(first.test.images, bigger_train.test.images)  # splits use independent streams
    paths_a = data.write_medmnist_npz(tmp_path / "a" / "dermamnist.npz", first)
    paths_b = data.write_medmnist_npz(tmp_path / "b" / "dermamnist.npz", second)
    for path_a, path_b in zip(paths_a, paths_b):
        assert path_a.read_bytes() == path_b.read_bytes()

    for variant in data.CHEST_VARIANTS:
        chest_a = data.make_synthetic_chestmnist(n_train=200, n_val=30, n_test=30, seed=5, variant=variant)
        chest_b = data.make_synthetic_chestmnist(n_train=200, n_val=30, n_test=30, seed=5, variant=variant)
        assert np.array_equal(chest_a.train.images, chest_b.train.images)
        assert np.array_equal(chest_a.train.labels, chest_b.train.labels)
        assert np.array_equal(chest_a.test.posteriors, chest_b.test.posteriors)


def test_invalid_arguments_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="n_train"):
        data.make_synthetic_dermamnist(n_train=0)
    with pytest.raises(ValueError, match="seed"):
        data.make_synthetic_chestmnist(n_train=10, n_val=10, n_test=10, seed=-1)
    small = data.make_synthetic_dermamnist(n_train=20, n_val=10, n_test=10)
    with pytest.raises(ValueError, match=r"\.npz"):
        data.write_medmnist_npz(tmp_path / "dermamnist.zip", small)


def test_written_chestmnist_file_reads_back_through_the_real_loader(tmp_path, chest):
    image_path, posterior_path = data.write_medmnist_npz(tmp_path / "chestmnist.npz", chest)
    with np.load(image_path) as raw:  # medmnist's layout
        assert raw["train_images"].shape == (12000, 28, 28) and raw["train_labels"].shape == (12000, 14)
    bundle = load_medmnist("chestmnist", data_dir=tmp_path)
    assert bundle.task == "multi-label" and bundle.n_classes == 14 and bundle.n_channels == 1
    assert bundle.train.labels.dtype == torch.float32 and bundle.train.images.shape == (12000, 1, 28, 28)
    assert torch.equal(bundle.test.images[:, 0], torch.from_numpy(chest.test.images))
    assert torch.equal(bundle.val.labels, torch.from_numpy(chest.val.labels).float())
    with np.load(posterior_path) as stored:
        np.testing.assert_array_equal(stored["test_posteriors"], chest.test.posteriors)
        np.testing.assert_array_equal(stored["gt_couplings"], data.chest_model("coupled").couplings)
        assert int(stored["generator_version"]) == data.GENERATOR_VERSION


def test_load_dataset_generates_synthetic_dermamnist_once_and_reads_it_back(tmp_path, monkeypatch):
    sizes = dict(n_train=700, n_val=100, n_test=200)
    monkeypatch.setitem(
        data.GENERATORS, "synthetic_dermamnist", functools.partial(data.make_synthetic_dermamnist, **sizes)
    )  # the default, smaller
    reference = data.make_synthetic_dermamnist(**sizes, seed=0)
    bundle = load_dataset("synthetic_dermamnist", data_dir=tmp_path)
    generated = sorted(p.name for p in tmp_path.rglob("*.npz"))
    assert generated == ["dermamnist.npz", "dermamnist_posteriors.npz"]
    assert bundle.name == "synthetic_dermamnist" and bundle.task == "multi-class" and bundle.n_channels == 3
    assert torch.equal(bundle.train.labels, torch.from_numpy(reference.train.labels))
    assert torch.equal(bundle.train.images, torch.from_numpy(reference.train.images).permute(0, 3, 1, 2))
    np.testing.assert_array_equal(bundle.true_posteriors["test"].numpy(), reference.test.posteriors)
    np.testing.assert_allclose(
        bundle.ground_truth["true_class_similarity"].numpy(), reference.ground_truth["true_class_similarity"]
    )
    assert "Exact posteriors" in bundle.describe()

    monkeypatch.setitem(data.GENERATORS, "synthetic_dermamnist", None)  # a second load must not regenerate
    subset = load_dataset("synthetic_dermamnist", data_dir=tmp_path, max_train=300, seed=1)
    assert len(subset.train) == 300 and len(subset.test) == 200
    rows = [
        int(np.flatnonzero((reference.train.posteriors == p.numpy()).all(axis=1))[0])
        for p in subset.true_posteriors["train"]
    ]
    assert rows == sorted(rows)  # a subset in the original order
    assert torch.equal(subset.train.labels, torch.from_numpy(reference.train.labels[rows]))


def test_load_dataset_serves_the_independent_chest_variant_and_never_a_stale_file(tmp_path, monkeypatch):
    sizes = dict(n_train=300, n_val=50, n_test=60)
    name = "synthetic_chestmnist_independent"
    monkeypatch.setitem(
        data.GENERATORS,
        name,
        functools.partial(data.make_synthetic_chestmnist, variant="independent", **sizes),
    )
    reference = data.make_synthetic_chestmnist(variant="independent", **sizes)
    bundle = load_dataset(name, data_dir=tmp_path)
    assert bundle.name == name and bundle.task == "multi-label" and bundle.n_classes == 14
    np.testing.assert_array_equal(bundle.true_posteriors["test"].numpy(), reference.test.posteriors)
    assert torch.all(bundle.ground_truth["couplings"] == 0)
    assert torch.equal(bundle.ground_truth["mixing"], torch.from_numpy(data.chest_model("independent").mixing))
    # a posteriors file written by another generator version is refused, not served
    posteriors = next(tmp_path.rglob("chestmnist_posteriors.npz"))
    with np.load(posteriors) as archive:
        arrays = {key: archive[key] for key in archive.files}
    data.write_npz(posteriors, {**arrays, "generator_version": np.array(data.GENERATOR_VERSION - 1)})
    with pytest.raises(ValueError, match="generator version"):
        load_dataset(name, data_dir=tmp_path)


def test_pair_posteriors_from_marginals_recover_the_enumerated_pairs():
    rng = np.random.default_rng(3)
    couplings = np.triu(rng.normal(0, 1.5, size=(6, 6)), 1)
    couplings = couplings + couplings.T
    fields = rng.normal(-1.5, 2.0, size=(5, 6))
    expected = _brute_force(fields, couplings)
    marginals = np.array([first for first, *_ in expected])
    pairs = data.multilabel_pair_posteriors(marginals, couplings)
    np.testing.assert_allclose(pairs, np.array([second for *_, second in expected]), atol=1e-10)


def test_pair_posteriors_factorise_without_couplings():
    marginals = np.array([[0.1, 0.6, 0.3], [0.9, 0.05, 0.5]])
    pairs = data.multilabel_pair_posteriors(marginals, np.zeros((3, 3)))
    expected = marginals[:, :, None] * marginals[:, None, :]
    expected[:, range(3), range(3)] = marginals
    np.testing.assert_allclose(pairs, expected, atol=1e-12)


def test_pair_posteriors_reject_probabilities_outside_the_open_interval():
    with pytest.raises(ValueError, match="strictly inside"):
        data.multilabel_pair_posteriors(np.array([[0.0, 0.5]]), np.zeros((2, 2)))


def test_subset_moments_and_pair_marginals_of_all_2_14_configurations_match_a_brute_force_loop():
    rng = np.random.default_rng(11)
    couplings = data.chest_model("coupled").couplings
    fields = rng.normal(-2.0, 2.0, size=(2, 14))
    configs = np.array(list(itertools.product((0.0, 1.0), repeat=14)))[:, ::-1]  # column t = label t
    upper = np.triu(couplings, 1)
    energy = fields @ configs.T + np.einsum("ci,ij,cj->c", configs, upper, configs)[None, :]
    joint = np.exp(energy - energy.max(axis=1, keepdims=True))
    joint /= joint.sum(axis=1, keepdims=True)
    masks = np.r_[0, rng.integers(1, 2**14, size=40), 2**14 - 1, 1 << 13]
    present = (configs[None, :, :] == 1) | ~((masks[:, None] >> np.arange(14)) & 1).astype(bool)[:, None, :]
    expected = joint @ np.all(present, axis=2).T.astype(float)
    np.testing.assert_allclose(data.multilabel_subset_moments(fields, couplings, masks), expected, atol=1e-13)
    pairs = np.einsum("nc,ci,cj->nij", joint, configs, configs)
    np.testing.assert_allclose(data.multilabel_pair_marginals(fields, couplings), pairs, atol=1e-13)
    with pytest.raises(ValueError, match="bitmasks"):
        data.multilabel_subset_moments(fields, couplings, [2**14])


@pytest.mark.parametrize("variant", data.CHEST_VARIANTS)
def test_chest_fields_from_the_ground_truth_reproduce_the_stored_posteriors(variant, chest, chest_independent):
    dataset = chest if variant == "coupled" else chest_independent
    truth = dataset.ground_truth
    fields = data.chest_fields(torch.from_numpy(dataset.test.images[:, None]), truth["offsets"], truth["mixing"])
    np.testing.assert_allclose(
        data.multilabel_marginals(fields, truth["couplings"]), dataset.test.posteriors, rtol=0, atol=1e-12
    )
    with pytest.raises(ValueError, match="offsets must be"):
        data.chest_fields(dataset.test.images, truth["offsets"][:13], truth["mixing"])


@pytest.mark.parametrize("damage", ["truncated", "a_missing_array", "labels_out_of_range", "wrong_image_shape"])
def test_a_damaged_synthetic_file_says_to_delete_its_folder_not_to_download_it(tmp_path, monkeypatch, damage):
    """Issue 18, defect 6: a damaged *generated* file said "Replace it with the official file: download it from
    zenodo…"; it is regenerated when its folder is deleted."""
    monkeypatch.setitem(
        data.GENERATORS,
        "synthetic_dermamnist",
        functools.partial(data.make_synthetic_dermamnist, n_train=70, n_val=20, n_test=20),
    )
    load_dataset("synthetic_dermamnist", data_dir=tmp_path)
    folder = data.synthetic_dir("synthetic_dermamnist", tmp_path)
    path = folder / "dermamnist.npz"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:300])
    else:
        with np.load(path) as stored:
            arrays = dict(stored)
        if damage == "a_missing_array":
            del arrays["val_labels"]
        elif damage == "labels_out_of_range":
            arrays["train_labels"] = arrays["train_labels"] + 40
        else:
            arrays["test_images"] = arrays["test_images"][:, :20]
        np.savez(path, **arrays)
    with pytest.raises(ValueError) as raised:
        load_dataset("synthetic_dermamnist", data_dir=tmp_path)
    message = str(raised.value)
    assert "dermamnist.npz" in message and f"Delete {folder} to regenerate it" in message
    assert "zenodo" not in message and "official" not in message and "Download" not in message
    import shutil

    shutil.rmtree(folder)  # what the message says: the set is generated again
    assert len(load_dataset("synthetic_dermamnist", data_dir=tmp_path).train) == 70
