"""Data loading: real DermaMNIST, medmnist-format errors, the ISIC 2018 layout, subsets, names."""

from __future__ import annotations

import csv
import functools
import io
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from medmnist import INFO
from PIL import Image
from tiny_bundles import three_class_bundle

from helpers import data
from helpers.data import DATA_DIR_ENV, Split, data_dir, load_dataset, load_isic2018, load_medmnist

DERMA_COUNTS = {
    "train": [228, 359, 769, 80, 779, 4693, 99],
    "val": [33, 52, 110, 12, 111, 671, 14],
    "test": [66, 103, 220, 23, 223, 1341, 29],
}


def _real_dermamnist_dir() -> Path | None:
    for folder in (data_dir(), data.repo_root().parent / "shared" / "data"):
        if (folder / "dermamnist.npz").is_file():
            return folder
    return None


def _write_medmnist(
    path: Path,
    n: int = 12,
    channels: int = 3,
    size: int = 28,
    n_classes: int = 7,
    multilabel: bool = False,
    seed: int = 0,
    **overrides,
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (size, size) if channels == 1 else (size, size, channels)
    arrays = {}
    for split in ("train", "val", "test"):
        arrays[f"{split}_images"] = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)
        arrays[f"{split}_labels"] = (
            rng.integers(0, 2, size=(n, n_classes)) if multilabel else rng.integers(0, n_classes, size=(n, 1))
        ).astype(np.uint8)
    arrays.update(overrides)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    np.savez_compressed(path, **arrays)
    return arrays


# ---------------------------------------------------------------------------------------------------------------
# Real DermaMNIST
# ---------------------------------------------------------------------------------------------------------------
def test_real_dermamnist_shapes_dtypes_and_class_counts():
    folder = _real_dermamnist_dir()
    if folder is None:
        pytest.skip(f"real DermaMNIST not found: put dermamnist.npz in ${DATA_DIR_ENV} or ../shared/data")
    bundle = load_dataset("dermamnist", data_dir=folder)
    assert bundle.task == "multi-class" and bundle.n_classes == 7 and bundle.n_channels == 3
    assert bundle.class_names[0] == INFO["dermamnist"]["label"]["0"] and bundle.licence == "CC BY-NC 4.0"
    for split, counts in DERMA_COUNTS.items():
        images, labels = bundle.splits()[split].images, bundle.splits()[split].labels
        assert images.dtype == torch.uint8 and images.shape == (sum(counts), 3, 28, 28)
        assert labels.dtype == torch.int64 and labels.shape == (sum(counts),)
        assert torch.bincount(labels, minlength=7).tolist() == counts
    with np.load(folder / "dermamnist.npz") as raw:  # channel-first copy of medmnist's channel-last array
        assert torch.equal(bundle.test.images[5], torch.from_numpy(raw["test_images"][5]).permute(2, 0, 1))
    text = bundle.describe()
    assert "CC BY-NC 4.0" in text and "melanocytic nevi 4,693" in text and "train 7,007" in text
    assert text.startswith("DermaMNIST: multi-class, 7 classes, 28×28 px, 3 channels\n") and "md5" not in text


# ---------------------------------------------------------------------------------------------------------------
# Data directory and medmnist files
# ---------------------------------------------------------------------------------------------------------------
def test_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert data_dir() == Path(data.__file__).resolve().parents[2] / "data"
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "from_env"))
    assert data_dir() == tmp_path / "from_env"
    assert data_dir(tmp_path / "argument") == tmp_path / "argument"


@pytest.mark.parametrize("name, size", [("dermamnist", 28), ("chestmnist", 64), ("chestmnist", 224)])
def test_missing_file_names_path_url_md5_and_where_to_put_it(tmp_path, name, size):
    start = time.perf_counter()
    with pytest.raises(FileNotFoundError) as error:
        load_dataset(name, image_size=size, data_dir=tmp_path)
    assert time.perf_counter() - start < 2.0
    message = str(error.value)
    key = "" if size == 28 else f"_{size}"
    expected_file = tmp_path / (f"{name}.npz" if size == 28 else f"{name}_{size}.npz")
    for part in (
        str(expected_file),
        INFO[name][f"url{key}"],
        INFO[name][f"MD5{key}"],
        DATA_DIR_ENV,
        INFO[name]["python_class"],
    ):
        assert part in message
    assert not any(tmp_path.iterdir())  # nothing downloaded or created


def test_missing_file_via_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "dermamnist.npz")):
        load_medmnist("dermamnist")


def test_multilabel_medmnist_file_loads_as_float_targets(tmp_path):
    arrays = _write_medmnist(tmp_path / "chestmnist.npz", n=9, channels=1, n_classes=14, multilabel=True)
    bundle = load_medmnist("chestmnist", data_dir=tmp_path)
    assert bundle.task == "multi-label" and bundle.n_classes == 14 and bundle.n_channels == 1
    assert bundle.train.images.shape == (9, 1, 28, 28) and bundle.train.labels.dtype == torch.float32
    assert torch.equal(bundle.val.labels, torch.from_numpy(arrays["val_labels"]).float())
    assert bundle.class_counts("train") == arrays["train_labels"].sum(axis=0).tolist()
    assert "differs from the official release" in bundle.describe(details=True)
    assert "md5" not in bundle.describe()  # the file check is for the folded details, not the main flow


def test_corrupt_files_raise_value_errors_naming_the_file(tmp_path):
    path = tmp_path / "dermamnist.npz"
    path.write_bytes(b"this is not a zip archive" * 100)
    with pytest.raises(ValueError, match="not a readable .npz") as error:
        load_medmnist("dermamnist", data_dir=tmp_path)
    assert str(path) in str(error.value) and INFO["dermamnist"]["url"] in str(error.value)

    _write_medmnist(path, n=50)
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])  # truncated download
    with pytest.raises(ValueError, match=str(path)):
        load_medmnist("dermamnist", data_dir=tmp_path)

    np.save(tmp_path / "single.npy", np.zeros(3))
    (tmp_path / "single.npy").rename(path)
    with pytest.raises(ValueError, match="single array"):
        load_medmnist("dermamnist", data_dir=tmp_path)

    _write_medmnist(path, test_labels=None)
    with pytest.raises(ValueError, match="missing the arrays .*test_labels"):
        load_medmnist("dermamnist", data_dir=tmp_path)


@pytest.mark.parametrize(
    "override, message",
    [
        ({"train_images": np.zeros((4, 28, 28), dtype=np.uint8)}, r"shape \(N, 28, 28, 3\)"),
        ({"val_images": np.zeros((4, 32, 32, 3), dtype=np.uint8)}, "at 28 px"),
        ({"test_images": np.zeros((4, 28, 28, 3), dtype=np.float32)}, "uint8"),
        ({"train_labels": np.full((12, 1), 7, dtype=np.uint8)}, r"integers in \[0, 6\]"),
        ({"train_labels": np.zeros((11, 1), dtype=np.uint8)}, "one row per image"),
        ({"val_labels": np.zeros((12, 2), dtype=np.uint8)}, r"shape \(N, 1\)"),
        ({"train_images": np.zeros((0, 28, 28, 3), dtype=np.uint8)}, "no images"),
    ],
)
def test_wrong_shapes_and_values_raise_clear_errors(tmp_path, override, message):
    _write_medmnist(tmp_path / "dermamnist.npz", **override)
    with pytest.raises(ValueError, match=message) as error:
        load_medmnist("dermamnist", data_dir=tmp_path)
    assert "dermamnist.npz" in str(error.value)


def test_multilabel_values_must_be_binary(tmp_path):
    _write_medmnist(
        tmp_path / "chestmnist.npz",
        channels=1,
        n_classes=14,
        multilabel=True,
        train_labels=np.full((12, 14), 2, dtype=np.uint8),
    )
    with pytest.raises(ValueError, match="only 0 and 1"):
        load_medmnist("chestmnist", data_dir=tmp_path)


def test_other_sizes_use_medmnists_file_names(tmp_path):
    _write_medmnist(tmp_path / "dermamnist_64.npz", n=5, size=64)
    bundle = load_dataset("dermamnist", image_size=64, data_dir=tmp_path)
    assert bundle.train.images.shape == (5, 3, 64, 64) and bundle.image_size == 64
    with pytest.raises(ValueError, match="sizes"):
        load_dataset("dermamnist", image_size=32, data_dir=tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# ISIC 2018 Task 3 layout
# ---------------------------------------------------------------------------------------------------------------
ISIC_HEADER = ["image", "MEL", "NV", "BCC", "AKIEC", "BKL", "DF", "VASC"]
ISIC_STEMS = {"train": "Training", "val": "Validation", "test": "Test"}


def _make_isic(root: Path, per_split: dict[str, list[int]], seed: int = 0) -> dict[str, list[tuple]]:
    """Official layout with uniformly coloured 60x45 JPEGs; the colour of image i encodes nothing but is returned."""
    rng = np.random.default_rng(seed)
    written = {}
    counter = 0
    for split, classes in per_split.items():
        stem = f"ISIC2018_Task3_{ISIC_STEMS[split]}"
        (root / f"{stem}_Input").mkdir(parents=True, exist_ok=True)
        (root / f"{stem}_GroundTruth").mkdir(parents=True, exist_ok=True)
        rows, written[split] = [], []
        for label in classes:
            image_id = f"ISIC_{counter:07d}"
            counter += 1
            colour = tuple(int(v) for v in rng.integers(30, 220, size=3))
            Image.new("RGB", (60, 45), colour).save(root / f"{stem}_Input" / f"{image_id}.jpg", quality=95)
            rows.append([image_id] + [f"{float(k == label):.1f}" for k in range(7)])
            written[split].append((image_id, label, colour))
        with open(root / f"{stem}_GroundTruth" / f"{stem}_GroundTruth.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(ISIC_HEADER)
            writer.writerows(rows)
        (root / f"{stem}_Input" / "LICENSE.txt").write_text("licence file shipped with the official zip")
    return written


def test_isic2018_layout_loads_resized_with_csv_class_order(tmp_path):
    root = tmp_path / "ISIC2018"
    written = _make_isic(root, {"train": [0, 1, 2, 3, 4, 5, 6, 1], "val": [6, 0], "test": [3, 3, 5]})
    bundle = load_dataset("isic2018", image_size=16, data_dir=tmp_path)
    assert bundle.task == "multi-class" and bundle.class_names[0] == "melanoma" and bundle.n_classes == 7
    for split, entries in written.items():
        part = bundle.splits()[split]
        assert part.images.dtype == torch.uint8 and part.images.shape == (len(entries), 3, 16, 16)
        assert part.labels.tolist() == [label for _, label, _ in entries]
        colours = torch.tensor([colour for *_, colour in entries], dtype=torch.float32)
        mean_colour = part.images.float().mean(dim=(2, 3))
        assert torch.allclose(mean_colour, colours, atol=3.0)  # a uniform JPEG stays uniform when resized
    assert len(list((tmp_path / "cache").glob("isic2018-*-16px.npz"))) == 1  # in <data dir>/cache
    assert not list(root.glob("*.npz"))  # never inside the data set's folder (it may be shared, read-only)


def test_isic2018_cache_is_not_served_for_a_deleted_image(tmp_path):
    root = tmp_path / "ISIC2018"
    written = _make_isic(root, {"train": [0, 1, 2], "val": [3], "test": [4]})
    load_isic2018(root, image_size=12, cache_dir=tmp_path / "cache")
    victim = root / "ISIC2018_Task3_Training_Input" / f"{written['train'][0][0]}.jpg"
    victim.unlink()
    with pytest.raises(FileNotFoundError, match=written["train"][0][0]):
        load_isic2018(root, image_size=12, cache_dir=tmp_path / "cache")


def test_isic2018_malformed_cache_raises_instead_of_loading(tmp_path):
    root = tmp_path / "ISIC2018"
    _make_isic(root, {"train": [0, 1, 2], "val": [3], "test": [4]})
    load_isic2018(root, image_size=12, cache_dir=tmp_path / "cache")
    (cache_path,) = (tmp_path / "cache").glob("isic2018-*-12px.npz")
    with np.load(cache_path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays["train_images"] = arrays["train_images"][:, :8]  # wrong height, same fingerprint
    np.savez(cache_path, **arrays)
    with pytest.raises(ValueError, match="train_images must have shape"):
        load_isic2018(root, image_size=12, cache_dir=tmp_path / "cache")


def test_isic2018_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="challenge.isic-archive.com"):
        load_dataset("isic2018", data_dir=tmp_path)
    root = tmp_path / "ISIC2018"
    _make_isic(root, {"train": [0, 1], "val": [2], "test": [3]})
    csv_path = root / "ISIC2018_Task3_Validation_GroundTruth" / "ISIC2018_Task3_Validation_GroundTruth.csv"
    csv_path.write_text(",".join(ISIC_HEADER) + "\nISIC_0000002,1.0,1.0,0.0,0.0,0.0,0.0,0.0\n")
    with pytest.raises(ValueError, match="not one-hot"):
        load_isic2018(root, cache=False)
    csv_path.write_text("image,MEL,NV\nISIC_0000002,1.0,0.0\n")
    with pytest.raises(ValueError, match="missing columns"):
        load_isic2018(root, cache=False)
    with pytest.raises(ValueError, match="image_size"):
        load_isic2018(root, image_size=0)


# ---------------------------------------------------------------------------------------------------------------
# Subsets, names, the bundle
# ---------------------------------------------------------------------------------------------------------------
def test_max_train_is_a_seeded_subset_and_leaves_val_test_alone(tmp_path):
    arrays = _write_medmnist(tmp_path / "dermamnist.npz", n=200)
    full = load_dataset("dermamnist", data_dir=tmp_path)
    a = load_dataset("dermamnist", data_dir=tmp_path, max_train=50, seed=3)
    b = load_dataset("dermamnist", data_dir=tmp_path, max_train=50, seed=3)
    c = load_dataset("dermamnist", data_dir=tmp_path, max_train=50, seed=4)
    assert len(a.train) == 50 and torch.equal(a.train.images, b.train.images)
    assert torch.equal(a.train.labels, b.train.labels) and not torch.equal(a.train.images, c.train.images)
    assert torch.equal(a.val.images, full.val.images) and torch.equal(a.test.labels, full.test.labels)
    # every kept image is a training image with its own label, in the original order
    flat = full.train.images.reshape(200, -1)
    rows = [int(torch.nonzero((flat == image.reshape(1, -1)).all(dim=1))[0]) for image in a.train.images]
    assert rows == sorted(set(rows))
    assert torch.equal(a.train.labels, torch.from_numpy(arrays["train_labels"][rows, 0].astype(np.int64)))
    assert len(load_dataset("dermamnist", data_dir=tmp_path, max_train=10_000).train) == 200
    with pytest.raises(ValueError, match="max_train"):
        load_dataset("dermamnist", data_dir=tmp_path, max_train=0)


def test_unknown_names_and_sizes_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="valid names") as error:
        load_dataset("dermamnst", data_dir=tmp_path)
    for name in (
        "dermamnist",
        "chestmnist",
        "pathmnist",
        "isic2018",
        "chestxray14",
        "synthetic_dermamnist",
        "synthetic_chestmnist",
    ):
        assert name in str(error.value)
    with pytest.raises(ValueError, match="valid names"):
        load_dataset("organmnist3d", data_dir=tmp_path)  # 3D sets are not images
    with pytest.raises(ValueError, match="28 px"):
        load_dataset("synthetic_dermamnist", image_size=64, data_dir=tmp_path)
    with pytest.raises(TypeError):
        load_dataset(None, data_dir=tmp_path)


def test_bundle_properties_and_describe():
    images = torch.zeros(5, 3, 8, 8, dtype=torch.uint8)
    bundle = three_class_bundle(Split(images, torch.tensor([0, 2, 2, 1, 2])), source="memory")
    assert bundle.n_classes == 3 and bundle.n_channels == 3 and bundle.class_counts() == [1, 1, 3]
    with pytest.raises(KeyError, match="no display name for the dataset 'tiny'"):
        bundle.describe()  # a data set without words in helpers.utils.names cannot be printed under its code name
    bundle.name = "synthetic_dermamnist"
    text = bundle.describe()
    assert text.startswith("synthetic skin-lesion set: multi-class, 3 classes, 8×8 px, 3 channels\n")
    assert "a 1, b 1, c 3" in text and "train 5" in text and "Licence: none" in text
    assert "memory" not in text and "source: memory" in bundle.describe(details=True)


def test_inventory_reports_present_and_missing_files(tmp_path):
    (tmp_path / "dermamnist.npz").write_bytes(b"not checked here")
    rows = data.inventory(tmp_path)
    present = {(r["dataset"], r["size"]) for r in rows if r["present"]}
    assert present == {("dermamnist", 28)}
    assert {r["dataset"] for r in rows} == {"dermamnist", "chestmnist", "isic2018", "chestxray14"}


# ---------------------------------------------------------------------------------------------------------------
# Issue 10 #13: what is at the data path, permissions, absurd headers, duplicate ISIC rows
# ---------------------------------------------------------------------------------------------------------------
def _make_fifo(path: Path) -> None:
    os.mkfifo(path)


def _make_loop(path: Path) -> None:
    path.symlink_to(path.name)  # a link to itself: ELOOP


@pytest.mark.parametrize(
    "make, kind",
    [(Path.mkdir, "a directory"), (_make_fifo, "a named pipe"), (_make_loop, "Too many levels of symbolic links")],
)
def test_something_other_than_a_file_at_the_data_path_is_named_not_reported_missing(tmp_path, make, kind):
    path = tmp_path / "dermamnist.npz"
    make(path)
    with pytest.raises(ValueError, match=kind) as error:
        load_medmnist("dermamnist", data_dir=tmp_path)
    assert str(path) in str(error.value) and "download" not in str(error.value).lower()


def test_an_unreadable_file_reports_a_permission_error(tmp_path, monkeypatch):
    path = tmp_path / "dermamnist.npz"
    _write_medmnist(path)

    def denied(file, *args, **kwargs):  # what np.load meets when the process may not read the file
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr(np, "load", denied)
    with pytest.raises(PermissionError, match="permission") as error:
        load_medmnist("dermamnist", data_dir=tmp_path)
    assert str(path) in str(error.value) and "replace it" not in str(error.value).lower()


def test_an_npz_member_whose_header_claims_terabytes_names_the_file(tmp_path):
    path = tmp_path / "dermamnist.npz"
    arrays = _write_medmnist(tmp_path / "valid.npz")
    with zipfile.ZipFile(path, "w") as archive:
        for key, array in arrays.items():
            member = io.BytesIO()
            if key == "val_images":  # a header claiming 2 TiB in front of 64 bytes of data
                np.lib.format.write_array_header_1_0(
                    member, {"descr": "|u1", "fortran_order": False, "shape": (2**41 // 2352, 28, 28, 3)}
                )
                member.write(bytes(64))
            else:
                np.lib.format.write_array(member, array)
            archive.writestr(f"{key}.npy", member.getvalue())
    with pytest.raises(ValueError, match=r"val_images") as error:
        load_medmnist("dermamnist", data_dir=tmp_path)
    assert str(path) in str(error.value)


def test_isic2018_duplicate_image_rows_are_rejected(tmp_path):
    root = tmp_path / "ISIC2018"
    _make_isic(root, {"train": [0, 1, 2], "val": [3], "test": [4]})
    csv_path = root / "ISIC2018_Task3_Training_GroundTruth" / "ISIC2018_Task3_Training_GroundTruth.csv"
    lines = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join(lines + [lines[1]]) + "\n")
    with pytest.raises(ValueError, match=r"ISIC_0000000.*2 times"):
        load_isic2018(root, cache=False)


def test_dataset_task_names_the_task_without_loading_the_data():
    """Issue 18: which notebooks another multi-class set can run is decided from the profiles' data set names."""
    assert data.dataset_task("dermamnist") == data.dataset_task("isic2018") == "multi-class"
    assert data.dataset_task("pneumoniamnist") == data.dataset_task("synthetic_dermamnist") == "multi-class"
    assert data.dataset_task("ChestMNIST") == data.dataset_task("synthetic_chestmnist_independent") == "multi-label"
    with pytest.raises(ValueError, match="unknown data set 'dermamnst'; valid names: .*dermamnist"):
        data.dataset_task("dermamnst")


def test_a_generated_synthetic_set_is_not_compared_with_an_official_release(tmp_path, monkeypatch):
    """05's folded run details said the synthetic set's md5 "differs from the official release" of DermaMNIST: a
    generated file has no official release, and the comparison told a reader nothing (issue 28)."""
    from helpers.data import synthetic_sets

    small = functools.partial(data.make_synthetic_dermamnist, n_train=70, n_val=14, n_test=21)
    monkeypatch.setitem(synthetic_sets.GENERATORS, "synthetic_dermamnist", small)
    details = synthetic_sets.load_synthetic("synthetic_dermamnist", data_dir=tmp_path).describe(details=True)
    assert "official release" not in details
    assert "generated" in details and "md5" in details
