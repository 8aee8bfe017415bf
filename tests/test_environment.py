"""The conda environment file and pyproject.toml must list the same requirements."""

from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent


def pyproject_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return requirements


def environment_pip_requirements() -> list[str]:
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- pip:")
    requirements = []
    for line in lines[start + 1 :]:
        stripped = line.strip()
        if not stripped.startswith("- "):
            break
        requirement = stripped[2:].strip()
        if requirement != "-e .":
            requirements.append(requirement)
    return requirements


def test_environment_yml_mirrors_pyproject():
    assert sorted(environment_pip_requirements()) == sorted(pyproject_requirements())


def test_no_exact_torch_pin_to_the_local_cpu_wheel():
    # torch==2.13.0 resolves to a local CPU wheel that torchvision cannot import with
    for requirement in pyproject_requirements():
        if requirement.startswith("torch") and not requirement.startswith("torchvision"):
            assert "==2.13.0" not in requirement.replace(" ", "")


@pytest.mark.parametrize("path", ["README.md", "environment.yml", "Makefile", ".ci/run", "data/README.md"])
def test_project_files_exist(path):
    assert (ROOT / path).is_file(), f"{path} is missing"
