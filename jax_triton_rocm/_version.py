__version__ = "0.3.0"
"""The package's version, as `pyproject.toml` declares it."""
