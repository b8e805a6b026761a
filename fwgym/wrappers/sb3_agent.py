"""A trained stable-baselines3 policy as an fwgym agent (DESIGN §9, issue 5).

:class:`SB3Agent` plays the **raw** env (``act(observation) -> tool call``), so a learned policy is
evaluated by :func:`fwgym.evaluation.evaluate` / ``fwgym evaluate --agent sb3 --model-path FILE``
exactly like the baselines. It drives the same :class:`~fwgym.wrappers.macro.MacroController` the
training wrappers use: it sends the ``catalog`` call, rebuilds the feature vector from the
observations it receives (:mod:`fwgym.wrappers.features`), asks the policy for a menu entry (with
the action mask for MaskablePPO) and emits that macro's tool calls one by one. The calls, and hence
the score, are identical to running the wrapper with the same policy.

Save models with :func:`save_policy`, which records the wrapper variant, the feature names and
the feature version in the SB3 zip (as the model attribute ``fwgym_spec``) so the agent rebuilds
exactly the inputs the policy was trained on. Models saved with plain ``model.save`` also load;
the variant is then inferred from the size of the action space (12: ``macro``, 28: ``sequential``)
and the feature set from the observation size (403: ``all``, 56: ``compact``).
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from fwgym.wrappers.features import FEATURE_SETS, FEATURE_VERSION, resolve_features
from fwgym.wrappers.macro import MENUS, MacroController

ALGOS = ("auto", "PPO", "MaskablePPO")


def policy_spec(variant: str, algo: str, features="all") -> dict:
    """The metadata :func:`save_policy` stores with a model: variant, algorithm, menu names,
    feature names (in input order) and feature version."""
    names = resolve_features(features)
    return {"variant": variant, "algo": algo, "menu": [e.name for e in MENUS[variant]],
            "features": list(names), "n_features": len(names), "feature_version": FEATURE_VERSION}


def save_policy(model, path: str | Path, variant: str = "macro", features="all") -> Path:
    """Save an SB3 model trained on a macro wrapper, with its fwgym spec (see :func:`policy_spec`).

    Args:
        model: a trained ``PPO`` / ``MaskablePPO`` (or other SB3 algorithm) instance.
        path: target file; ``.zip`` is appended when missing (SB3's convention).
        variant: ``"macro"`` or ``"sequential"`` (the wrapper it was trained on).
        features: the wrapper's feature set (``"all"``, ``"compact"`` or a sequence of names).

    Returns:
        the path of the written zip.

    Raises:
        ValueError: unknown variant or feature set, or the model's spaces do not match them.
    """
    if variant not in MENUS:
        raise ValueError(f"variant must be one of {list(MENUS)}, got {variant!r}")
    names = resolve_features(features)
    _check_spaces(model, variant, names)
    model.fwgym_spec = policy_spec(variant, type(model).__name__, names)
    path = Path(path)
    if path.suffix != ".zip":
        path = path.with_name(path.name + ".zip")
    model.save(path)
    return path


def read_spec(path: str | Path) -> dict | None:
    """The ``fwgym_spec`` stored in an SB3 zip, or ``None`` (plain ``model.save``)."""
    try:
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("data"))
    except (KeyError, ValueError, zipfile.BadZipFile):
        return None
    spec = data.get("fwgym_spec")
    return spec if isinstance(spec, dict) else None


def resolve_model_path(path: str | Path) -> Path:
    """``path`` or ``path + ".zip"``, whichever exists.

    Raises:
        FileNotFoundError: neither exists.
    """
    p = Path(path)
    if p.is_file():
        return p
    z = p.with_name(p.name + ".zip")
    if z.is_file():
        return z
    raise FileNotFoundError(f"no SB3 model file at {p} (nor {z})")


def _check_spaces(model, variant: str, names: tuple[str, ...]) -> None:
    shape = tuple(getattr(model.observation_space, "shape", ()) or ())
    n = getattr(model.action_space, "n", None)
    if shape != (len(names),) or n != len(MENUS[variant]):
        raise ValueError(f"the model's spaces (observation {shape}, {n} actions) do not match the fwgym "
                         f"{variant!r} wrapper (observation ({len(names)},), {len(MENUS[variant])} actions)")


def _load(path: Path, algo: str):
    if algo == "MaskablePPO":
        try:
            from sb3_contrib import MaskablePPO
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ValueError("algo 'MaskablePPO' needs sb3-contrib: pip install 'fwgym[rl]'") from exc
        return MaskablePPO.load(path, device="cpu")
    try:
        from stable_baselines3 import PPO
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ValueError("SB3 agents need stable-baselines3: pip install 'fwgym[rl]'") from exc
    return PPO.load(path, device="cpu")


class SB3Agent:
    """A trained SB3 macro policy playing the raw FWBench env.

    Args:
        model_path: the model zip (``.zip`` may be omitted).
        algo: ``"PPO"``, ``"MaskablePPO"`` or ``"auto"`` (default: the algorithm recorded by
            :func:`save_policy`, else PPO). With MaskablePPO the policy sees the action mask.
        name: leaderboard name (default: the file name without ``.zip``).
        deterministic: take the most likely entry (default) instead of sampling.

    Attributes:
        variant: ``"macro"`` or ``"sequential"``; feature_names: the policy's inputs;
        controller: the :class:`MacroController`;
        choices: menu entry names chosen in the current episode.

    Raises:
        FileNotFoundError: no model file. ValueError: unknown algo, missing sb3/sb3-contrib, or a
            model whose spaces/spec do not match the fwgym features and menus.
    """

    def __init__(self, model_path: str | Path, algo: str = "auto", name: str | None = None, deterministic: bool = True):
        if algo not in ALGOS:
            raise ValueError(f"algo must be one of {list(ALGOS)}, got {algo!r}")
        path = resolve_model_path(model_path)
        spec = read_spec(path) or {}
        if spec and spec.get("feature_version") != FEATURE_VERSION:
            raise ValueError(f"{path}: trained on fwgym features v{spec.get('feature_version')}; "
                             f"this fwgym computes v{FEATURE_VERSION}")
        if algo == "auto":
            algo = spec.get("algo") if spec.get("algo") in ALGOS[1:] else "PPO"
        self.algo, self.model_path, self.deterministic = algo, str(path), deterministic
        self.model = _load(path, algo)
        n = getattr(self.model.action_space, "n", None)
        variant = spec.get("variant") or {len(m): v for v, m in MENUS.items()}.get(n)
        if variant not in MENUS:
            raise ValueError(f"{path}: cannot tell the macro menu of a policy with {n} actions")
        if spec.get("features"):
            names = resolve_features(spec["features"])
        else:
            dim = tuple(getattr(self.model.observation_space, "shape", ()) or ())
            names = next((v for v in FEATURE_SETS.values() if (len(v),) == dim), FEATURE_SETS["all"])
        _check_spaces(self.model, variant, names)
        if spec.get("menu") and spec["menu"] != [e.name for e in MENUS[variant]]:
            raise ValueError(f"{path}: the model's menu differs from this fwgym's {variant!r} menu")
        self.variant = variant
        self.name = name or (path.name[:-4] if path.name.endswith(".zip") else path.name)
        self.feature_names = names
        self.controller = MacroController(variant, names)
        self.choices: list[str] = []
        self._last: Any = None

    def reset(self) -> None:
        """Forget the previous episode (called by :func:`fwgym.agents.run_episode`)."""
        self._last = None
        self.choices = []

    def policy_choice(self) -> int:
        """The policy's menu index for the controller's current state (masked for MaskablePPO)."""
        obs = self.controller.features()
        if self.algo == "MaskablePPO":
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=self.controller.action_masks())
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        return int(np.asarray(action).reshape(-1)[0])

    def act(self, observation: dict) -> dict:
        """Next tool call (a dict) for the raw observation.

        Raises:
            RuntimeError: the catalog call of the episode failed (e.g. the env forbids it), or the env
                has ``text_observations=False`` (empty context and results).
        """
        ctl = self.controller
        if not observation.get("context"):
            raise RuntimeError(f"{self.name} reads the text observations (last_result JSON); run it on an env with "
                               "text_observations=True (the default), not the RL training env of make_rl_env")
        if self._last is None or not observation.get("last_result"):
            call = ctl.start(observation)
            self.choices = []
        else:
            ctl.observe(self._last, observation)
            if ctl.tracker.meta is None:
                raise RuntimeError(f"{self.name}: the catalog call failed: {observation['last_result'][:200]}")
            call = ctl.next_call()
            if call is None:
                entry = ctl.choose(self.policy_choice())
                self.choices.append(entry.name)
                call = ctl.next_call()
        self._last = call
        return call
