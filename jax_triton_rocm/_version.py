__version__ = "0.1.0"
"""The package's version, as `pyproject.toml` declares it."""
