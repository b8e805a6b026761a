"""A trained stable-baselines3 policy as an fwgym agent (DESIGN §9, issue 5).

:class:`SB3Agent` plays the **raw** env (``act(observation) -> tool call``), so a learned policy is
evaluated by :func:`fwgym.evaluation.evaluate` / ``fwgym evaluate --agent sb3 --model-path FILE``
exactly like the baselines. It drives the same :class:`~fwgym.rl.macro.MacroController` the
training wrappers use: it sends the ``catalog`` call, rebuilds the feature vector from the
observations it receives (:mod:`fwgym.rl.features`), asks the policy for a menu entry (with
the action mask for MaskablePPO) and emits that macro's tool calls one by one. The calls, and hence
the score, are identical to running the wrapper with the same policy.

Save models with :func:`save_policy`, which records the wrapper variant, the feature names and
the feature version in the SB3 zip (as the model attribute ``fwgym_spec``) so the agent rebuilds
exactly the inputs the policy was trained on. Models saved with plain ``model.save`` also load;
the variant is then inferred from the size of the action space (12: ``macro``, 28: ``sequential``)
and the feature set from the observation size (403: ``all``, 56: ``compact``).

The algorithm (PPO or MaskablePPO) is read from the zip itself (:func:`saved_algo`): SB3 stores the
policy class in the zip's ``data`` JSON as a base64 pickle next to its ``__module__``; the class's
module and name are read from the pickle's opcodes (:mod:`pickletools`) without unpickling anything.

**Isolation.** Loading a zip with SB3 unpickles parts of it, which runs arbitrary code for a crafted
file. With ``isolated=True`` (what ``fwgym evaluate --agent sb3`` uses, :class:`SB3AgentFactory`) the
zip is loaded only in a worker process (:class:`fwgym.agents.isolation.RemoteObject` hosting
:class:`fwgym.agents.isolation_worker.SB3Policy`): this process reads only the zip's JSON metadata,
computes the features, masks and tool calls, and sends the worker one feature vector (and mask) per
menu choice; the worker answers a menu index as JSON. The tool calls, and hence the records, are
identical to the in-process agent's (``isolated=False``, the default of the Python class, for files you
made yourself).
"""
from __future__ import annotations

import base64
import json
import pickletools
import zipfile
from pathlib import Path
from typing import Any

from fwgym.agents.isolation_worker import SB3Policy
from fwgym.rl.features import FEATURE_SETS, FEATURE_VERSION, check_feature_version, resolve_features
from fwgym.rl.macro import MENUS, MacroController, menu_for

#: ``algo`` values: ``"auto"`` (read from the zip) or an algorithm name
ALGOS = ("auto", "PPO", "MaskablePPO")
#: module prefix of sb3-contrib's maskable policies (``MaskableActorCriticPolicy`` and kin)
_MASKABLE_MODULE = "sb3_contrib.common.maskable."
#: modules of stable-baselines3's on-policy actor-critic policies (PPO's and A2C's)
_SB3_POLICY_MODULES = ("stable_baselines3.common.policies", "stable_baselines3.ppo.policies")


def policy_spec(variant: str, algo: str, features="all", models=None) -> dict:
    """The metadata :func:`save_policy` stores with a model: variant, algorithm, menu names,
    feature names (in input order) and feature version; for a policy trained on an env whose ``models=``
    pool holds models outside the protocol's (whose menu has extra entries, :func:`~fwgym.rl.macro.menu_for`),
    also ``models``, that pool."""
    names = resolve_features(features)
    spec = {"variant": variant, "algo": algo, "menu": [e.name for e in menu_for(variant, models)],
            "features": list(names), "n_features": len(names), "feature_version": FEATURE_VERSION}
    if len(spec["menu"]) != len(MENUS[variant]):
        spec["models"] = list(models)
    return spec


def save_policy(model, path: str | Path, variant: str = "macro", features="all", models=None) -> Path:
    """Save an SB3 model trained on a macro wrapper, with its fwgym spec (see :func:`policy_spec`).

    Args:
        model: a trained ``PPO`` / ``MaskablePPO`` (or other SB3 algorithm) instance.
        path: target file; ``.zip`` is appended when missing (SB3's convention).
        variant: ``"macro"`` or ``"sequential"`` (the wrapper it was trained on).
        features: the wrapper's feature set (``"all"``, ``"compact"`` or a sequence of names).
        models: the training env's ``models=`` pool (default: the protocol's); models outside the
            protocol's pool add menu entries (:func:`~fwgym.rl.macro.menu_for`), which the
            agent then offers too.

    Returns:
        the path of the written zip.

    Raises:
        ValueError: unknown variant or feature set, or the model's spaces do not match them.
    """
    if variant not in MENUS:
        raise ValueError(f"variant must be one of {list(MENUS)}, got {variant!r}")
    names = resolve_features(features)
    _check_spaces(_model_spaces(model), variant, names, len(menu_for(variant, models)))
    model.fwgym_spec = policy_spec(variant, type(model).__name__, names, models)
    path = Path(path)
    if path.suffix != ".zip":
        path = path.with_name(path.name + ".zip")
    model.save(path)
    return path


def read_data(path: str | Path) -> dict:
    """The ``data`` JSON of an SB3 zip (hyper-parameters, spaces, policy class: SB3's own metadata), read
    without unpickling anything.

    Raises:
        ValueError: ``path`` is not a zip with a JSON ``data`` member (not an SB3 model file).
        FileNotFoundError: no such file.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("data"))
    except (KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not an SB3 model zip (no JSON 'data' member: {exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not an SB3 model zip ('data' is not a JSON object)")
    return data


def read_spec(path: str | Path) -> dict | None:
    """The ``fwgym_spec`` stored in an SB3 zip, or ``None`` (plain ``model.save``, or not an SB3 zip)."""
    try:
        spec = read_data(path).get("fwgym_spec")
    except ValueError:
        return None
    return spec if isinstance(spec, dict) else None


def _pickled_global(b64: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` of the global a base64 pickle refers to, read from its opcodes (nothing is
    unpickled), or ``None`` when it is not a plain reference to a global."""
    try:
        raw = base64.b64decode(b64, validate=True)
        strings: list[str] = []
        for op, arg, _ in pickletools.genops(raw):
            if op.name == "GLOBAL":  # protocols 0-3: "module name"
                module, _, name = str(arg).partition(" ")
                return module, name
            if op.name == "STACK_GLOBAL":  # protocol 4+: the two strings pushed before it
                return (strings[-2], strings[-1]) if len(strings) >= 2 else None
            if isinstance(arg, str):
                strings.append(arg)
    except (TypeError, ValueError, IndexError):
        return None
    return None


def policy_class(data: dict) -> tuple[str, str] | None:
    """``(module, class name)`` of the policy class recorded in an SB3 zip's ``data`` (see :func:`read_data`),
    or ``None`` when the entry is missing or does not name an importable class."""
    entry = data.get("policy_class")
    if not isinstance(entry, dict):
        return None
    found = _pickled_global(entry.get(":serialized:"))
    if found is None or found[0] != entry.get("__module__", found[0]):
        return None
    return found


def saved_algo(path: str | Path) -> str | None:
    """The algorithm of an SB3 model zip, ``"PPO"`` or ``"MaskablePPO"``, from the policy class recorded
    in it (:func:`policy_class`; zips of :func:`save_policy` and of plain ``model.save`` alike), read
    without unpickling anything; ``None`` when the zip records no readable policy class (e.g. a policy
    class defined in a script, which SB3 pickles by value).

    Raises:
        ValueError: not an SB3 zip; its policy class belongs to another algorithm (e.g. A2C, DQN); or
            its ``fwgym_spec`` names another algorithm than its policy class.
    """
    data = read_data(path)
    cls = policy_class(data)
    if cls is None:
        return None
    module, name = cls
    on_policy = "clip_range" in data and "n_epochs" in data  # PPO's hyper-parameters (MaskablePPO has them too)
    if module.startswith(_MASKABLE_MODULE) and on_policy:
        algo = "MaskablePPO"
    elif module in _SB3_POLICY_MODULES and on_policy:
        algo = "PPO"
    else:
        raise ValueError(f"{path}: a {module}.{name} model; fwgym SB3 agents run PPO and MaskablePPO policies only")
    spec = data.get("fwgym_spec")
    recorded = spec.get("algo") if isinstance(spec, dict) else None
    if recorded is not None and recorded != algo:
        raise ValueError(f"{path}: fwgym_spec says {recorded!r} but the policy class {name} is {algo}'s")
    return algo


def resolve_algo(path: str | Path, algo: str = "auto") -> str:
    """The algorithm to load an SB3 zip with: :func:`saved_algo`, checked against an explicit ``algo``.

    Args:
        path: the model zip. algo: ``"auto"``, ``"PPO"`` or ``"MaskablePPO"``.

    Returns:
        ``"PPO"`` or ``"MaskablePPO"``.

    Raises:
        ValueError: unknown ``algo``; ``algo`` disagrees with the zip's policy class; ``"auto"`` and the
            zip's policy class cannot be read; or any :func:`saved_algo` error.
    """
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {list(ALGOS)}, got {algo!r}")
    saved = saved_algo(path)
    if saved is None:
        if algo == "auto":
            raise ValueError(f"{path}: the zip's policy class cannot be read; give the algorithm (PPO or MaskablePPO)")
        return algo
    if algo not in ("auto", saved):
        raise ValueError(f"{path} holds a {saved} policy, which cannot be loaded as {algo} (leave the algorithm on auto)")
    return saved


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


def _model_spaces(model) -> tuple[tuple[int, ...], int | None]:
    """``(observation shape, number of actions)`` of an SB3 model."""
    shape = tuple(getattr(model.observation_space, "shape", ()) or ())
    return shape, getattr(model.action_space, "n", None)


def _check_spaces(spaces: tuple[tuple[int, ...], int | None], variant: str, names: tuple[str, ...],
                  n_menu: int | None = None) -> None:
    shape, n = spaces
    n_menu = len(MENUS[variant]) if n_menu is None else n_menu
    if tuple(shape) != (len(names),) or n != n_menu:
        raise ValueError(f"the model's spaces (observation {tuple(shape)}, {n} actions) do not match the fwgym "
                         f"{variant!r} wrapper (observation ({len(names)},), {n_menu} actions)")


class SB3Agent:
    """A trained SB3 macro policy playing the raw FWBench env.

    Args:
        model_path: the model zip (``.zip`` may be omitted).
        algo: ``"auto"`` (default: the algorithm of the zip's policy class, :func:`saved_algo`),
            ``"PPO"`` or ``"MaskablePPO"`` (must agree with the zip; needed only when the zip's policy
            class cannot be read). With MaskablePPO the policy sees the action mask.
        name: leaderboard name (default: the file name without ``.zip``).
        deterministic: take the most likely entry (default) instead of sampling.
        isolated: load and run the policy in a worker process (see the module doc); default ``False``
            (in this process: only for files you trust).
        call_timeout, start_timeout, worker_command, worker_env: the worker's deadlines (seconds), command
            and the environment variables passed to it on purpose (:class:`fwgym.agents.isolation.RemoteObject`;
            ``isolated=True`` only; ``None``: the defaults).

    A model saved with an extended pool (``save_policy(..., models=EXTENDED_MODELS)``) gets that pool's
    menu (:func:`~fwgym.rl.macro.menu_for`); play it on an env with the same ``models=`` pool (in
    another env its extra entries are masked: choosing one ends the episode invalid).

    Attributes:
        variant: ``"macro"`` or ``"sequential"``; feature_names: the policy's inputs;
        controller: the :class:`MacroController`;
        choices: menu entry names chosen in the current episode;
        model: the loaded SB3 model (``None`` when isolated: it exists only in the worker);
        isolated: whether the policy runs in a worker.

    Raises:
        FileNotFoundError: no model file. ValueError: unknown algo, an algo that disagrees with the
            zip, a zip of another algorithm, missing sb3/sb3-contrib, or a model whose spaces/spec do
            not match the fwgym features and menus.
        fwgym.agents.isolation.AgentFailure: (isolated) the worker cannot start or load the zip.
    """

    def __init__(self, model_path: str | Path, algo: str = "auto", name: str | None = None, deterministic: bool = True,
                 isolated: bool = False, call_timeout: float | None = None, start_timeout: float | None = None,
                 worker_command=None, worker_env=()):
        if algo not in ALGOS:
            raise ValueError(f"algo must be one of {list(ALGOS)}, got {algo!r}")
        path = resolve_model_path(model_path)
        spec = read_spec(path) or {}
        if spec:
            check_feature_version(spec.get("feature_version"), str(path))
        algo = resolve_algo(path, algo)
        self.algo, self.model_path, self.deterministic, self.isolated = algo, str(path), deterministic, bool(isolated)
        kwargs = {"path": str(path.resolve()), "algo": algo, "deterministic": bool(deterministic)}
        if self.isolated:
            from fwgym.agents.isolation import RemoteObject

            limits = {k: float(v) for k, v in (("call_timeout", call_timeout), ("start_timeout", start_timeout))
                      if v is not None}
            self._policy = RemoteObject("builtin:sb3_policy", kwargs, fresh=False, worker_command=worker_command,
                                        worker_env=worker_env or (), **limits)
            described = self._policy.hello.get("info") or {}
            self.model = None
        else:
            self._policy = SB3Policy(**kwargs)
            described = self._policy.describe()
            self.model = self._policy.model
        spaces = (tuple(described.get("observation_shape") or ()), described.get("n_actions"))
        n = spaces[1]
        variant = spec.get("variant") or {len(m): v for v, m in MENUS.items()}.get(n)
        if variant not in MENUS:
            raise ValueError(f"{path}: cannot tell the macro menu of a policy with {n} actions")
        if spec.get("features"):
            names = resolve_features(spec["features"])
        else:
            names = next((v for v in FEATURE_SETS.values() if (len(v),) == spaces[0]), FEATURE_SETS["all"])
        models = spec.get("models")
        menu = menu_for(variant, models)
        _check_spaces(spaces, variant, names, len(menu))
        if spec.get("menu") and spec["menu"] != [e.name for e in menu]:
            raise ValueError(f"{path}: the model's menu differs from this fwgym's {variant!r} menu")
        self.variant = variant
        self.name = name or (path.name[:-4] if path.name.endswith(".zip") else path.name)
        self.feature_names = names
        self.controller = MacroController(variant, names, models)
        self.choices: list[str] = []
        self._last: Any = None

    def reset(self) -> None:
        """Start a new episode (called by :func:`fwgym.agents.run_episode`): the next ``act`` makes its catalog
        call. Isolated: a worker that died in an earlier episode is replaced (the zip is loaded again)."""
        self._last = None
        self.choices = []
        if self.isolated:
            self._policy.ensure_alive()

    def policy_choice(self) -> int:
        """The policy's menu index for the controller's current state (masked for MaskablePPO).

        Raises:
            fwgym.agents.isolation.AgentFailure: (isolated) the worker failed, or answered something that is
                not a menu index.
        """
        obs = self.controller.features()
        mask = self.controller.action_masks() if self.algo == "MaskablePPO" else None
        if not self.isolated:
            return self._policy.predict(obs, mask)
        choice = self._policy.call("predict", obs, mask)
        n = len(self.controller.menu)
        if type(choice) is not int or not 0 <= choice < n:
            from fwgym.agents.isolation import AgentFailure

            raise AgentFailure(f"{self.name}: the policy's worker answered {str(choice)[:100]!r}, not a menu index "
                               f"in [0, {n})", "bad_reply")
        return choice

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
        if self._last is None:  # the episode's first call (after reset)
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


class SB3AgentFactory(dict):
    """A picklable, JSON-serialisable zero-argument factory of :class:`SB3Agent` (what ``fwgym evaluate --agent
    sb3`` builds): a ``dict`` of :class:`SB3Agent`'s keyword arguments (``model_path`` included), and
    optionally ``source`` (``{"file", "sha256"}`` of the model zip, set by ``fwgym evaluate``; description
    only, not passed to :class:`SB3Agent`), which identifies the model in the run manifest.

    Attributes:
        isolated: whether its agents run the policy in a worker process (its ``isolated`` entry).
    """

    @property
    def isolated(self) -> bool:
        return bool(self.get("isolated", False))

    def __call__(self) -> SB3Agent:
        return SB3Agent(**{k: v for k, v in self.items() if k != "source"})


__all__ = ["SB3Agent", "SB3AgentFactory", "SB3Policy", "save_policy", "policy_spec", "read_spec", "read_data", "policy_class", "saved_algo",
           "resolve_algo", "resolve_model_path", "ALGOS"]
