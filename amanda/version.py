"""The package version, in a module of its own so any layer can read it without importing
the top-level package (which imports every layer).

>>> from amanda import __version__ as top
>>> __version__ == top
True
"""

__version__ = "0.1.0"
