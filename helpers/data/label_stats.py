"""Real multi-label statistics of NIH ChestX-ray14, the target the synthetic chest set is fitted to.

Source: NIH Clinical Center, ChestX-ray14 (Wang et al., "ChestX-ray8: Hospital-scale Chest X-ray Database and
Benchmarks on Weakly-Supervised Classification and Localization of Common Thorax Diseases", CVPR 2017). The label
file (``Data_Entry_2017.csv``) lists, per image, its findings separated by ``|`` (or ``No Finding``) and the
patient ID. ChestMNIST's 14 labels are these findings.

Only a small derived file is committed: ``helpers/data/data_files/chestxray14_label_stats.json`` (per-finding counts,
the 14 x 14 co-occurrence counts in ChestMNIST's label order, the numbers of images and patients, the md5 of the
source CSV, citation and licence note). Regenerate it from the CSV with

    python -m helpers.data.label_stats <path to chestxray14_labels_first40k.csv> [output.json]

Pairwise label correlations are Pearson (phi) coefficients of the binary labels,

    r_st = (p_st - p_s p_t) / sqrt(p_s (1 - p_s) p_t (1 - p_t)),                                         (1)

computed from the prevalences p_t = E[y_t] and co-occurrences p_st = E[y_s y_t].
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from helpers.utils import write_text_atomically

#: ChestMNIST's labels (medmnist's order) and the finding names in ChestX-ray14's label file
CHESTXRAY14_NAMES: dict[str, str] = {
    "atelectasis": "Atelectasis",
    "cardiomegaly": "Cardiomegaly",
    "effusion": "Effusion",
    "infiltration": "Infiltration",
    "mass": "Mass",
    "nodule": "Nodule",
    "pneumonia": "Pneumonia",
    "pneumothorax": "Pneumothorax",
    "consolidation": "Consolidation",
    "edema": "Edema",
    "emphysema": "Emphysema",
    "fibrosis": "Fibrosis",
    "pleural": "Pleural_Thickening",
    "hernia": "Hernia",
}
FINDINGS: list[str] = list(CHESTXRAY14_NAMES)
NO_FINDING = "No Finding"
_COLUMN = {name: t for t, name in enumerate(CHESTXRAY14_NAMES.values())}  # finding name -> label index
STATS_PATH = Path(__file__).parent / "data_files" / "chestxray14_label_stats.json"
CITATION = (
    "Wang X, Peng Y, Lu L, Lu Z, Bagheri M, Summers RM. ChestX-ray8: Hospital-scale Chest X-ray Database "
    "and Benchmarks on Weakly-Supervised Classification and Localization of Common Thorax Diseases. "
    "CVPR 2017. Data: NIH Clinical Center."
)
LICENCE = (
    "NIH releases ChestX-ray14 without restriction on use, asking for acknowledgement of the NIH Clinical "
    "Center and citation of the paper above. This file holds only counts derived from the label file."
)


def file_md5(path: str | os.PathLike) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def finding_vector(finding_labels: str, where: str) -> np.ndarray:
    """A "Finding Labels" entry (``|``-separated findings or ``No Finding``) as 14 binary labels, uint8, in
    ChestMNIST's order; ValueError naming ``where`` for an unknown finding."""
    names = finding_labels.strip().split("|")
    y = np.zeros(len(_COLUMN), dtype=np.uint8)
    if names != [NO_FINDING]:
        for name in names:
            if name not in _COLUMN:
                raise ValueError(
                    f"{where}: unknown finding {name!r}; expected {NO_FINDING!r} or '|'-separated "
                    f"names from {sorted(_COLUMN)}"
                )
            y[_COLUMN[name]] = 1
    return y


def read_labels(csv_path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Binary labels (N, 14) uint8 in ChestMNIST's order and patient IDs (N,) int64 from a ChestX-ray14 label CSV.

    Raises ValueError on a missing column, an unknown finding name or ``No Finding`` mixed with findings.
    """
    labels, patients = [], []
    with open(csv_path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"Finding Labels", "Patient ID"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(
                f"{csv_path}: no column(s) {sorted(missing)}; expected ChestX-ray14's Data_Entry_2017.csv "
                f"layout (Image Index, Finding Labels, Follow-up #, Patient ID, ...)"
            )
        for line, row in enumerate(reader, start=2):
            labels.append(finding_vector(row["Finding Labels"], f"{csv_path}, line {line}"))
            patients.append(int(row["Patient ID"]))
    if not labels:
        raise ValueError(f"{csv_path} has no label rows")
    return np.stack(labels), np.array(patients, dtype=np.int64)


def compute_label_stats(csv_path: str | os.PathLike) -> dict:
    """The statistics written to ``STATS_PATH``: counts (exact integers), sizes, provenance."""
    labels, patients = read_labels(csv_path)
    counts = labels.astype(np.int64)
    return {
        "source": Path(csv_path).name,
        "source_md5": file_md5(csv_path),
        "findings": FINDINGS,
        "chestxray14_names": [CHESTXRAY14_NAMES[name] for name in FINDINGS],
        "n_images": int(len(labels)),
        "n_patients": int(len(np.unique(patients))),
        "n_no_finding": int((labels.sum(axis=1) == 0).sum()),
        "positive_counts": counts.sum(axis=0).tolist(),
        "cooccurrence_counts": (counts.T @ counts).tolist(),
        "citation": CITATION,
        "licence": LICENCE,
    }


def write_label_stats(csv_path: str | os.PathLike, out_path: str | os.PathLike = STATS_PATH) -> Path:
    """Compute the statistics of ``csv_path`` and write them as JSON, atomically."""
    out_path = Path(out_path)
    text = json.dumps(compute_label_stats(csv_path), indent=1) + "\n"
    write_text_atomically(out_path, text)
    return out_path


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    stats = json.loads(Path(path).read_text())
    if stats.get("findings") != FINDINGS:
        raise ValueError(
            f"{path}: findings {stats.get('findings')} are not ChestMNIST's {FINDINGS}; regenerate it "
            f"with `python -m helpers.data.label_stats <csv>`"
        )
    return stats


def load_label_stats(path: str | os.PathLike = STATS_PATH) -> dict:
    """The committed real statistics plus ``prevalence`` (14,), ``cooccurrence`` (14, 14) E[y_s y_t] and
    ``correlation`` (14, 14), eq. (1), as float64 arrays."""
    stats = dict(_load(str(path)))
    n = stats["n_images"]
    cooccurrence = np.array(stats["cooccurrence_counts"], dtype=np.float64) / n
    stats["prevalence"] = np.array(stats["positive_counts"], dtype=np.float64) / n
    stats["cooccurrence"] = cooccurrence
    stats["correlation"] = correlation_from_moments(cooccurrence)
    return stats


def correlation_from_moments(cooccurrence: np.ndarray) -> np.ndarray:
    """Pearson (phi) correlations, eq. (1), from C[s, t] = E[y_s y_t] (diagonal = prevalences); unit diagonal."""
    cooccurrence = np.asarray(cooccurrence, dtype=np.float64)
    if cooccurrence.ndim != 2 or cooccurrence.shape[0] != cooccurrence.shape[1]:
        raise ValueError(f"cooccurrence must be a square (T, T) matrix, got shape {cooccurrence.shape}")
    prevalence = np.diag(cooccurrence)
    if np.any(prevalence <= 0) or np.any(prevalence >= 1):
        raise ValueError("every prevalence (diagonal of cooccurrence) must lie strictly between 0 and 1")
    sd = np.sqrt(prevalence * (1 - prevalence))
    correlation = (cooccurrence - np.outer(prevalence, prevalence)) / np.outer(sd, sd)
    np.fill_diagonal(correlation, 1.0)
    return correlation


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m helpers.data.label_stats <chestxray14 label CSV> [output.json]", file=sys.stderr)
        return 2
    out = write_label_stats(argv[0], *argv[1:])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
