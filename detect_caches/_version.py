"""The version, in one place: the package, `detect-caches --version`, result.json's tool field
and the distribution's metadata (pyproject.toml reads it) all take it from here."""
__version__ = "0.2.0"
