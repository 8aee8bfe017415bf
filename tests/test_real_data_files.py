"""Issue 29, low-severity defects of the real-data readers and their decode cache: every bad file is named with what
is wrong and how to fix it, a damaged cache is rebuilt (with a warning), a replaced image is never served stale, and
the loader's own arguments are checked before any image is decoded."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from PIL import Image
from test_real_data import _chest_layout, _ham_layout

from helpers.data import chestxray14, image_files, isic2018, load_chestxray14, load_isic2018


def _cache_file(cache_dir):
    [path] = cache_dir.glob("isic2018-*.npz")
    return path


@pytest.mark.parametrize("damage", ["truncated", "not a zip", "empty"])
def test_a_damaged_image_cache_is_rebuilt_with_a_warning_naming_it(tmp_path, damage):
    root, cache_dir = tmp_path / "ISIC2018", tmp_path / "cache"
    _ham_layout(root)
    first = load_isic2018(root, image_size=8, cache_dir=cache_dir)
    path = _cache_file(cache_dir)
    content = path.read_bytes()
    path.write_bytes({"truncated": content[: len(content) // 2], "not a zip": b"junk" * 100, "empty": b""}[damage])
    with pytest.warns(UserWarning, match=rf"{path.name}.*damaged.*rebuilt") as caught:
        again = load_isic2018(root, image_size=8, cache_dir=cache_dir)
    assert len([w for w in caught if w.category is UserWarning and path.name in str(w.message)]) == 1
    assert np.array_equal(again.train.images.numpy(), first.train.images.numpy())
    with warnings.catch_warnings():  # rebuilt: the next load reads it without a word
        warnings.simplefilter("error")
        load_isic2018(root, image_size=8, cache_dir=cache_dir)


def test_an_image_replaced_at_the_same_size_with_its_time_restored_is_not_served_stale(tmp_path):
    root, cache_dir = tmp_path / "ISIC2018", tmp_path / "cache"
    _ham_layout(root)
    load_isic2018(root, image_size=8, cache_dir=cache_dir)
    victim = isic2018.split_paths(root, "test")[0] / "ISIC_9000000.jpg"
    before = victim.stat()
    replacement = tmp_path / "replacement.jpg"
    Image.new("RGB", (60, 45), (255, 0, 0)).save(replacement, quality=50)
    red = replacement.read_bytes()
    assert len(red) <= before.st_size
    replacement.write_bytes(red + b"\0" * (before.st_size - len(red)))  # bytes after the JPEG's end are ignored
    assert replacement.stat().st_size == before.st_size
    victim.write_bytes(replacement.read_bytes())  # rewritten in place: same name, same size
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old modification time put back
    assert victim.stat().st_size == before.st_size and victim.stat().st_mtime_ns == before.st_mtime_ns
    again = load_isic2018(root, image_size=8, cache_dir=cache_dir)
    assert again.test.images[0, 0].float().mean() > 240 and again.test.images[0, 2].float().mean() < 15


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"val_fraction": 0.0}, "val_fraction"),
        ({"val_fraction": 1.5}, "val_fraction"),
        ({"val_fraction": float("nan")}, "val_fraction"),
        ({"val_fraction": True}, "val_fraction"),
        ({"split_seed": -1}, "split_seed"),
        ({"split_seed": 0.5}, "split_seed"),
    ],
)
def test_load_isic2018_checks_val_fraction_and_split_seed_before_decoding(tmp_path, monkeypatch, arguments, message):
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    monkeypatch.setattr(image_files, "decode_resized", lambda *a, **k: pytest.fail("decoded before the check"))
    with pytest.raises(ValueError, match=message):
        load_isic2018(root, image_size=8, cache=False, **arguments)


def test_load_isic2018_takes_a_numpy_integer_seed(tmp_path):
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    bundle = load_isic2018(root, image_size=8, cache=False, split_seed=np.int64(1))
    assert len(bundle.val) > 0


def _write_bytes_as(path, text: str, encoding: str) -> None:
    path.write_bytes(text.encode(encoding))


@pytest.mark.parametrize("which", ["ground truth", "metadata"])
def test_isic_csv_files_with_a_byte_order_mark_are_read(tmp_path, which):
    root = tmp_path / "ISIC2018"
    frame, _ = _ham_layout(root)
    path = isic2018.split_paths(root, "train")[1] if which == "ground truth" else root / isic2018.METADATA_FILE
    _write_bytes_as(path, path.read_text(), "utf-8-sig")
    bundle = load_isic2018(root, image_size=8, cache=False)
    assert len(bundle.train) + len(bundle.val) == len(frame)


@pytest.mark.parametrize("which", ["ground truth", "metadata"])
def test_isic_csv_files_that_are_not_utf8_are_named(tmp_path, which):
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    path = isic2018.split_paths(root, "train")[1] if which == "ground truth" else root / isic2018.METADATA_FILE
    _write_bytes_as(path, path.read_text().replace("ISIC_0000001", "ISIC_000000\u00e91"), "utf-16")
    with pytest.raises(ValueError, match=rf"{path.name}.*not UTF-8.*save it as UTF-8"):
        load_isic2018(root, image_size=8, cache=False)


def test_an_empty_isic_metadata_file_is_named(tmp_path):
    root = tmp_path / "ISIC2018"
    _ham_layout(root)
    (root / isic2018.METADATA_FILE).write_bytes(b"")
    with pytest.raises(ValueError, match=rf"{isic2018.METADATA_FILE}.*empty.*HAM10000"):
        load_isic2018(root, image_size=8, cache=False)


def test_an_unknown_acquisition_site_in_the_metadata_is_refused(tmp_path):
    root = tmp_path / "ISIC2018"
    frame, _ = _ham_layout(root)
    frame.assign(dataset=frame["dataset"].replace("rosendahl", "rosendal")).to_csv(
        root / isic2018.METADATA_FILE, index=False
    )
    with pytest.raises(ValueError, match=r"HAM10000_metadata.csv.*unknown acquisition site.*rosendal.*vidir_molemax"):
        load_isic2018(root, image_size=8, cache=False)


@pytest.mark.parametrize("which", ["data entry", "split list"])
def test_chestxray14_text_files_that_are_not_utf8_are_named(tmp_path, which):
    root = tmp_path / "ChestXray14"
    _chest_layout(root)
    path = root / chestxray14.LABEL_FILE if which == "data entry" else root / chestxray14.LIST_FOLDER / "val_list.txt"
    _write_bytes_as(path, path.read_text(), "utf-16")
    with pytest.raises(ValueError, match=rf"{path.name}.*not UTF-8.*save it as UTF-8"):
        load_chestxray14(root, image_size=8, cache=False)


@pytest.mark.parametrize("which", ["data entry", "split list"])
def test_chestxray14_text_files_with_a_byte_order_mark_are_read(tmp_path, which):
    root = tmp_path / "ChestXray14"
    _chest_layout(root)
    path = root / chestxray14.LABEL_FILE if which == "data entry" else root / chestxray14.LIST_FOLDER / "val_list.txt"
    _write_bytes_as(path, path.read_text(), "utf-8-sig")
    bundle = load_chestxray14(root, image_size=8, cache=False)
    assert len(bundle.val) == 2


def test_an_empty_chestxray14_label_file_is_named(tmp_path):
    root = tmp_path / "ChestXray14"
    _chest_layout(root)
    (root / chestxray14.LABEL_FILE).write_bytes(b"")
    with pytest.raises(ValueError, match=rf"{chestxray14.LABEL_FILE}.*empty"):
        load_chestxray14(root, image_size=8, cache=False)


def test_a_decompression_bomb_is_named(tmp_path, monkeypatch):
    path = tmp_path / "bomb.png"
    Image.new("L", (200, 200), 0).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 40,000 pixels: over twice the limit, a bomb to PIL
    with pytest.raises(ValueError, match=r"bomb\.png.*decompression bomb"):
        image_files.decode_resized([path], 8, "L", "test")
