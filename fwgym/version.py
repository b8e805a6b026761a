"""The fwgym version (``fwgym.__version__``), in a module of its own so that any layer can name it
without importing the package face (which registers the envs)."""
__all__ = ["__version__"]

__version__ = "0.1.0"
