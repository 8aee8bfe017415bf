"""CalibMed helpers: the shared library behind the course notebooks."""

__version__ = "0.1.0"
