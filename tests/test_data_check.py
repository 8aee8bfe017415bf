"""Issue 29: the data a run needs are checked before anything runs (``python -m helpers.course check-data``, which
``make test`` and ``make course`` run first). A missing MedMNIST file is downloaded when the server answers, else
the check stops with one message; a notebook whose real-image folder is absent (ISIC 2018 for 12) is skipped in one
line, recorded as ``skipped`` with its reason, and ``check`` accepts that, unless CALIBMED_REQUIRE_ALL_DATA=1 (CI)."""

import json
import os

import pytest
from local_server import FileServer, closed_port, dermamnist_bytes, md5, sources

from helpers import course, data
from helpers.course import cli, data_check, runner

DERMA = dermamnist_bytes()
SHIFT = "12_dataset_shift"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("CALIBMED_DATA_DIR", str(folder))
    monkeypatch.setenv("CALIBMED_PROGRESS", "final")
    monkeypatch.delenv(data_check.REQUIRE_ALL_DATA_ENV, raising=False)  # CI sets it; these tests choose
    return folder


@pytest.fixture
def papermill_calls(monkeypatch):
    """papermill.execute_notebook replaced by a recorder that writes the executed (or prepared) copy."""
    import papermill

    calls = []

    def execute(source, target, parameters, prepare_only, **kwargs):
        calls.append(os.path.basename(source))
        with open(target, "w") as handle:
            handle.write("{}")

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    return calls


def isic_layout(data_dir, metadata=True):
    """The paths of the official ISIC 2018 layout the check looks for (empty: the check reads no image)."""
    root = data_dir / "ISIC2018"
    for split in ("train", "test"):
        folder, csv_path = data.split_paths(root, split)
        folder.mkdir(parents=True)
        csv_path.parent.mkdir(parents=True)
        csv_path.write_text("image,MEL,NV,BCC,AKIEC,BKL,DF,VASC\n")
    if metadata:
        (root / data.METADATA_FILE).write_text("lesion_id,image_id,dx,dx_type,age,sex,localization,dataset\n")
    return root


def needs_of(prefix, profile="smoke", **extra):
    [notebook] = runner.list_notebooks([prefix])
    return runner.data_needs(notebook, profile, extra)


def test_each_notebooks_needs_come_from_its_profile_and_the_runs_parameters(data_dir):
    [derma] = needs_of("00")
    assert derma.paths == (data_dir / "dermamnist.npz",) and derma.medmnist == ("dermamnist", 28)
    assert derma.hint == "python -m helpers.data fetch dermamnist"
    assert needs_of("00", image_size=64)[0].paths == (data_dir / "dermamnist_64.npz",)
    assert needs_of("00", "full")[0].paths == (data_dir / "dermamnist_224.npz",)  # the full profile's 224 px
    assert needs_of("00", data_dir="/elsewhere")[0].paths[0].parent.as_posix() == "/elsewhere"
    assert needs_of("05") == needs_of("01")  # its synthetic set is generated: nothing to check
    assert needs_of("08") == [] and needs_of("11") == []  # synthetic
    assert needs_of("13") == []  # 13's real X-rays are optional (section 1 says it is skipped)
    assert [need.label for need in needs_of("07", dataset="chestxray14")] == ["NIH ChestX-ray14"]
    assert [need.label for need in needs_of("12")] == [
        "ISIC 2018 Task 3",
        "HAM10000's metadata (its acquisition-site split)",
    ]
    # no profile given: the notebook's own default (notebook 00's parameters cell says reference: 28 px)
    assert needs_of("00", None)[0].paths == (data_dir / "dermamnist.npz",)


def test_a_notebook_whose_real_images_are_absent_is_skipped_with_why_and_how(data_dir):
    reason = data_check.skip_reason(needs_of("12"))
    assert reason.startswith("it needs ISIC 2018 Task 3, which is not in place")
    assert str(data_dir / "ISIC2018" / "ISIC2018_Task3_Training_Input") in reason
    assert "`python -m helpers.data fetch isic2018`" in reason
    isic_layout(data_dir, metadata=False)
    reason = data_check.skip_reason(needs_of("12"))
    assert "HAM10000's metadata" in reason and str(data_dir / "ISIC2018" / data.METADATA_FILE) in reason
    isic_layout(data_dir / "other")
    assert data_check.skip_reason(needs_of("12", data_dir=str(data_dir / "other"))) is None
    assert data_check.skip_reason(needs_of("00")) is None  # a missing MedMNIST file is fetched, never skipped


def test_a_run_without_isic_skips_12_in_one_line_and_check_accepts_it(data_dir, papermill_calls, tmp_path, capsys):
    out = tmp_path / "smoke"
    cli.main(["prepare", "--profile", "smoke", "--notebooks", "00", "12", "--out", str(out)])
    assert papermill_calls == ["00_start_here.ipynb"]
    assert sorted(p.name for p in (out / "notebooks").iterdir()) == ["00_start_here.ipynb"]  # nbval runs only 00
    printed = [line for line in capsys.readouterr().out.splitlines() if SHIFT in line]
    assert len(printed) == 1 and "skipped: it needs ISIC 2018 Task 3" in printed[0]
    rows = {row["notebook"]: row for row in json.loads((out / "summary.json").read_text())["notebooks"]}
    assert rows[SHIFT]["status"] == "skipped" and "fetch isic2018" in rows[SHIFT]["reason"]
    assert "| 12_dataset_shift | skipped: it needs ISIC 2018" in (out / "summary.md").read_text()
    (out / "results" / "00_start_here.json").write_text(json.dumps({"notebook": "00_start_here", "results": {"x": 1}}))
    course.check_results(out)
    assert capsys.readouterr().out.strip() == (
        "results check: all 1 notebooks of this run wrote their results JSON; "
        "skipped for want of data: 12_dataset_shift"
    )


def test_ci_forbids_the_skip_before_anything_runs_and_in_check(data_dir, papermill_calls, tmp_path, monkeypatch):
    out = tmp_path / "smoke"
    cli.main(["prepare", "--profile", "smoke", "--notebooks", "00", "12", "--out", str(out)])
    (out / "results" / "00_start_here.json").write_text(json.dumps({"notebook": "00_start_here", "results": {"x": 1}}))
    monkeypatch.setenv(data_check.REQUIRE_ALL_DATA_ENV, "1")
    with pytest.raises(
        SystemExit, match=r"12_dataset_shift: skipped \(it needs ISIC.*\) but CALIBMED_REQUIRE_ALL_DATA=1"
    ):
        course.check_results(out)
    papermill_calls.clear()
    with pytest.raises(
        SystemExit, match=r"nothing was run: CALIBMED_REQUIRE_ALL_DATA=1 but 12_dataset_shift: it needs"
    ):
        cli.main(["prepare", "--profile", "smoke", "--notebooks", "00", "12", "--out", str(tmp_path / "again")])
    assert papermill_calls == [] and not (tmp_path / "again").exists()
    with pytest.raises(
        SystemExit, match=r"CALIBMED_REQUIRE_ALL_DATA=1 .* nothing was run:\n  12_dataset_shift: it needs"
    ):
        cli.main(["check-data", "--profile", "smoke", "--notebooks", "12"])
    isic_layout(data_dir)  # with the data (as CI's shared folder has them) everything runs
    cli.main(["prepare", "--profile", "smoke", "--notebooks", "12", "--out", str(tmp_path / "again")])
    assert papermill_calls == ["12_dataset_shift.ipynb"]


def test_check_refuses_a_skip_without_a_reason_and_publish_refuses_any_skip(tmp_path, monkeypatch):
    monkeypatch.delenv(data_check.REQUIRE_ALL_DATA_ENV, raising=False)  # CI sets it; here check accepts a skip
    out = tmp_path / "run"
    (out / "results").mkdir(parents=True)
    row = {"notebook": SHIFT, "status": "skipped", "seconds": 0.0, "error": None, "reason": " ", "results": "x"}
    summary = {"profile": "reference", "started_at": 0.0, "notebooks": [row]}
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SystemExit, match="12_dataset_shift: skipped in this run without a reason"):
        course.check_results(out)
    row["reason"] = "it needs ISIC 2018 Task 3"
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SystemExit, match="nothing was published: .* skipped 12_dataset_shift for want of data"):
        course.publish(out)


def test_check_data_fetches_a_missing_medmnist_file_and_names_the_skipped_notebook(data_dir, monkeypatch, capsys):
    with FileServer({"/d.npz": DERMA}) as server:
        monkeypatch.setenv(data.TEST_SOURCES_ENV, sources(**{"dermamnist.npz": (server.url("/d.npz"), md5(DERMA))}))
        cli.main(["check-data", "--profile", "smoke"])
        assert [method for method, _ in server.requests] == ["GET"]  # once, though seven notebooks read it
    assert (data_dir / "dermamnist.npz").read_bytes() == DERMA
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in out if "skipped" in line] == [SHIFT]
    assert out[-1] == "data check: the data of 13 of 14 notebook(s) are in place"
    cli.main(["check-data", "--profile", "smoke", "--notebooks", "00"])  # present now: nothing to download
    assert capsys.readouterr().out == "data check: the data of 1 of 1 notebook(s) are in place\n"


def test_without_the_file_and_the_network_check_data_stops_with_one_message(data_dir, monkeypatch, capsys):
    url = f"http://127.0.0.1:{closed_port()}/dermamnist.npz"
    monkeypatch.setenv(data.TEST_SOURCES_ENV, sources(**{"dermamnist.npz": (url, "0123")}))
    with pytest.raises(SystemExit) as stop:
        cli.main(["check-data", "--profile", "smoke"])
    message = str(stop.value)
    assert len(message.splitlines()) == 1 and message.startswith("error: nothing was run. DermaMNIST (dermamnist.npz")
    for expected in (
        f"could not reach {url}",
        f"Put dermamnist.npz in the data directory {data_dir}",
        "`python -m helpers.data fetch dermamnist` (make data)",
        f"download {url} (md5 0123) and save it as {data_dir / 'dermamnist.npz'}",
    ):
        assert expected in message
    assert os.listdir(data_dir) == []
    with pytest.raises(SystemExit, match="--no-fetch: not downloaded"):
        cli.main(["check-data", "--notebooks", "00", "--no-fetch"])
