"""The library version (in every stage fingerprint and export card)."""

__version__ = "0.1.0"
