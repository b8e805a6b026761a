"""fwgym: Gymnasium environments for budgeted forecast purchasing and capacity decisions on real data.

``import fwgym`` registers these Gymnasium ids (every one defaults to the **train** split; see
:mod:`fwgym.envs`):

* ``FWBench-Electricity-v0``: decision task, EIA-930 electricity demand (54 balancing authorities).
* ``FWBench-CycleHire-v0``: decision task, TfL cycle hire departures.
* ``FWBench-v0``: decision task, both domains.
* ``FWBench-Electricity-Context-v0``: decision task with a scenario in the context text (electricity).
* ``FWBench-CycleHire-Context-v0``: decision task with a scenario in the context text (cycle hire).
* ``FWBench-Electricity-Forecast-v0``: forecast task (a probabilistic forecast of the 24 target hours: 9 quantiles or sample paths), electricity.
* ``FWBench-CycleHire-Forecast-v0``: forecast task, cycle hire.
* ``FWBench-Pedestrian-v0``: decision task, Auckland city-centre pedestrian counts (an opt-in domain, not the
  protocol's: registered when such an env is made; ``docs/pedestrian.md``).
* ``FWBench-Pedestrian-Context-v0``: decision task with a scenario in the context text (pedestrian counts).
* ``FWBench-Pedestrian-Forecast-v0``: forecast task, pedestrian counts.
* ``FWBench-RL-Macro-v0``: RL env (Box features, one Discrete macro action per episode with
  ``action_masks()``, dense reward), with a native vector env for ``gym.make_vec``.
* ``FWBench-RL-Sequential-v0``: RL env whose macro actions are taken one step at a time.

The first seven are :data:`fwgym.envs.ENV_IDS` (:class:`FWBenchEnv`), the three pedestrian ones
:func:`fwgym.envs.opt_in_env_ids`, the last two :data:`fwgym.envs.RL_ENV_IDS` (:func:`fwgym.rl.make_rl_env`).
"""
from fwgym.envs import ENV_IDS, RL_ENV_IDS, FWBenchEnv, register_envs
from fwgym.version import __version__

register_envs()

__all__ = ["FWBenchEnv", "ENV_IDS", "RL_ENV_IDS", "__version__"]
