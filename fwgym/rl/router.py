"""A learned per-case router over the free classical methods (issue 29): its inputs, its model and its file.

A macro episode is one decision, a contextual bandit: which plan to submit. The router looks at what an agent can
see for free before deciding: the case's calendar and kind (the episode-fixed features of :mod:`fwgym.rl.features`:
lead, domain, scale, as_of hour, target weekday and day of year) and the plan of every classical method
(``classical_plan``, free: its 8 normalised block levels and its expected loss under the method's own
distribution). A small network scores the methods; the router submits the plan of the best-scored one.

* :func:`router_inputs` is the one definition of the inputs, used by the agent (:class:`fwgym.agents.router.RouterAgent`,
  from its own tool results) and by training (from an outcome table, :func:`table_inputs`), so both see the same
  numbers (tested).
* :class:`RouterModel` is the network (ReLU MLP, the inputs standardised with the training set's mean and spread)
  evaluated with NumPy in float64; it is trained elsewhere (``examples/train_router.py``, PyTorch) and stored as
  JSON (:meth:`RouterModel.save` / :meth:`RouterModel.load`): plain numbers, no pickle, so loading a router file
  runs no code.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from fwgym.forecasters.classical import CLASSICAL_METHODS

__all__ = ["FORMAT", "FORMAT_VERSION", "CONTEXT_PREFIXES", "context_features", "input_names", "router_inputs",
           "table_inputs", "METHODS", "RouterModel"]

FORMAT = "fwgym-router"
FORMAT_VERSION = 1
#: the episode-fixed features the router reads (by name prefix: their set follows the feature definitions)
CONTEXT_PREFIXES = ("lead_", "domain_", "log_scale", "as_of_hour_", "target_weekday_", "target_doy_")
N_BLOCKS = 8
#: the methods a router scores by default: every classical method, in :data:`CLASSICAL_METHODS` order
METHODS: tuple[str, ...] = tuple(CLASSICAL_METHODS)


def context_features() -> tuple[str, ...]:
    """The names of the feature-vector entries the router reads (:data:`CONTEXT_PREFIXES`), in vector order."""
    from fwgym.rl.features import FEATURE_NAMES

    return tuple(n for n in FEATURE_NAMES if n.startswith(CONTEXT_PREFIXES))


def input_names(methods: Sequence[str] = METHODS) -> tuple[str, ...]:
    """The names of the router's inputs: :func:`context_features`, then per method its 8 plan levels and its
    expected loss (``plan_<m>_b00..b07``, ``plan_<m>_expected_loss``)."""
    names = list(context_features())
    for m in methods:
        names += [f"plan_{m}_b{i:02d}" for i in range(N_BLOCKS)] + [f"plan_{m}_expected_loss"]
    return tuple(names)


def router_inputs(features: np.ndarray, plans: Mapping[str, Sequence[float]], methods: Sequence[str] = METHODS,
                  feature_names: Sequence[str] | None = None) -> np.ndarray:
    """The router's input vector of one case.

    Args:
        features: the case's feature vector (:func:`fwgym.rl.features.feature_vector`, all features by default) after
            every method's plan is known (its ``method_<m>_expected_loss`` entries are set).
        plans: ``{method: 8 normalised levels}`` (the ``levels`` of a ``classical_plan`` result, or the ``levels``
            the env reports for the submitted plan).
        methods: the methods, in the model's order.
        feature_names: the names of ``features``' entries (default: all, :data:`~fwgym.rl.features.FEATURE_NAMES`).

    Returns:
        float64 (len(:func:`input_names`),).

    Raises:
        KeyError: a method without a plan, or a feature the vector lacks. ValueError: a plan without 8 levels.
    """
    from fwgym.rl.features import FEATURE_NAMES

    index = {n: i for i, n in enumerate(FEATURE_NAMES if feature_names is None else feature_names)}
    x = [float(features[index[n]]) for n in context_features()]
    for m in methods:
        levels = [float(v) for v in plans[m]]
        if len(levels) != N_BLOCKS:
            raise ValueError(f"the plan of {m} has {len(levels)} levels, expected {N_BLOCKS}")
        x += levels + [float(features[index[f"method_{m}_expected_loss"]])]
    return np.asarray(x, dtype=np.float64)


def table_inputs(table, methods: Sequence[str] = METHODS) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The router's inputs and each method's S for every case of an outcome table (:mod:`fwgym.rl.outcomes`).

    Per case: the episode-fixed features of its reset row, and per method the row of ``plan_submit:<m>``: its
    ``levels`` info and its ``method_<m>_expected_loss`` feature (the features after that plan), i.e. what
    :func:`router_inputs` reads in an episode.

    Returns:
        ``(X (cases, inputs) float64, S (cases, methods) float64, case ids)``.

    Raises:
        KeyError: the table's menu lacks a ``plan_submit:<m>`` entry.
    """
    names = table.features
    nf = table.n_fixed
    col = {n: i for i, n in enumerate(names)}
    ctx = [col[n] for n in context_features()]
    entry = [table.menu.index(f"plan_submit:{m}") for m in methods]
    slots = np.arange(len(table.case_ids))
    parts = [np.asarray(table.fixed_obs[:, ctx], dtype=np.float64)]
    S = np.zeros((len(slots), len(methods)))
    levels_node = next(n for n in table.infos.nodes if n.path == ("levels",))
    s_node = next(n for n in table.infos.nodes if n.path == ("S",))
    for j, (m, e) in enumerate(zip(methods, entry)):
        rows = table.rows_of(slots, e)
        lev = np.array([table.infos.value(levels_node, int(r)) for r in rows], dtype=np.float64)
        el = np.asarray(table.obs[rows, col[f"method_{m}_expected_loss"] - nf], dtype=np.float64)
        parts += [lev, el[:, None]]
        S[:, j] = [table.infos.value(s_node, int(r)) for r in rows]
    return np.concatenate(parts, axis=1), S, list(table.case_ids)


class RouterModel:
    """A ReLU MLP over the router's inputs, scoring each method (higher = chosen); NumPy float64 inference.

    Args:
        layers: ``[(W (in, out), b (out,)), ...]``; the last layer's width is the number of methods.
        mean, scale: the inputs' standardisation (``(x - mean) / scale``), each (inputs,).
        methods: the methods scored, in output order.
        inputs: the input names (:func:`input_names` of ``methods``); checked against this fwgym's on load.
        info: JSON data describing how the model was trained and chosen (kept in the file).

    Raises:
        ValueError: shapes that do not chain, non-finite weights, or ``scale`` <= 0.
    """

    def __init__(self, layers, mean, scale, methods: Sequence[str] = METHODS,
                 inputs: Sequence[str] | None = None, info: Mapping | None = None):
        self.layers = [(np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)) for w, b in layers]
        self.mean, self.scale = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
        self.methods = tuple(methods)
        self.inputs = tuple(input_names(self.methods) if inputs is None else inputs)
        self.info = dict(info or {})
        width = len(self.inputs)
        if self.mean.shape != (width,) or self.scale.shape != (width,) or not np.all(self.scale > 0):
            raise ValueError(f"mean and scale must be ({width},) with scale > 0")
        for w, b in self.layers:
            if w.ndim != 2 or w.shape[0] != width or b.shape != (w.shape[1],):
                raise ValueError(f"a layer of shape {w.shape} / {b.shape} does not follow width {width}")
            if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
                raise ValueError("non-finite weights")
            width = w.shape[1]
        if width != len(self.methods):
            raise ValueError(f"the last layer has {width} outputs for {len(self.methods)} methods")

    def scores(self, x: np.ndarray) -> np.ndarray:
        """Scores ``(n, methods)`` (or ``(methods,)``) of inputs ``x`` ``(n, inputs)`` (or ``(inputs,)``)."""
        h = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        for k, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if k < len(self.layers) - 1:
                h = np.maximum(h, 0.0)
        return h

    def choose(self, x: np.ndarray) -> np.ndarray | int:
        """Index of the best-scored method (the lowest index among equal scores) for each input row."""
        s = self.scores(x)
        return int(np.argmax(s)) if s.ndim == 1 else np.argmax(s, axis=1)

    def to_json(self) -> dict:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "methods": list(self.methods),
                "inputs": list(self.inputs), "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "layers": [{"W": w.tolist(), "b": b.tolist()} for w, b in self.layers], "info": self.info}

    def save(self, path: str | Path) -> Path:
        """Write the model as JSON (floats as Python writes them: they read back bit for bit)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), allow_nan=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "RouterModel":
        """Read a model written by :meth:`save`.

        Raises:
            FileNotFoundError: no such file. ValueError: not JSON text; not a router file or another format version
                (the message names the file, the expected ``"format": "fwgym-router", "format_version": 1`` and what
                the file holds); inputs other than this fwgym's (the feature definitions changed since it was
                trained), or bad weights.
        """
        data = Path(path).read_bytes()
        try:
            doc = json.loads(data.decode("utf-8"), parse_constant=lambda c: math.nan)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{path} is not a fwgym router model: not JSON text ({exc})") from None
        expected = (f'expected a JSON object with "format": "{FORMAT}", "format_version": {FORMAT_VERSION} (a file '
                    "written by RouterModel.save, e.g. by examples/train_router.py)")
        if not isinstance(doc, dict):
            raise ValueError(f"{path} is not a fwgym router model: {expected}; found a JSON {type(doc).__name__}")
        if doc.get("format") != FORMAT or doc.get("format_version") != FORMAT_VERSION:
            found = (f"format {doc['format']!r}, format_version {doc.get('format_version')!r}" if "format" in doc else
                     "no \"format\" field (keys: " + ", ".join(repr(k) for k in list(doc)[:6])
                     + (", ..." if len(doc) > 6 else "") + ")")
            raise ValueError(f"{path} is not a fwgym router model: {expected}; found {found}")
        try:
            model = cls([(d["W"], d["b"]) for d in doc["layers"]], doc["mean"], doc["scale"], doc["methods"],
                        doc["inputs"], doc.get("info"))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"{path} is not a readable fwgym router model ({type(exc).__name__}: {exc})") from None
        if unknown := [m for m in model.methods if m not in CLASSICAL_METHODS]:
            raise ValueError(f"{path}: unknown methods {unknown}")
        if model.inputs != input_names(model.methods):
            raise ValueError(f"{path}: the model reads inputs {list(model.inputs)[:4]}...; this fwgym's router inputs are "
                             f"{list(input_names(model.methods))[:4]}... (the feature definitions changed: retrain it)")
        return model
