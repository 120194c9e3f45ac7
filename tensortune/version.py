"""The version, in a module of its own so every stage can read it without importing the package."""

__version__ = "0.1.0"
