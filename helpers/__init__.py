"""CalibMed helpers: the shared library behind the course notebooks."""

from importlib.metadata import PackageNotFoundError, version

try:
    # the one place the version lives is pyproject.toml ([project] version); see CHANGELOG.md
    __version__ = version("calibmed")
except PackageNotFoundError:  # imported from a checkout without `pip install -e .`
    __version__ = "unknown (install the package: pip install -e .)"
