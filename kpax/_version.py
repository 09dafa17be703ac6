"""The kpax version (one place; imported by every layer that reports it).

Imports: nothing.
"""

__version__ = "0.1.0"
