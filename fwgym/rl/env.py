"""One-call construction of the RL environment (issue 5): :func:`make_rl_env`.

The registered ids ``FWBench-RL-Macro-v0`` and ``FWBench-RL-Sequential-v0`` (:mod:`fwgym.envs`) are
this function with the settings chosen on the dev split (train split, dense reward, all features, all
training stations)::

    import gymnasium as gym
    env = gym.make("FWBench-RL-Macro-v0")                   # MacroActionWrapper, Box(403,) -> Discrete(12)
    env = gym.make("FWBench-RL-Macro-v0", split="dev")      # model selection

Single env::

    from fwgym.rl import make_rl_env
    env = make_rl_env(domain="all", split="train")          # the same as gym.make("FWBench-RL-Macro-v0")

**Outcome tables.** When the split's outcome table is built (``fwgym rl build --split train``,
:mod:`fwgym.rl.outcomes`) and current, the macro variant is read from it: :class:`~fwgym.rl.table_env.TableMacroEnv`
here, :class:`~fwgym.rl.vector.MacroVectorEnv` for ``gym.make_vec``; the same observations, rewards and infos as the
wrapped env (tested), about 10x cheaper per step. ``outcome_table=False`` plays the wrapped env itself; when no table
is there, that is what happens, and it is said once.

Vector envs (each sub-env gets its own seed ``seed + i`` at the first ``reset(seed=seed)``; later
resets continue each env's own generator, so case streams are distinct and reproducible)::

    import gymnasium as gym
    from functools import partial
    venv = gym.make_vec("FWBench-RL-Macro-v0", num_envs=1024)   # native (fwgym.rl.vector.MacroVectorEnv)
    venv = gym.vector.SyncVectorEnv([partial(make_rl_env, split="train") for _ in range(4)])
    venv = gym.vector.AsyncVectorEnv([partial(make_rl_env, split="train") for _ in range(4)])
    venv = gym.make_vec("FWBench-v0", num_envs=4, vectorization_mode="async", split="train", reward="dense",
                        vector_kwargs={"shared_memory": False}, wrappers=[MacroActionWrapper])
                        # the raw env's Text observations refuse shared memory (gymnasium 1.4 corrupts them)

    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv
    venv = make_vec_env("FWBench-RL-Macro-v0", n_envs=4, seed=0, vec_env_cls=SubprocVecEnv)

Scripts that use subprocess vector envs need an ``if __name__ == "__main__":`` guard.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator, Sequence

import gymnasium as gym

from fwgym.core.cases import TRAINING_SPLITS
from fwgym.domains import DOMAINS, is_domain
from fwgym.rl.features import FeatureObservation
from fwgym.rl.macro import MacroActionWrapper
from fwgym.warn import warn_user

__all__ = ["VARIANTS", "HeldOutSplitWarning", "building_tables", "make_rl_env", "resolve_table"]

VARIANTS = ("macro", "sequential", "features")
_WARNED_SPLITS: set[str] = set()
_BUILDING_TABLES = contextvars.ContextVar("fwgym_building_tables", default=False)


class HeldOutSplitWarning(UserWarning):
    """An RL env was made on a held-out split (``test``, ``sealed``): said once per process and split. Train on
    ``train``, select on ``dev``, and report the held-out split once through ``fwgym evaluate``."""


@contextlib.contextmanager
def building_tables() -> Iterator[None]:
    """Within it, RL envs on a held-out split are not said (:class:`HeldOutSplitWarning`) and do not use up the
    process's one warning: an outcome table of a held-out split is the evaluator's to build, not a training env."""
    token = _BUILDING_TABLES.set(True)
    try:
        yield
    finally:
        _BUILDING_TABLES.reset(token)


def make_rl_env(domain: str | Sequence[str] = "all", split: str = "train", lead: str | None = None,
                variant: str = "macro", reward: str = "dense", features: str | Sequence[str] = "all",
                cycle_hire_stations: str = "all", outcome_table: Any = "auto", **env_kwargs) -> gym.Env:
    """The FWBench decision env wrapped for RL.

    Args:
        domain: ``"all"`` (both domains, each drawn half the time as in ``FWBench-v0``),
            ``"electricity"``, ``"cycle_hire"`` or a sequence of them.
        split: ``"train"`` (default; train policies here), ``"dev"`` (select them) or a held-out split (``"test"``:
            said once, :class:`HeldOutSplitWarning`).
        lead: ``None`` (both), ``"day_ahead"`` or ``"week_ahead"``.
        variant: ``"macro"`` (:class:`~fwgym.rl.macro.MacroActionWrapper`, Discrete(12), one step
            per episode), ``"sequential"`` (:class:`~fwgym.rl.macro.SequentialMacroWrapper`,
            Discrete(28)) or ``"features"`` (:class:`~fwgym.rl.features.FeatureObservation`:
            numeric observations, JSON tool-call actions).
        reward: the inner env's reward mode, ``"dense"`` (default: purchases pay the credit part of S
            when made, the submission the rest; the episode sum is ``-S``) or ``"terminal"``.
        features: the observation's feature set (:mod:`fwgym.rl.features`): ``"all"`` (default,
            403 features), ``"compact"`` (56) or a sequence of feature names.
        cycle_hire_stations: ``"all"`` (default: every station of the split; the train split has
            100) or ``"busiest"``: only the 20 stations the dev and test splits use
            (:func:`fwgym.core.cases.busiest_stations`, chosen on train-period departures), so a policy
            trains on the station population it is evaluated on.
        outcome_table: ``"auto"`` (default: for the macro and sequential variants, read the split's default outcome
            table when it is built, current and holds the pool; :func:`fwgym.rl.outcomes.find_table`; a sequential table
            holds the reset and first step of each episode), ``False`` (the wrapped env),
            or a table directory (it must match the env: :class:`~fwgym.rl.outcomes.TableError` otherwise).
        **env_kwargs: further :class:`~fwgym.envs.fwbench.FWBenchEnv` arguments (budget,
            max_calls, tools, case_ids, models, forecasters, sigma, ``forecast_store=DIR``: read priced
            forecasts from a store built by ``fwgym forecasts build``, see :mod:`fwgym.forecasters.store` ...). ``text_observations``
            defaults to ``False`` here: the wrappers read ``info["tool_result"]``, so the context text
            and the result JSON are not rendered (the wrapped observation is numeric anyway).

    Returns:
        the wrapped env (observation ``Box(n,)`` float32), or the :class:`~fwgym.rl.table_env.TableMacroEnv` equal to it.

    Raises:
        ValueError: unknown variant or feature set, or any :class:`~fwgym.envs.fwbench.FWBenchEnv` argument error.
        TypeError: a ``render_mode`` other than ``None`` or ``"ansi"`` (so that stable-baselines3's
            ``make_vec_env("FWBench-RL-Macro-v0")``, which first tries ``render_mode="rgb_array"``,
            falls back to no rendering, as it does for envs without a render mode).
    """
    from fwgym.envs.fwbench import FWBenchEnv

    mode = env_kwargs.get("render_mode")
    if mode is not None and mode != "ansi":  # a TypeError: SB3's make_vec_env(env_id) tries "rgb_array", then none
        raise TypeError(f"the RL envs render only render_mode=None or 'ansi' (text), got render_mode={mode!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    if cycle_hire_stations not in ("all", "busiest"):
        raise ValueError(f"cycle_hire_stations must be 'all' or 'busiest', got {cycle_hire_stations!r}")
    domains = tuple(DOMAINS) if domain == "all" else domain
    domains = (domains,) if isinstance(domains, str) else tuple(domains)
    if cycle_hire_stations == "busiest" and "cycle_hire" in domains:
        from fwgym.core.cases import build_cases, busiest_stations

        keep = set(busiest_stations())
        wanted = set(env_kwargs.pop("case_ids")) if env_kwargs.get("case_ids") is not None else None
        env_kwargs["case_ids"] = [c.case_id for d in domains if is_domain(d) for c in build_cases(d, split)
                                  if (d != "cycle_hire" or c.series_id in keep) and (wanted is None or c.case_id in wanted)]
    env_kwargs.setdefault("text_observations", False)
    env = FWBenchEnv(domain=domains, split=split, lead=lead, reward=reward, **env_kwargs)  # checks the split first
    if split not in TRAINING_SPLITS and split not in _WARNED_SPLITS and not _BUILDING_TABLES.get():
        warn_user(f"an RL env on the held-out {split!r} split: a policy trained, tuned or selected on it has seen "
                  f"the cases its {split} figure is computed on (train on 'train', select on 'dev', report {split} "
                  "once through fwgym evaluate)", HeldOutSplitWarning)
        _WARNED_SPLITS.add(split)  # after: a filter that turns it into an error raises every time
    if variant == "features":
        return FeatureObservation(env, features=features)
    wrapped = MacroActionWrapper(env, variant=variant, features=features)
    if mode is None:
        table = resolve_table(wrapped, variant, outcome_table, env_kwargs)
        if table is not None:
            from fwgym.rl.table_env import TableMacroEnv

            return TableMacroEnv(wrapped, table)
    return wrapped


def resolve_table(env: gym.Env, variant: str, setting: Any = "auto", env_kwargs: dict | None = None):
    """The outcome table ``env`` (a macro wrapper of :func:`make_rl_env`) reads, or ``None``: see
    :func:`fwgym.rl.outcomes.find_table`. Not with a rendering env, nor (``"auto"``) when the default tables are off.

    Raises:
        TypeError: ``env`` is not a macro wrapper over :class:`~fwgym.envs.fwbench.FWBenchEnv` (when a table is looked
            for).
        fwgym.rl.outcomes.TableError: a table given by path that cannot serve ``env`` (and see ``find_table``).
    """
    from fwgym.rl.outcomes.format import default_root

    if setting is False or setting is None or getattr(env.unwrapped, "render_mode", None) is not None:
        return None
    if setting == "auto" and default_root() is None:
        return None
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.rl.features import FEATURE_NAMES
    from fwgym.rl.outcomes.identity import table_fingerprint, table_identity
    from fwgym.rl.outcomes.read import find_table

    base = env.unwrapped
    if not isinstance(env, MacroActionWrapper) or not isinstance(base, FWBenchEnv):
        raise TypeError(f"outcome tables serve a macro wrapper over FWBenchEnv (make_rl_env), got {env!r}")
    menu = [e.name for e in env.menu]
    return find_table(setting, table_identity(variant, env), lambda: table_fingerprint(env, menu, list(FEATURE_NAMES)),
                      [c.case_id for c in base.cases])
