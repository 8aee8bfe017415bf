"""The website's API reference (book/api.rst, built by `make book` with autodoc + autosummary) lists every module
of helpers/; the browser test (tests/test_site.py) checks its pages load and document the functions."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def listed_modules() -> list[str]:
    return re.findall(r"^   (helpers(?:\.\w+)+)$", (ROOT / "book" / "api.rst").read_text(), re.MULTILINE)


def test_every_module_of_helpers_has_an_api_page():
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / "helpers").rglob("*.py")
    )
    listed = listed_modules()
    # the program's entry (python -m helpers.course) runs its command line when imported: it has no page
    assert sorted(listed) == [module for module in modules if module not in ("helpers", "helpers.course.__main__")]
    # one section per sub-package: the package's page, then its modules in alphabetical order
    for package in {module.split(".")[1] for module in listed}:
        section = [module for module in listed if module.split(".")[1] == package]
        assert section == [f"helpers.{package}"] + sorted(section[1:])
        assert listed[listed.index(section[0]) : listed.index(section[0]) + len(section)] == section


def test_the_api_reference_is_built_from_the_docstrings_and_in_the_navigation():
    conf = (ROOT / "book" / "conf.py").read_text()
    assert '"sphinx.ext.autodoc"' in conf and '"sphinx.ext.autosummary"' in conf
    assert re.search(r"^:caption: Reference\n\n/book/api$", (ROOT / "book" / "index.md").read_text(), re.MULTILINE)
    assert "book/generated/" in (ROOT / ".gitignore").read_text().splitlines()
