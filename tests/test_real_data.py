"""Real-data folders in their official layouts: ISIC 2018 Task 3 (with or without Validation, HAM10000 metadata,
site-shift splits) and NIH ChestX-ray14 with ChestMNIST's split. Tiny generated layouts in ``tmp_path``, and the
project's shared real samples (``shared/data/{ISIC2018,ChestXray14}`` beside the checkout) where present."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from medmnist import INFO
from PIL import Image

from helpers import data
from helpers.data import chestxray14, image_files, isic2018, load_chestxray14, load_dataset, load_isic2018

ISIC_HEADER = ["image", *isic2018.CLASSES]
DX = ["mel", "nv", "bcc", "akiec", "bkl", "df", "vasc"]  # the ground-truth CSV's class order, as HAM10000's dx
METADATA_HEADER = ["lesion_id", "image_id", "dx", "dx_type", "age", "sex", "localization", "dataset"]


def _shared_folder(name: str) -> Path | None:
    """The project's shared sample (``shared/data`` beside or inside the checkout), not the data directory: a
    user's data directory may hold the full official download, whose sizes differ from the sample's."""
    for folder in (data.repo_root().parent / "shared" / "data", data.repo_root() / "shared" / "data"):
        if (folder / name).is_dir():
            return folder / name
    return None


# ---------------------------------------------------------------------------------------------------------------
# ISIC 2018: tiny layouts
# ---------------------------------------------------------------------------------------------------------------
def _write_isic_split(root: Path, split: str, entries: list[tuple[str, int]], size=(60, 45), seed: int = 0) -> dict:
    """Uniformly coloured JPEGs and the ground-truth CSV of one split; returns image id -> colour."""
    folder, csv_path = isic2018.split_paths(root, split)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    colours = {}
    for image_id, _label in entries:
        colours[image_id] = tuple(int(v) for v in rng.integers(30, 220, size=3))
        Image.new("RGB", size, colours[image_id]).save(folder / f"{image_id}.jpg", quality=95)
    with open(csv_path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(ISIC_HEADER)
        writer.writerows([image_id] + [f"{float(k == label):.1f}" for k in range(7)] for image_id, label in entries)
    return colours


def _ham_layout(
    root: Path,
    lesions_per_class: int = 4,
    images_per_lesion: int = 2,
    with_metadata: bool = True,
    sites=("vidir_molemax", "rosendahl"),
) -> tuple[pd.DataFrame, dict]:
    """Training images grouped in lesions (several images each), a test split, and HAM10000_metadata.csv."""
    rows, entries, counter = [], [], 0
    for label in range(7):
        for lesion in range(lesions_per_class):
            lesion_id = f"HAM_{label}{lesion:06d}"
            site = sites[lesion % len(sites)]
            for _ in range(images_per_lesion):
                image_id = f"ISIC_{counter:07d}"
                counter += 1
                entries.append((image_id, label))
                rows.append([lesion_id, image_id, DX[label], "histo", 40.0 + lesion, "female", "back", site])
    colours = _write_isic_split(root, "train", entries)
    colours.update(_write_isic_split(root, "test", [(f"ISIC_9{k:06d}", k % 7) for k in range(7)], seed=1))
    frame = pd.DataFrame(rows, columns=METADATA_HEADER)
    if with_metadata:
        frame.to_csv(root / isic2018.METADATA_FILE, index=False)
    return frame, colours


def _ids(bundle_split_meta: pd.DataFrame) -> list[str]:
    return list(bundle_split_meta.index)


def test_isic2018_without_validation_carves_by_lesion_seeded_and_stratified(tmp_path):
    root = tmp_path / "ISIC2018"
    frame, colours = _ham_layout(root, lesions_per_class=10, images_per_lesion=2)
    bundle = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    lesion_of = dict(zip(frame["image_id"], frame["lesion_id"]))
    train_lesions = {lesion_of[i] for i in _ids(bundle.metadata["train"])}
    val_lesions = {lesion_of[i] for i in _ids(bundle.metadata["val"])}
    assert not train_lesions & val_lesions  # no lesion on both sides
    assert len(val_lesions) == 11 and len(train_lesions) == 59  # ceil(15 % of 70 lesions) held out
    assert len(bundle.val) == 22 and len(bundle.train) == 118 and len(bundle.test) == 7
    assert sorted(set(bundle.val.labels.tolist())) == list(range(7))  # stratified: every class in validation
    for split in ("train", "val"):  # images, labels and metadata rows stay aligned after the carve
        part, meta = bundle.splits()[split], bundle.metadata[split]
        expected_labels = [DX.index(dx) for dx in meta["dx"]]
        assert part.labels.tolist() == expected_labels
        mean_colour = part.images.float().mean(dim=(2, 3))
        assert torch.allclose(
            mean_colour, torch.tensor([colours[i] for i in meta.index], dtype=torch.float32), atol=3.0
        )
    again = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    other = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache", split_seed=1)
    assert _ids(again.metadata["val"]) == _ids(bundle.metadata["val"])
    assert _ids(other.metadata["val"]) != _ids(bundle.metadata["val"])
    assert any("stratified by class, seed 0), carved by lesion" in note for note in bundle.notes)


def test_isic2018_exposes_metadata_per_image_and_empty_rows_for_test_images(tmp_path):
    root = tmp_path / "ISIC2018"
    frame, _ = _ham_layout(root)
    bundle = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    meta = bundle.metadata["train"]
    assert {"lesion_id", "dataset", "dx_type", "age", "sex", "localization", "dx"} <= set(meta.columns)
    expected = frame.set_index("image_id").loc[meta.index]
    assert (meta["dataset"] == expected["dataset"]).all() and (meta["age"] == expected["age"]).all()
    assert len(bundle.metadata["test"]) == 7 and bundle.metadata["test"]["dataset"].isna().all()
    subset = data.subsample_train(bundle, 10, seed=0)  # the metadata follows a training subset
    assert len(subset.metadata["train"]) == 10
    assert subset.train.labels.tolist() == [DX.index(dx) for dx in subset.metadata["train"]["dx"]]


def test_isic2018_without_metadata_carves_by_image_with_a_printed_note(tmp_path, capsys):
    root = tmp_path / "ISIC2018"
    _ham_layout(root, with_metadata=False)
    bundle = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    printed = capsys.readouterr().out
    assert "carved by image" in printed and isic2018.METADATA_FILE in printed
    assert len(bundle.val) == 9 and len(bundle.train) == 47  # ceil(15 % of 56 images)
    assert bundle.metadata["val"]["lesion_id"].isna().all()


def test_isic2018_with_validation_folder_uses_it_and_caches_outside_the_data_folder(tmp_path):
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    val_colours = _write_isic_split(root, "val", [("ISIC_8000000", 6), ("ISIC_8000001", 0)], seed=2)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    bundle = load_dataset("isic2018", image_size=16, data_dir=tmp_path)
    assert bundle.val.labels.tolist() == [6, 0] and len(bundle.train) == 56
    assert torch.allclose(
        bundle.val.images.float().mean(dim=(2, 3)),
        torch.tensor(list(val_colours.values()), dtype=torch.float32),
        atol=3.0,
    )
    assert not any("carved" in note for note in bundle.notes)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # nothing written into the data folder
    assert len(list((tmp_path / "cache").glob("isic2018-*-16px.npz"))) == 1


def test_isic2018_every_split_goes_through_one_resize_pipeline(tmp_path):
    """Training and test images of different original sizes are resized by the same method: PIL's bicubic on the
    whole image (JPEG draft decoding would shrink a large image by a power of two first)."""
    root = tmp_path / "ISIC2018"
    rng = np.random.default_rng(0)
    _write_isic_split(root, "train", [("ISIC_0000000", 0), ("ISIC_0000001", 1)])
    _write_isic_split(root, "test", [("ISIC_0000002", 2)])
    for split, image_id, size in (("train", "ISIC_0000000", (600, 450)), ("test", "ISIC_0000002", (1024, 768))):
        pixels = rng.integers(0, 256, size=(size[1] // 8, size[0] // 8, 3), dtype=np.uint8)
        texture = Image.fromarray(pixels).resize(size, Image.Resampling.BILINEAR)
        texture.save(isic2018.split_paths(root, split)[0] / f"{image_id}.jpg", quality=90)
    bundle = load_isic2018(root, image_size=16, cache_dir=tmp_path / "cache", val_fraction=0.5)
    assert any("not stratified: a class has too few" in note for note in bundle.notes)  # one image per class
    for split, image_id in (("train", "ISIC_0000000"), ("val", "ISIC_0000000"), ("test", "ISIC_0000002")):
        if image_id not in list(bundle.metadata[split].index):
            continue
        row = list(bundle.metadata[split].index).index(image_id)
        with Image.open(isic2018.split_paths(root, "train" if split == "val" else split)[0] / f"{image_id}.jpg") as im:
            reference = np.asarray(im.convert("RGB").resize((16, 16), Image.Resampling.BICUBIC))
        np.testing.assert_array_equal(bundle.splits()[split].images[row].permute(1, 2, 0).numpy(), reference)


def test_isic2018_cache_is_reused_and_rebuilt_when_an_image_changes(tmp_path, monkeypatch):
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    first = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded again although the cache matches")

    with monkeypatch.context() as patch:
        patch.setattr(image_files, "decode_resized", no_decoding)
        second = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    assert torch.equal(first.train.images, second.train.images)
    victim = isic2018.split_paths(root, "test")[0] / "ISIC_9000000.jpg"
    Image.new("RGB", (60, 45), (255, 0, 0)).save(victim, quality=95)  # same name, new content: not served stale
    os.utime(victim, ns=(1, 1))
    third = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    assert third.test.images[0, 0].float().mean() > 240 and third.test.images[0, 2].float().mean() < 15


@pytest.mark.parametrize(
    "remove, expected",
    [
        ("ISIC2018_Task3_Training_GroundTruth/ISIC2018_Task3_Training_GroundTruth.csv", "Training ground truth"),
        ("ISIC2018_Task3_Test_Input", "Test input"),
        ("ISIC2018_Task3_Validation_GroundTruth", "validation split is incomplete"),
    ],
)
def test_isic2018_partial_layouts_name_what_is_missing(tmp_path, remove, expected):
    import shutil

    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    _write_isic_split(root, "val", [("ISIC_8000000", 6)])
    target = root / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(FileNotFoundError, match=expected) as error:
        load_isic2018(root, cache=False)
    assert str(target) in str(error.value) and "isic-archive.com" in str(error.value)


def test_isic2018_listed_images_that_are_absent_are_named(tmp_path):
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    (isic2018.split_paths(root, "train")[0] / "ISIC_0000003.jpg").unlink()
    with pytest.raises(FileNotFoundError, match=r"1 of the 56 images listed in .*ISIC_0000003.*Unzip"):
        load_isic2018(root, cache=False)


def test_isic2018_metadata_problems_are_named(tmp_path):
    root = tmp_path / "ISIC2018"
    frame, _ = _ham_layout(root)
    metadata_path = root / isic2018.METADATA_FILE
    frame.iloc[1:].to_csv(metadata_path, index=False)  # a training image without a row: its lesion is unknown
    with pytest.raises(ValueError, match=r"no row for 1 of the 56 images.*ISIC_0000000.*remove it"):
        load_isic2018(root, cache=False)
    frame.assign(dx=["nv"] * len(frame)).to_csv(metadata_path, index=False)
    with pytest.raises(ValueError, match="disagrees with the ground-truth CSV"):
        load_isic2018(root, cache=False)
    frame.drop(columns="dataset").to_csv(metadata_path, index=False)
    with pytest.raises(ValueError, match=r"missing columns \['dataset'\]"):
        load_isic2018(root, cache=False)


def test_isic_site_split_trains_on_some_sites_and_tests_on_another(tmp_path):
    root = tmp_path / "ISIC2018"
    frame, _ = _ham_layout(root, lesions_per_class=6, sites=("vidir_molemax", "vidir_modern", "rosendahl"))
    bundle = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    shifted = data.isic_site_split(bundle)
    site_of = dict(zip(frame["image_id"], frame["dataset"]))
    for split in ("train", "val"):
        assert {site_of[i] for i in shifted.metadata[split].index} <= set(isic2018.VIENNA_SITES)
    assert {site_of[i] for i in shifted.metadata["test"].index} == {"rosendahl"}
    assert len(shifted.test) == (frame["dataset"] == "rosendahl").sum() == 28
    assert len(shifted.train) + len(shifted.val) == 56
    note = shifted.notes[-1]  # the sites in words (issue 28, item 4), and the split's description says them
    assert "test from Queensland practice (Rosendahl) (28 images)" in note and "Vienna, MoleMax camera" in note
    assert "vidir" not in note and "rosendahl" not in note
    assert shifted.describe().startswith("ISIC 2018 (split by acquisition site): multi-class")
    assert not set(shifted.metadata["train"]["lesion_id"]) & set(shifted.metadata["val"]["lesion_id"])
    assert shifted.test.labels.tolist() == [DX.index(dx) for dx in shifted.metadata["test"]["dx"]]
    with pytest.raises(ValueError, match="unknown acquisition site"):
        data.isic_site_split(bundle, test_sites=("vienna",))
    with pytest.raises(ValueError, match="both train_sites and test_sites"):
        data.isic_site_split(bundle, test_sites=("vidir_modern",))
    plain = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    plain.metadata = None
    with pytest.raises(ValueError, match="no acquisition-site metadata"):
        data.isic_site_split(plain)


def test_isic_heldout_split_holds_out_whole_lesions_beside_the_isic_test_images(tmp_path):
    root = tmp_path / "ISIC2018"
    frame, _ = _ham_layout(root, lesions_per_class=6, sites=("vidir_molemax", "rosendahl"))
    bundle = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    heldout = data.isic_heldout_split(bundle, test_fraction=0.25, seed=3)
    sets = data.test_sets(heldout)
    assert list(sets) == [data.IN_DISTRIBUTION, data.ISIC_TEST]
    assert len(sets[data.ISIC_TEST]) == len(bundle.test)
    assert len(heldout.train) + len(sets[data.IN_DISTRIBUTION]) == len(bundle.train)
    held = heldout.metadata["test"].iloc[sets[data.IN_DISTRIBUTION]]
    assert not set(held["lesion_id"]) & set(heldout.metadata["train"]["lesion_id"])
    assert heldout.test.labels[sets[data.IN_DISTRIBUTION]].tolist() == [DX.index(dx) for dx in held["dx"]]
    assert torch.equal(heldout.test.images[sets[data.ISIC_TEST]], bundle.test.images)
    assert torch.equal(heldout.val.images, bundle.val.images)
    again = data.isic_heldout_split(bundle, test_fraction=0.25, seed=3)
    assert list(again.metadata["test"].index) == list(heldout.metadata["test"].index)
    plain = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    plain.metadata = None
    with pytest.raises(ValueError, match="no lesion of every training image"):
        data.isic_heldout_split(plain)


def test_test_sets_name_the_site_split_and_default_to_the_whole_split(tmp_path):
    root = tmp_path / "ISIC2018"
    _ham_layout(root, lesions_per_class=6, sites=("vidir_molemax", "vidir_modern", "rosendahl"))
    bundle = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    shifted = data.isic_site_split(bundle)
    assert {name: len(index) for name, index in data.test_sets(shifted).items()} == {
        "vienna_to_rosendahl": len(shifted.test)
    }
    assert list(data.test_sets(bundle, default="all")) == ["all"]


# ---------------------------------------------------------------------------------------------------------------
# ChestX-ray14: tiny layouts
# ---------------------------------------------------------------------------------------------------------------
def _chest_labels(seed: int, n: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((n, 14)) < 0.2).astype(np.uint8)


def _chest_layout(
    root: Path, per_split=(("train", 5), ("val", 2), ("test", 3)), absent=(), unlisted=(), csv_overrides=None
) -> dict[str, list[tuple[str, np.ndarray, int]]]:
    """images/ (mixed sizes and PNG modes, one grey level per image), Data_Entry_2017.csv, chestmnist_split/."""
    (root / "images").mkdir(parents=True)
    (root / chestxray14.LIST_FOLDER).mkdir()
    written, rows, patient = {}, [], 0
    modes = ("L", "RGB", "RGBA")
    for split, n in per_split:
        labels = _chest_labels(len(rows), n)
        written[split] = []
        for k in range(n):
            patient += 1
            name = f"{patient:08d}_000.png"
            grey = 20 + 10 * len(rows)
            if name not in absent:
                mode = modes[len(rows) % 3]
                size = (40 + 7 * k, 40 + 5 * k)
                colour = grey if mode == "L" else (grey,) * 3 + ((255,) if mode == "RGBA" else ())
                Image.new(mode, size, colour).save(root / "images" / name)
            written[split].append((name, labels[k], grey))
            findings = "|".join(chestxray14.FINDINGS[t] for t in np.flatnonzero(labels[k])) or "No Finding"
            rows.append([name, (csv_overrides or {}).get(name, findings), 0, patient, 50, "M", "PA"])
        with open(root / chestxray14.LIST_FOLDER / f"{split}_list.txt", "w") as handle:
            handle.writelines(f"{name} {' '.join(map(str, y))}\n" for name, y, _ in written[split])
    for name in unlisted:
        Image.new("L", (30, 30), 0).save(root / "images" / name)
    pd.DataFrame(
        rows,
        columns=[
            "Image Index",
            "Finding Labels",
            "Follow-up #",
            "Patient ID",
            "Patient Age",
            "Patient Gender",
            "View Position",
        ],
    ).to_csv(root / chestxray14.LABEL_FILE, index=False)
    return written


def test_chestxray14_layout_loads_as_a_chestmnist_like_multilabel_bundle(tmp_path, capsys):
    root = tmp_path / "ChestXray14"
    written = _chest_layout(root)
    bundle = load_dataset("chestxray14", image_size=12, data_dir=tmp_path)
    assert bundle.task == data.MULTI_LABEL and bundle.n_channels == 1 and bundle.image_size == 12
    assert bundle.class_names == [INFO["chestmnist"]["label"][str(t)] for t in range(14)]
    for split, entries in written.items():
        part = bundle.splits()[split]
        assert part.images.shape == (len(entries), 1, 12, 12) and part.images.dtype == torch.uint8
        assert part.labels.dtype == torch.float32
        np.testing.assert_array_equal(part.labels.numpy(), np.stack([y for _, y, _ in entries]))
        greys = torch.tensor([grey for *_, grey in entries], dtype=torch.float32)
        assert torch.allclose(part.images.float().mean(dim=(1, 2, 3)), greys, atol=1.0)  # L, RGB, RGBA alike
        assert list(bundle.metadata[split].index) == [name for name, *_ in entries]
    assert "absent" not in capsys.readouterr().out  # nothing absent, nothing to report
    assert (tmp_path / "cache").is_dir() and not list(root.glob("*.npz"))


def test_chestxray14_absent_images_are_skipped_and_counted_and_unlisted_ones_named(tmp_path, capsys):
    root = tmp_path / "ChestXray14"
    written = _chest_layout(root, absent=("00000002_000.png", "00000007_000.png"), unlisted=("00099999_000.png",))
    with pytest.warns(UserWarning, match=r"1 image\(s\) .* in no split list .*00099999_000\.png"):
        bundle = load_chestxray14(root, image_size=8, cache_dir=tmp_path / "cache")
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ChestX-ray14")]
    assert line == "ChestX-ray14: 8 of 10 listed images present (train 4, val 1, test 3), 2 absent: skipped."
    assert len(bundle.train) == 4 and len(bundle.val) == 1
    kept = [y for name, y, _ in written["train"] if name != "00000002_000.png"]
    np.testing.assert_array_equal(bundle.train.labels.numpy(), np.stack(kept))


def test_chestxray14_printed_lines_fit_a_notebook_output_line(tmp_path, capsys):
    from helpers.course import MAX_LINE

    root = tmp_path / "ChestXray14"
    _chest_layout(root, absent=("00000002_000.png",), csv_overrides={"00000003_000.png": "Hernia|Mass"})
    load_chestxray14(root, cache=False)
    lines = capsys.readouterr().out.splitlines()
    assert any("labels that differ" in line for line in lines)
    assert max(len(line) for line in lines) <= MAX_LINE, lines


def test_chestxray14_labels_are_checked_against_data_entry(tmp_path):
    root = tmp_path / "ChestXray14"
    written = _chest_layout(root, csv_overrides={"00000003_000.png": "Hernia|Mass"})
    with pytest.raises(
        ValueError,
        match=r"1 listed image\(s\) have labels that differ.*00000003_000\.png.*"
        r"Data_Entry_2017\.csv Mass\|Hernia.*label_disagreement='lists'",
    ):
        load_chestxray14(root, cache=False, label_disagreement="error")
    from_lists = load_chestxray14(root, cache=False)  # the default: the lists' (ChestMNIST's) labels
    from_csv = load_chestxray14(root, cache=False, label_disagreement="data_entry")
    np.testing.assert_array_equal(from_lists.train.labels[2].numpy(), written["train"][2][1])
    hernia_mass = np.zeros(14)
    hernia_mass[[4, 13]] = 1
    np.testing.assert_array_equal(from_csv.train.labels[2].numpy(), hernia_mass)
    assert torch.equal(from_lists.train.labels[[0, 1, 3, 4]], from_csv.train.labels[[0, 1, 3, 4]])
    assert any("the lists' labels are used" in note for note in from_lists.notes)
    with pytest.raises(ValueError, match="label_disagreement must be one of"):
        load_chestxray14(root, cache=False, label_disagreement="ignore")
    with pytest.raises(ValueError, match="chestxray14 only"):
        load_dataset("isic2018", data_dir=tmp_path, label_disagreement="lists")


@pytest.mark.parametrize(
    "damage, error, message",
    [
        (
            lambda root: (root / "Data_Entry_2017.csv").unlink(),
            FileNotFoundError,
            r"missing .*Data_Entry_2017\.csv.*nihcc",
        ),
        (
            lambda root: (root / "chestmnist_split" / "val_list.txt").unlink(),
            FileNotFoundError,
            r"val_list\.txt.*CheXNet",
        ),
        (
            lambda root: (root / "chestmnist_split" / "test_list.txt").write_text("00000008_000.png 0 1\n"),
            ValueError,
            r"test_list\.txt, line 1: expected an image name and 14 labels",
        ),
        (
            lambda root: (root / "chestmnist_split" / "test_list.txt").write_text(
                "00000001_000.png" + " 0" * 14 + "\n"
            ),
            ValueError,
            r"00000001_000\.png is listed in both train_list\.txt and test_list\.txt",
        ),
        (
            lambda root: (root / "chestmnist_split" / "test_list.txt").write_text(
                "00000001_001.png" + " 0" * 14 + "\n"
            ),
            ValueError,
            r"not patient-wise.*patient 00000001",
        ),
        (
            lambda root: [(root / "images" / f"0000000{k}_000.png").unlink() for k in (6, 7)],
            FileNotFoundError,
            r"no image of the val list",
        ),
    ],
)
def test_chestxray14_partial_or_inconsistent_layouts_raise_naming_the_problem(tmp_path, damage, error, message):
    root = tmp_path / "ChestXray14"
    _chest_layout(root)
    damage(root)
    with pytest.raises(error, match=message):
        load_chestxray14(root, cache=False)


@pytest.mark.filterwarnings("ignore:macro_auroc")  # a tiny validation split lacks positives of some labels
def test_chestxray14_bundle_trains_on_the_multilabel_path(tmp_path):
    from helpers.losses import BCE
    from helpers.training import TrainConfig, models, train

    _chest_layout(tmp_path / "ChestXray14", per_split=(("train", 12), ("val", 4), ("test", 4)))
    bundle = load_dataset("chestxray14", image_size=28, data_dir=tmp_path)
    model = models.build_model("small_cnn", bundle.n_channels, bundle.n_classes, image_size=bundle.image_size)
    result = train.fit(model, BCE(), bundle, TrainConfig(epochs=1, batch_size=8, device="cpu", progress=False))
    assert len(result.history) == 1 and np.isfinite(result.history[0]["val_loss"])


# ---------------------------------------------------------------------------------------------------------------
# The shared real samples
# ---------------------------------------------------------------------------------------------------------------
SHARED_ISIC = _shared_folder("ISIC2018")
SHARED_CHEST = _shared_folder("ChestXray14")


@pytest.fixture(scope="module")
def shared_isic(tmp_path_factory):
    if SHARED_ISIC is None or not (SHARED_ISIC / isic2018.METADATA_FILE).is_file():
        pytest.skip("the shared sample ../shared/data/ISIC2018 (with HAM10000_metadata.csv) is not here")
    return load_isic2018(SHARED_ISIC, image_size=28, cache_dir=tmp_path_factory.mktemp("cache"))


def test_shared_isic2018_loads_with_validation_carved_by_lesion(shared_isic):
    bundle = shared_isic
    assert len(bundle.train) + len(bundle.val) == 5984 and len(bundle.test) == 1512
    assert len(bundle.val) == 898  # ceil(15 % of 5,984 lesions: one image per lesion in this sample)
    assert bundle.class_counts("test") == [171, 909, 93, 43, 217, 44, 35]  # MEL NV BCC AKIEC BKL DF VASC
    assert not set(bundle.metadata["train"]["lesion_id"]) & set(bundle.metadata["val"]["lesion_id"])
    sites = pd.concat([bundle.metadata["train"], bundle.metadata["val"]])["dataset"].value_counts().to_dict()
    assert sites == {"vidir_molemax": 3159, "vidir_modern": 1346, "rosendahl": 1259, "vienna_dias": 220}
    assert bundle.train.images.shape[1:] == (3, 28, 28)


def test_shared_isic2018_vienna_to_rosendahl_split(shared_isic):
    shifted = data.isic_site_split(shared_isic)
    assert len(shifted.train) + len(shifted.val) == 3159 + 1346 + 220 and len(shifted.test) == 1259
    assert set(shifted.metadata["test"]["dataset"]) == {"rosendahl"}


@pytest.mark.skipif(SHARED_CHEST is None, reason="the shared sample ../shared/data/ChestXray14 is not here")
def test_shared_chestxray14_sample_loads_as_725_94_181(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"2 listed image\(s\).*00000193_019\.png.*00000150_002\.png"):
        load_chestxray14(SHARED_CHEST, cache=False, label_disagreement="error")  # the lists omit the CSV's Pneumonia
    bundle = load_chestxray14(SHARED_CHEST, image_size=28, cache_dir=tmp_path)  # default: the lists' labels
    assert (len(bundle.train), len(bundle.val), len(bundle.test)) == (725, 94, 181)
    printed = capsys.readouterr().out
    assert "1,000 of 112,120 listed images present (train 725, val 94, test 181)" in printed
    assert "2 listed image(s) have labels that differ" in printed and "'lists' labels used" in printed
    assert bundle.train.images.shape[1:] == (1, 28, 28) and bundle.train.labels.shape[1] == 14


# ---------------------------------------------------------------------------------------------------------------
# issue 29, item 4 (medium): real-data layouts
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("other", ["test", "val"])
def test_isic2018_refuses_an_image_listed_in_two_splits(tmp_path, other):
    """Issue 29, medium: load_isic2018 accepted the same image id in the Training and the Test (or Validation)
    ground truth, so one image was trained on and scored."""
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    _write_isic_split(root, "val", [("ISIC_8000000", 6)], seed=2)
    folder, csv_path = isic2018.split_paths(root, other)
    train_folder, _ = isic2018.split_paths(root, "train")
    (folder / "ISIC_0000003.jpg").write_bytes((train_folder / "ISIC_0000003.jpg").read_bytes())
    with open(csv_path, "a", newline="") as handle:
        csv.writer(handle).writerow(["ISIC_0000003"] + [f"{float(k == 0):.1f}" for k in range(7)])
    _, train_csv = isic2018.split_paths(root, "train")
    with pytest.raises(ValueError, match=rf"1 image\(s\) are listed in both .*{train_csv.name} and .*{csv_path.name}"):
        load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    with pytest.raises(ValueError, match="ISIC_0000003"):
        load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")


def test_isic_heldout_split_refuses_training_images_without_a_lesion(tmp_path):
    """Issue 29, medium: isic_heldout_split turned every training image without a lesion id (NaN: the metadata
    has no row for it) into one pseudo-lesion "nan", which could fall on both sides of the held-out split."""
    root = tmp_path / "ISIC2018"
    frame, _ = _ham_layout(root, lesions_per_class=6)
    _write_isic_split(root, "val", [("ISIC_8000000", 6), ("ISIC_8000001", 0)], seed=2)  # no carve: metadata optional
    frame.iloc[4:].to_csv(root / isic2018.METADATA_FILE, index=False)  # the first four images have no row
    bundle = load_isic2018(root, image_size=8, cache_dir=tmp_path / "cache")
    assert bundle.metadata["train"]["lesion_id"].isna().sum() == 4
    with pytest.raises(ValueError, match=r"4 of the 84 training images have no lesion id \(first: ISIC_0000000\)"):
        data.isic_heldout_split(bundle)


def test_a_16_bit_png_is_scaled_to_8_bits_not_saturated(tmp_path):
    """Issue 29, medium: a 16-bit grayscale PNG in the ChestX-ray14 layout was converted with PIL's convert("L"),
    which clips every value above 255: the X-ray became two grey levels. It is scaled by its bit depth
    (v / 257: 0 -> 0, 65535 -> 255), as an 8-bit copy of it would be."""
    root = tmp_path / "ChestXray14"
    written = _chest_layout(root)
    values = {}
    for index, (name, _, _) in enumerate(written["train"]):
        values[name] = 3000 + 14000 * index  # 3000 ... 59000: 12 ... 230 in 8 bits
        pixels = np.full((40, 50), values[name], dtype=np.uint16)
        pixels[:, :25] = values[name] // 2  # two grey levels per image
        Image.fromarray(pixels).save(root / "images" / name)
        assert Image.open(root / "images" / name).mode == "I;16"
    bundle = load_dataset("chestxray14", image_size=12, data_dir=tmp_path)
    means = bundle.train.images.float().mean(dim=(1, 2, 3))
    expected = torch.tensor([(values[n] / 257 + values[n] // 2 / 257) / 2 for n, *_ in written["train"]])
    assert torch.allclose(means, expected, atol=1.5), (means, expected)
    left, right = bundle.train.images[:, 0, 6, 0].float(), bundle.train.images[:, 0, 6, -1].float()
    assert torch.allclose(right, torch.tensor([values[n] / 257 for n, *_ in written["train"]]), atol=1.0)
    assert (right > left).all()
