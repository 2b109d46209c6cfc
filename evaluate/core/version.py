"""The project's version, in a leaf module: anything may import it without importing the package
root (which also holds the command line)."""

__version__ = "0.1.0"
