"""Gymnasium environments of fwgym and their registration.

Every id defaults to the **train** split (``split="train"``), so that a training script that says
nothing never sees the benchmark's test cases; pass ``split="dev"`` for model selection and
``split="test"`` for the benchmark (``fwgym evaluate`` and :func:`fwgym.evaluation.evaluate` use the
test split unless told otherwise). A ``case_id`` of another split than the env's is refused at reset.

* :data:`ENV_IDS`: the raw tool-call envs (:class:`~fwgym.envs.fwbench.FWBenchEnv`, Dict
  observation with Text fields, JSON tool-call actions).
* :data:`RL_ENV_IDS`: the RL envs of :func:`fwgym.rl.make_rl_env` (Box features, a Discrete
  macro menu with ``action_masks()``, dense reward summing to ``-S``), for stable-baselines3 and
  rl_zoo3 (``python -m rl_zoo3.train --algo ppo --env FWBench-RL-Macro-v0 --gym-packages fwgym
  --conf-file fwgym/hyperparams/ppo.yml``). ``FWBench-RL-Macro-v0`` has a native vector env
  (:class:`~fwgym.rl.vector.MacroVectorEnv`, its ``vector_entry_point``):
  ``gym.make_vec("FWBench-RL-Macro-v0", num_envs=N)``.
"""
from typing import Any, Sequence

from fwgym.domains import DOMAINS, domain_names, get_domain, optional_domains
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.suites import SUITES


def env_ids(domains: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """``{env id: FWBenchEnv kwargs}`` of each suite (:mod:`fwgym.suites`) on each of ``domains`` (default: the
    protocol's, :data:`fwgym.domains.DOMAINS`), train split: ``FWBench-<Domain.env_name><Suite.id_suffix>-v0``;
    with the protocol's domains also ``FWBench-v0``, the decision suite on both together (its domains are the
    protocol's, whatever else is registered)."""
    names = DOMAINS if domains is None else tuple(domains)
    out: dict[str, dict[str, Any]] = {}
    for suite in SUITES.values():
        for d in names:
            spec = get_domain(d)
            if suite.scenarios and not spec.scenario_families:
                continue  # a domain without scenario families has no context or forecast suite
            out[suite.env_id(spec.env_name)] = {"domain": d, "split": "train", **suite.env_kwargs}
        if suite.name == "decision" and domains is None:
            out["FWBench-v0"] = {"domain": tuple(DOMAINS), "split": "train"}
    return out


#: the raw tool-call env ids of the protocol's domains and their FWBenchEnv kwargs (one per suite and
#: domain, and ``FWBench-v0``); :func:`register_envs` also registers those of other registered domains
ENV_IDS: dict[str, dict[str, Any]] = env_ids()

#: settings of the RL ids, chosen on the DEV split (benchmarks/README.md, "RL defaults"; script
#: benchmarks/rl_defaults.py): PPO 20k steps x 4 seeds, dev S 0.451 with all 403 features and all
#: training stations against 0.467 with the compact features and the 20 dev/test stations (best fixed
#: policy on dev: 0.491)
RL_DEFAULTS: dict = {"domain": "all", "split": "train", "reward": "dense", "features": "all",
                     "cycle_hire_stations": "all"}

RL_ENV_IDS: dict[str, dict] = {
    "FWBench-RL-Macro-v0": {**RL_DEFAULTS, "variant": "macro"},
    "FWBench-RL-Sequential-v0": {**RL_DEFAULTS, "variant": "sequential"},
}
_VECTOR_ENTRY_POINTS = {"FWBench-RL-Macro-v0": "fwgym.rl.vector:MacroVectorEnv"}


def opt_in_env_ids() -> dict[str, dict[str, Any]]:
    """``{env id: FWBenchEnv kwargs}`` of every suite on each opt-in domain that ships with fwgym and is not
    registered yet (:func:`fwgym.domains.optional_domains`: ``FWBench-Pedestrian-v0``, ...). The ids exist from
    ``import fwgym`` on, but the domain is registered only when such an env is made (the env looks its domain up
    by name), so the protocol's defaults stay the protocol's. Env name: the domain name in title case without
    ``_`` (its :attr:`~fwgym.domains.Domain.env_name`, checked by a test)."""
    out: dict[str, dict[str, Any]] = {}
    for name in optional_domains():
        if name in domain_names():
            continue
        env_name = "".join(part.title() for part in name.split("_"))
        for suite in SUITES.values():
            out[suite.env_id(env_name)] = {"domain": name, "split": "train", **suite.env_kwargs}
    return out


def register_envs() -> None:
    """Register every fwgym id with Gymnasium (idempotent): :data:`ENV_IDS`, the ids of every other registered
    domain (:func:`env_ids`; call it again after :func:`fwgym.domains.register_domain`), those of the opt-in
    domains (:func:`opt_in_env_ids`) and :data:`RL_ENV_IDS`."""
    import gymnasium as gym

    others = [d for d in domain_names() if d not in DOMAINS]
    for env_id, kwargs in {**ENV_IDS, **(env_ids(others) if others else {}), **opt_in_env_ids()}.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="fwgym.envs.fwbench:FWBenchEnv", kwargs=dict(kwargs))
    for env_id, kwargs in RL_ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="fwgym.rl.env:make_rl_env", kwargs=dict(kwargs),
                         vector_entry_point=_VECTOR_ENTRY_POINTS.get(env_id))


__all__ = ["FWBenchEnv", "ENV_IDS", "env_ids", "opt_in_env_ids", "RL_ENV_IDS", "RL_DEFAULTS", "register_envs"]
