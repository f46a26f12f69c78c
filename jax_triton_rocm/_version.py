__version__ = "0.2.0"
"""The package's version, as `pyproject.toml` declares it."""
