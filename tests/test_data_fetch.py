"""Issue 29: ``python -m helpers.data fetch NAME`` downloads a data set from its official source. Offline here: every
download goes to a server on 127.0.0.1 serving generated files (CALIBMED_FETCH_TEST_SOURCES, tests only). A good
file arrives md5-checked under the name the loader reads; a wrong md5, a transfer cut off halfway or a read-only
data directory leave nothing behind and end in one clear message."""

import io
import os
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from local_server import FileServer, closed_port, dermamnist_bytes, md5, sources
from medmnist import INFO

from helpers import data
from helpers.data import __main__ as data_cli
from helpers.data import fetch

REPO_ROOT = Path(__file__).resolve().parent.parent
DERMA = dermamnist_bytes()


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    monkeypatch.setenv("CALIBMED_DATA_DIR", str(folder))
    monkeypatch.setenv("CALIBMED_PROGRESS", "final")
    return folder


def serve(monkeypatch, server, **entries):
    """Point the test sources at ``server``: ``serve(mp, server, **{"dermamnist.npz": ("/d.npz", md5)})``."""
    located = {name: (server.url(path), digest) for name, (path, digest) in entries.items()}
    monkeypatch.setenv(fetch.TEST_SOURCES_ENV, sources(**located))


def test_the_official_source_of_a_medmnist_file_is_medmnists_url_and_md5(monkeypatch):
    monkeypatch.delenv(fetch.TEST_SOURCES_ENV, raising=False)
    source = fetch.medmnist_source("dermamnist", 64)
    assert (source.url, source.md5) == (INFO["dermamnist"]["url_64"], INFO["dermamnist"]["MD5_64"])
    assert source.filename == "dermamnist_64.npz" == data.medmnist_filename("dermamnist", 64)
    assert fetch.medmnist_source("dermamnist").filename == "dermamnist.npz"
    assert fetch.fetch_command("dermamnist", 64) == "python -m helpers.data fetch dermamnist --size 64"
    with pytest.raises(ValueError, match="sizes"):
        fetch.medmnist_source("dermamnist", 32)
    with pytest.raises(ValueError, match="unknown MedMNIST 2D data set 'organmnist3d'"):
        fetch.medmnist_source("organmnist3d")


def test_the_test_override_takes_only_a_server_on_this_machine(monkeypatch):
    monkeypatch.setenv(fetch.TEST_SOURCES_ENV, sources(**{"dermamnist.npz": ("https://example.org/d.npz", None)}))
    with pytest.raises(ValueError, match="only a URL on this machine.*for tests only"):
        fetch.medmnist_source("dermamnist")
    monkeypatch.setenv(fetch.TEST_SOURCES_ENV, "not json")
    with pytest.raises(ValueError, match="not JSON"):
        fetch.medmnist_source("dermamnist")


def test_a_good_download_arrives_md5_checked_under_the_name_the_loader_reads(data_dir, monkeypatch, capsys):
    with FileServer({"/dermamnist.npz": DERMA}) as server:
        serve(monkeypatch, server, **{"dermamnist.npz": ("/dermamnist.npz", md5(DERMA))})
        data_cli.main(["fetch", "dermamnist"])
    target = data_dir / "dermamnist.npz"
    assert target.read_bytes() == DERMA and sorted(os.listdir(data_dir)) == ["dermamnist.npz"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # the process's umask, as for any new file
    out = capsys.readouterr().out
    assert f"md5 {md5(DERMA)} checked" in out
    assert f"dermamnist.npz: {fetch.size_text(len(DERMA))} in" in out  # the progress line (one, in "final" mode)
    bundle = data.load_medmnist("dermamnist")
    assert len(bundle.train) == 40 and bundle.class_names[0] == INFO["dermamnist"]["label"]["0"]
    with FileServer({}) as server:  # a file already there is kept: nothing is requested
        serve(monkeypatch, server, **{"dermamnist.npz": ("/dermamnist.npz", md5(DERMA))})
        data_cli.main(["fetch", "dermamnist"])
        assert server.requests == []
    assert "already there" in capsys.readouterr().out


def test_a_wrong_md5_is_refused_and_leaves_nothing(data_dir, monkeypatch):
    with FileServer({"/dermamnist.npz": DERMA}) as server:
        serve(monkeypatch, server, **{"dermamnist.npz": ("/dermamnist.npz", "0" * 32)})
        with pytest.raises(SystemExit) as stop:
            data_cli.main(["fetch", "dermamnist"])
    message = str(stop.value)
    assert f"has md5 {md5(DERMA)}, not the official {'0' * 32}: refused" in message
    assert "nothing was written" in message and "save it as" in message
    assert os.listdir(data_dir) == []  # no file, no temporary file


def test_an_interrupted_download_leaves_no_file_under_the_real_name(data_dir, monkeypatch):
    with FileServer({"/dermamnist.npz": DERMA}, truncated=("/dermamnist.npz",)) as server:
        serve(monkeypatch, server, **{"dermamnist.npz": ("/dermamnist.npz", md5(DERMA))})
        with pytest.raises(data.FetchError, match=rf"interrupted: {len(DERMA) // 2:,} of its {len(DERMA):,} bytes"):
            data.fetch_medmnist("dermamnist")
        assert os.listdir(data_dir) == []
        old = b"an earlier copy"
        (data_dir / "dermamnist.npz").write_bytes(old)
        with pytest.raises(data.FetchError, match="interrupted"):
            data.fetch_medmnist("dermamnist", force=True)  # a failed replacement keeps the file that was there
    assert (data_dir / "dermamnist.npz").read_bytes() == old and os.listdir(data_dir) == ["dermamnist.npz"]


def test_no_server_is_one_message_with_the_file_its_place_and_where_to_get_it(data_dir, monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/dermamnist.npz"
    monkeypatch.setenv(fetch.TEST_SOURCES_ENV, sources(**{"dermamnist.npz": (url, "abc")}))
    with pytest.raises(SystemExit) as stop:
        data_cli.main(["fetch", "dermamnist"])
    message = str(stop.value)
    assert message.startswith(f"error: could not reach {url}")
    assert f"download {url} (md5 abc) and save it as {data_dir / 'dermamnist.npz'}" in message
    assert not data_dir.exists() or os.listdir(data_dir) == []


def as_another_user(function) -> str:
    """Run ``function`` in a forked child that has become the user nobody (root may write anywhere, so a
    read-only folder is only read-only to another user); the text of the SystemExit it raised, or "no error"."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run, report through the pipe, leave without running pytest's exit code
        result = "no error"
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            function()
        except SystemExit as stop:
            result = str(stop.code)
        except BaseException as error:  # noqa: B036 (reported to the parent, which fails the test)
            result = f"unexpected {type(error).__name__}: {error}"
        finally:
            os.write(write, result.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text


@pytest.fixture
def open_folder():
    """A folder every user may enter (pytest's own temporary folders are private to their owner)."""
    folder = Path(tempfile.mkdtemp(prefix="calibmed-readonly-"))
    folder.chmod(0o755)
    yield folder
    folder.chmod(0o755)
    shutil.rmtree(folder)


def test_a_read_only_data_directory_is_a_clear_error_before_any_download(open_folder, monkeypatch):
    data_dir = open_folder / "data"
    data_dir.mkdir(mode=0o755)
    monkeypatch.setenv("CALIBMED_DATA_DIR", str(data_dir))
    with FileServer({"/dermamnist.npz": DERMA}) as server:
        serve(monkeypatch, server, **{"dermamnist.npz": ("/dermamnist.npz", md5(DERMA))})
        if os.geteuid() == 0:
            message = as_another_user(lambda: data_cli.main(["fetch", "dermamnist"]))
        else:
            data_dir.chmod(0o555)
            with pytest.raises(SystemExit) as stop:
                data_cli.main(["fetch", "dermamnist"])
            message = str(stop.value)
        requests = list(server.requests)
    assert message == f"error: {fetch.not_writable(data_dir)}"
    assert "--data-dir or the environment variable CALIBMED_DATA_DIR" in message
    assert requests == []  # refused before anything was downloaded
    assert os.listdir(data_dir) == []


def isic_zip(folder: str, files: dict[str, bytes]) -> bytes:
    path_bytes = {f"{folder}/{name}": content for name, content in files.items()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in path_bytes.items():
            archive.writestr(name, content)
        archive.writestr("../escape.txt", b"zipfile drops the '..'")  # outside the folder: not unpacked
    return buffer.getvalue()


ISIC_FILES = {
    "ISIC2018_Task3_Training_Input": {"ISIC_0000001.jpg": b"jpeg 1", "ISIC_0000002.jpg": b"jpeg 2"},
    "ISIC2018_Task3_Training_GroundTruth": {"ISIC2018_Task3_Training_GroundTruth.csv": b"image,MEL\n"},
    "ISIC2018_Task3_Test_Input": {"ISIC_0000003.jpg": b"jpeg 3"},
    "ISIC2018_Task3_Test_GroundTruth": {"ISIC2018_Task3_Test_GroundTruth.csv": b"image,MEL\n"},
}


def test_isic2018_says_the_sizes_asks_then_downloads_and_unpacks_the_official_layout(data_dir, monkeypatch, capsys):
    archives = {f"/{folder}.zip": isic_zip(folder, files) for folder, files in ISIC_FILES.items()}
    with FileServer(archives) as server:
        serve(monkeypatch, server, **{f"{folder}.zip": (f"/{folder}.zip", None) for folder in ISIC_FILES})
        asked = []
        with pytest.raises(data.FetchError, match="nothing was downloaded"):
            data.fetch_isic2018(ask=lambda question: asked.append(question) or "n")
        assert [method for method, _ in server.requests] == ["HEAD"] * 4 and not data_dir.exists()
        total = sum(len(archive) for archive in archives.values())
        assert asked == [f"Download {fetch.size_text(total)} into {data_dir / 'ISIC2018'} and unpack it there? [y/N] "]
        listing = capsys.readouterr().out
        for folder in ISIC_FILES:
            assert f"{folder}.zip" in listing and fetch.size_text(len(archives[f"/{folder}.zip"])) in listing
        monkeypatch.setattr(sys, "stdin", open(os.devnull))  # not a terminal: no question, a refusal
        with pytest.raises(SystemExit, match="pass --yes"):
            data_cli.main(["fetch", "isic2018"])
        data_cli.main(["fetch", "isic2018", "--yes"])
    root = data_dir / "ISIC2018"
    for folder, files in ISIC_FILES.items():
        assert {p.name: p.read_bytes() for p in (root / folder).iterdir()} == files
    assert sorted(p.name for p in root.iterdir()) == sorted(ISIC_FILES)  # archives deleted, nothing else
    assert not (data_dir / "escape.txt").exists() and not (data_dir.parent / "escape.txt").exists()
    assert "HAM10000_metadata" in capsys.readouterr().out  # what notebook 12 still needs, and where it comes from
    assert list(data.isic2018.find_layout(root)) == ["train", "test"]  # the layout the loader reads


def test_an_isic_archive_without_its_folder_is_refused_and_kept(data_dir, monkeypatch):
    bad = isic_zip("something_else", {"a.jpg": b"x"})
    archives = {f"/{folder}.zip": isic_zip(folder, files) for folder, files in ISIC_FILES.items()}
    archives["/ISIC2018_Task3_Test_Input.zip"] = bad
    with FileServer(archives) as server:
        serve(monkeypatch, server, **{f"{folder}.zip": (f"/{folder}.zip", None) for folder in ISIC_FILES})
        with pytest.raises(data.FetchError, match=r"ISIC2018_Task3_Test_Input.zip holds no folder .*something_else"):
            data.fetch_isic2018(yes=True)
    root = data_dir / "ISIC2018"
    assert not (root / "ISIC2018_Task3_Test_Input").exists()
    assert (root / "ISIC2018_Task3_Test_Input.zip").read_bytes() == bad  # kept, named in the message
    assert not [p for p in root.iterdir() if p.name.endswith(".unpacking")]


def test_chestxray14_says_what_to_download_and_where(tmp_path, capsys):
    data_cli.main(["fetch", "chestxray14", "--data-dir", str(tmp_path)])
    text = capsys.readouterr().out
    root = tmp_path / "ChestXray14"
    for expected in (
        "https://nihcc.app.box.com/v/ChestXray-NIHCC",
        "images_001.tar.gz",
        f"-C {root}",
        str(root / "Data_Entry_2017.csv"),
        str(root / "chestmnist_split"),
        "arnoweng/CheXNet",
    ):
        assert expected in text
    assert not root.exists()  # nothing downloaded, nothing created


def test_the_command_refuses_an_unknown_name_and_size(capsys):
    for argv in (["fetch", "imagenet"], ["fetch", "dermamnist", "--size", "32"]):
        with pytest.raises(SystemExit):
            data_cli.main(argv)
    assert "invalid choice" in capsys.readouterr().err
