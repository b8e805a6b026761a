"""Plug-in forecasters of the pool tests, in a module of their own: a plug-in runs in a sandboxed worker that imports
its factory's module, and the worker refuses fwgym's tools, envs and evaluation modules (which the test modules
import), so a factory must not live beside them."""
from fwgym.forecasters.seasonal import SeasonalEmpirical


class ShortContext(SeasonalEmpirical):
    """A plug-in whose instance says 2 (its spec says 24: the spec's rule is the one applied)."""

    min_context = 2
