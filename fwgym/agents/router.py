"""A learned router over the free classical methods as an fwgym agent: :class:`RouterAgent` (issue 29).

It plays the **raw** env, so ``fwgym evaluate --agent router --router-path FILE`` scores it with the one episode
loop like every baseline: ``catalog``, then ``classical_plan`` of every method of the model (free), then the model
(:class:`fwgym.rl.router.RouterModel`) scores the methods from the case's calendar and kind and the plans it was
shown (:func:`fwgym.rl.router.router_inputs`), and the agent submits the plan of the best-scored method. The
features are rebuilt from the observations it receives (:class:`fwgym.rl.tracker.EpisodeTracker`), never from the
case. A router file is JSON data (no code runs when it is read), so the agent runs in the evaluating process.
"""
from __future__ import annotations

from pathlib import Path

from fwgym.rl.features import feature_vector
from fwgym.rl.router import RouterModel, router_inputs
from fwgym.rl.tracker import CATALOG_CALL, EpisodeTracker

__all__ = ["RouterAgent", "RouterAgentFactory"]


class RouterAgent:
    """A :class:`~fwgym.rl.router.RouterModel` playing the raw FWBench env (module docstring).

    Args:
        model_path: the router file (JSON, :meth:`RouterModel.save`).
        name: leaderboard name (default: the file name without ``.json``).

    Attributes:
        model, name; choice: the method submitted in the current episode (``None`` before the decision).

    Raises:
        FileNotFoundError: no such file. ValueError: not a router file for this fwgym (see :meth:`RouterModel.load`).
    """

    def __init__(self, model_path: str | Path, name: str | None = None):
        path = Path(model_path)
        self.model = RouterModel.load(path)
        self.model_path = str(path)
        self.name = name or (path.name[:-5] if path.name.endswith(".json") else path.name)
        self.tracker = EpisodeTracker()
        self.choice: str | None = None
        self._levels: dict[str, list] = {}
        self._last: dict | None = None

    def reset(self) -> None:
        """A new episode: the next ``act`` makes its catalog call."""
        self._last, self._levels, self.choice = None, {}, None

    def act(self, observation: dict) -> dict:
        """The next tool call for the raw observation: catalog, the plans, then the chosen plan's submit (or an
        ``abstain`` saying why, when a plan cannot be had: too few calls left, a failed ``classical_plan``).

        Raises:
            RuntimeError: the env has ``text_observations=False`` (no results to read), or the catalog call failed.
        """
        if not observation.get("context"):
            raise RuntimeError(f"{self.name} reads the text observations (last_result JSON); run it on an env with "
                               "text_observations=True (the default)")
        tr = self.tracker
        if self._last is None:
            tr.reset(observation)
            self._last = CATALOG_CALL
            return CATALOG_CALL
        res = tr.update(self._last, observation)
        if tr.meta is None:
            raise RuntimeError(f"{self.name}: the catalog call failed: {observation['last_result'][:200]}")
        if self._last.get("tool") == "classical_plan":
            m = self._last["args"]["method"]
            if res is None or not res.get("ok"):
                return self._send({"tool": "abstain", "args": {"reason": f"classical_plan({m}) failed"}})
            self._levels[m] = res["result"]["plan"]["levels"]
        pending = [m for m in self.model.methods if m not in self._levels]
        if pending:
            if "classical_plan" not in tr.meta.tools or tr.calls_left < 1:
                return self._send({"tool": "abstain", "args": {
                    "reason": f"the router needs classical_plan for {len(self.model.methods)} methods; the env allows "
                              f"{tr.meta.max_calls} calls and tools {list(tr.meta.tools)}"}})
            return self._send({"tool": "classical_plan", "args": {"method": pending[0]}})
        x = router_inputs(feature_vector(tr, "all"), self._levels, self.model.methods)
        self.choice = self.model.methods[self.model.choose(x)]
        return self._send({"tool": "submit", "args": {"decisions": tr.plans[self.choice]["decisions"]}})

    def _send(self, call: dict) -> dict:
        self._last = call
        return call


class RouterAgentFactory(dict):
    """A picklable, JSON-serialisable zero-argument factory of :class:`RouterAgent` (what ``fwgym evaluate --agent
    router`` builds): :class:`RouterAgent`'s keyword arguments, and ``source`` (``{"file", "sha256"}`` of the router
    file; description only: the run manifest names the model with it)."""

    isolated = False  # a router file is data: nothing of it runs as code

    def __call__(self) -> RouterAgent:
        return RouterAgent(**{k: v for k, v in self.items() if k != "source"})
