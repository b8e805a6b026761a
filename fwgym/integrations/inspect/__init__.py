"""fwgym in inspect-ai: the tasks ``fwgym/decision``, ``fwgym/context``, ``fwgym/forecast``
(:mod:`~fwgym.integrations.inspect.tasks`), the offline model ``fwgym/scripted``
(:mod:`~fwgym.integrations.inspect.model`), the scorer and its metrics (:mod:`~fwgym.integrations.inspect.scorer`),
the chat harness with an inspect model as backend (:mod:`~fwgym.integrations.inspect.agent`) and reading logs back
(:mod:`~fwgym.integrations.inspect.logs`, ``fwgym import-inspect``).

This module is inspect's entry point for fwgym (``[project.entry-points.inspect_ai] fwgym =
"fwgym.integrations.inspect"``): importing it registers the tasks and the model API, so ``inspect eval
fwgym/decision --model fwgym/scripted`` needs no file path. Needs the ``inspect`` extra.
"""
from fwgym.integrations.inspect.model import ScriptedModel
from fwgym.integrations.inspect.tasks import context, decision, forecast

__all__ = ["decision", "context", "forecast", "ScriptedModel"]
