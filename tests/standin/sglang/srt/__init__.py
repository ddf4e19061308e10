"""STAND-IN (see ../__init__.py)."""
