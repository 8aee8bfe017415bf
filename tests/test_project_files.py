"""LICENSE, CITATION.cff and CHANGELOG.md exist, agree with each other and with pyproject.toml's version (the one
place the version lives), and CITATION.cff is valid Citation File Format 1.2.0.

The CFF 1.2.0 JSON schema in tests/data/cff-schema-1.2.0.json is a verbatim copy of the one the `cffconvert` 2.0.0
package ships (cffconvert/schemas/1.2.0/schema.json, md5 670350a9149d30018fd899501428eef2; from
citation-file-format/citation-file-format, CC BY 4.0): cffconvert itself pins jsonschema < 4, which the course's
environment cannot take.
"""

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import tomllib
import yaml

import helpers

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).resolve().parent / "data" / "cff-schema-1.2.0.json"
RELEASE_HEADING = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.MULTILINE)


def pyproject_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def cff_errors(document: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()), format_checker=jsonschema.FormatChecker())
    return [
        f"{'/'.join(map(str, error.path)) or '(top)'}: {error.message}" for error in validator.iter_errors(document)
    ]


def changelog_releases() -> dict[str, str]:
    """{version: date} of every released version's heading in CHANGELOG.md."""
    return dict(RELEASE_HEADING.findall((ROOT / "CHANGELOG.md").read_text(encoding="utf-8")))


def test_license_is_mit_for_the_code_and_names_each_data_set_licence():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text
    for data_set, licence in (
        ("DermaMNIST", "CC BY-NC 4.0"),
        ("HAM10000", "CC BY-NC 4.0"),
        ("ISIC", "CC BY-NC 4.0"),
        ("ChestMNIST", "CC BY 4.0"),
    ):
        assert data_set in text and licence in text
    assert "ChestX-ray14" in text and "Wang" in text and "CVPR 2017" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "MIT"}


def test_citation_cff_is_valid_cff_1_2_0():
    document = citation()
    assert document["cff-version"] == "1.2.0"
    assert cff_errors(document) == []


def test_the_schema_check_rejects_a_broken_citation():
    broken = dict(citation())
    del broken["authors"]
    broken["date-released"] = "23 November 2026"
    errors = cff_errors(broken)
    assert any("'authors' is a required property" in error for error in errors)
    assert any(error.startswith("date-released") for error in errors)


def test_citation_version_is_pyproject_version():
    assert citation()["version"] == pyproject_version()


def test_package_version_is_pyproject_version():
    # helpers.__version__ comes from the installed metadata: reinstall (make venv) after changing pyproject's version
    assert helpers.__version__ == pyproject_version()


def test_changelog_has_the_current_version_with_the_citation_date():
    releases = changelog_releases()
    assert pyproject_version() in releases, (
        "CHANGELOG.md needs a '## [X.Y.Z] - YYYY-MM-DD' heading for pyproject's version"
    )
    assert str(citation()["date-released"]) == releases[pyproject_version()]
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text and "keepachangelog.com" in text
    assert text.index("## [Unreleased]") < text.index(f"## [{pyproject_version()}]")
    versions = [tuple(map(int, v.split("."))) for v in releases]
    assert versions == sorted(versions, reverse=True), "releases must be listed newest first"


def test_every_version_tag_has_a_changelog_heading():
    try:
        tags = subprocess.run(["git", "tag", "--list", "v*"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (or no git): no tags to check")
    releases = changelog_releases()
    for tag in tags.stdout.split():
        assert re.fullmatch(r"v\d+\.\d+\.\d+", tag), f"tag {tag!r} does not follow vX.Y.Z"
        assert tag[1:] in releases, f"tag {tag} has no '## [{tag[1:]}] - date' heading in CHANGELOG.md"


def test_the_virtual_environment_is_ignored_as_a_folder_and_as_a_link():
    """A git worktree often links a shared .venv: ".venv/" alone ignores only a folder, so the link was committed
    once, and merging that commit replaced the folder of the main checkout."""
    root = Path(__file__).resolve().parent.parent
    # the pattern, not the file on disk: ".venv" (no trailing slash) matches a folder and a link alike
    patterns = [line.strip() for line in (root / ".gitignore").read_text().splitlines()]
    assert ".venv" in patterns or "/.venv" in patterns, ".gitignore must name .venv without a trailing slash"
    assert not subprocess.run(["git", "ls-files", ".venv"], cwd=root, capture_output=True, text=True).stdout
