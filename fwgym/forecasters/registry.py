"""Priced forecast models by name, one shared instance per process, the forecast pools and plug-ins (the
process-wide cache of their forecasts: :data:`fwgym.forecasters.cache.FORECAST_CACHE`).

**Pools.** :data:`PRICED_MODELS` is the protocol's pool (the default of every env, fixed policy list
and oracle: nothing changes unless asked for). :data:`EXTENDED_MODELS` adds the statsmodels
forecasters (:mod:`fwgym.forecasters.statistical`) priced by the frozen extended tariff; it is the one
switch that opts in: ``gym.make("FWBench-Electricity-v0", models=EXTENDED_MODELS)``.
:func:`describe_pool` names a pool for the records of an evaluation.

**Plug-ins.** A priced model from outside fwgym joins through :func:`register_forecaster` (in-memory)
or an entry point of the group ``fwgym.forecasters`` (:data:`ENTRY_POINT_GROUP`) in an installed
distribution, whose object is a :class:`ForecasterSpec` or a zero-argument callable returning one::

    # pyproject.toml of the plug-in package
    [project.entry-points."fwgym.forecasters"]
    my_model = "my_package.fwgym_plugin:SPEC"

Entry points are loaded once per process, the first time a name outside the built-in models is
looked up (:func:`known_models`, :func:`get_forecaster`, :func:`check_models`); a failing one raises
:class:`PluginError` naming the entry point and its distribution (every time, never skipped).
A registered model is served by :func:`get_forecaster`, priced by :mod:`fwgym.core.tariff`, and is then a
valid entry of an env's ``models=`` list, a fixed policy (:func:`fwgym.baselines.registry.make_policy`),
a catalog-oracle menu and an RL macro entry.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from fwgym.core import tariff
from fwgym.forecasters.base import Availability, QuantileForecaster
from fwgym.forecasters.seasonal import SeasonalEmpirical
from fwgym.forecasters.statistical import STATISTICAL_FORECASTERS
from fwgym.forecasters.tsfm import Chronos2, ChronosBoltTiny, TimesFM25
from fwgym.validation import check_int

__all__ = ["PRICED_MODELS", "STATISTICAL_MODELS", "EXTENDED_MODELS", "NO_TSFM_MODELS", "POOLS", "ENTRY_POINT_GROUP", "BUILTIN_MODELS",
           "PluginError", "ForecasterSpec", "register_forecaster", "unregister_forecaster", "load_entry_points",
           "known_models", "check_models", "model_origin", "plugin_spec", "describe_pool", "registered_prices",
           "get_forecaster", "set_forecaster", "plugin_codes"]

#: priced model names in menu order (the protocol's forecast pool)
PRICED_MODELS: tuple[str, ...] = ("seasonal_empirical", "chronos_bolt_tiny", "chronos2", "timesfm25")
#: the statsmodels forecasters, priced by the extended tariff (fwgym/config/tariff_extended.json)
STATISTICAL_MODELS: tuple[str, ...] = tuple(STATISTICAL_FORECASTERS)
#: the extended pool: the protocol's models and the statsmodels forecasters (opt-in: ``models=EXTENDED_MODELS``)
EXTENDED_MODELS: tuple[str, ...] = PRICED_MODELS + STATISTICAL_MODELS
#: the protocol's pool without the TSFMs (the paper's TSFM-access ablation, Table 4: the priced classical
#: forecaster only)
NO_TSFM_MODELS: tuple[str, ...] = ("seasonal_empirical",)
#: named pools (:func:`describe_pool`)
POOLS: dict[str, tuple[str, ...]] = {"protocol": PRICED_MODELS, "extended": EXTENDED_MODELS, "no_tsfm": NO_TSFM_MODELS}
#: the importlib.metadata entry-point group of plug-in forecasters
ENTRY_POINT_GROUP = "fwgym.forecasters"

_FACTORIES: dict[str, Callable[[], QuantileForecaster]] = {
    "seasonal_empirical": SeasonalEmpirical, "chronos_bolt_tiny": ChronosBoltTiny, "chronos2": Chronos2,
    "timesfm25": TimesFM25, **STATISTICAL_FORECASTERS}
BUILTIN_MODELS: tuple[str, ...] = tuple(_FACTORIES)
_INSTANCES: dict[str, QuantileForecaster] = {}
_LOCK = threading.RLock()


class PluginError(RuntimeError):
    """A plug-in forecaster could not be loaded or registered; the message names it and why."""


@dataclass(frozen=True, eq=False)
class ForecasterSpec:
    """A priced model from outside fwgym.

    Attributes:
        name: model name used by the tools (letters, digits, ``_``, ``-``, ``.``; not a built-in name).
        factory: zero-argument callable returning a :class:`~fwgym.forecasters.base.QuantileForecaster`
            (called once per process, on first use; weights may load lazily in its ``load``).
        tariff: ``{context bucket: 6 prices}`` in credits (reference CPU microseconds), context buckets
            a subset of 96 / 336, one price per horizon bucket 24/64/96/192/240/336 (:func:`fwgym.core.tariff.validate_rows`).
        min_context: smallest context the model accepts (overrides the instance's ``min_context``);
            ``None`` keeps the instance's.
        availability: zero-argument callable returning an :class:`~fwgym.forecasters.base.Availability`
            or a bool; replaces the instance's ``availability()`` (what catalog and quote report; an
            unavailable model is refused free of charge). ``None`` keeps the instance's.
        description: one line for listings.
        source: where it came from (set by the registry: ``"register_forecaster"`` or the entry point).
    """

    name: str
    factory: Callable[[], QuantileForecaster]
    tariff: Mapping
    min_context: int | None = None
    availability: Callable[[], Any] | None = None
    description: str = ""
    source: str = field(default="register_forecaster", compare=False)


_PLUGINS: dict[str, ForecasterSpec] = {}
#: plug-ins that run in a worker process (:mod:`fwgym.forecasters.hosted`): ``{name: {"reference", "distribution"?}}``
_HOSTING: dict[str, dict] = {}
#: ``DIST:MODULE:ATTR`` of each plug-in registered from an entry point (:func:`model_origin`)
_ENTRY_POINT_ORIGINS: dict[str, str] = {}
_ENTRY_POINTS_LOADED = False
_ENTRY_POINT_ERROR: PluginError | None = None


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name or len(name) > 64 or not all(ch.isalnum() or ch in "_-." for ch in name):
        raise ValueError(f"a model name is 1..64 letters, digits, '_', '-' or '.', got {name!r:.80}")


def register_forecaster(name: str, factory: Callable[[], QuantileForecaster], tariff_rows: Mapping, *,
                        min_context: int | None = None, availability: Callable[[], Any] | None = None,
                        description: str = "", replace: bool = False, isolated: bool | None = None) -> ForecasterSpec:
    """Add a priced model (in this process) without editing fwgym.

    Example (one of the statsmodels models with another configuration, under a new name)::

        import functools
        from fwgym.forecasters import register_forecaster, SARIMA, EXTENDED_MODELS
        register_forecaster("sarima_log1p", functools.partial(SARIMA, transform="log1p"),
                            {96: [20000] * 6, 336: [30000, 30000, 31000, 33000, 34000, 36000]})
        env = gym.make("FWBench-CycleHire-v0", models=EXTENDED_MODELS + ("sarima_log1p",))

    Args:
        name, factory, tariff_rows, min_context, availability, description: see :class:`ForecasterSpec`.
        replace: replace a plug-in registered before under ``name`` (built-in models cannot be replaced;
            use :func:`set_forecaster` to serve a built-in name with another instance).
        isolated: run the forecaster in a worker process (:mod:`fwgym.forecasters.hosted`: only ``(context,
            horizon)`` reaches it, a hard deadline, its code pinned). ``None`` (default): when the worker can
            make ``factory`` itself (a module-level function or class, or a ``functools.partial`` of one with
            plain-data arguments, :func:`~fwgym.forecasters.hosted.factory_reference`), else in this process
            with a ``RuntimeWarning``; ``True``: required; ``False``: in this process (code you trust).

    Returns:
        the :class:`ForecasterSpec`.

    Raises:
        ValueError: bad name, rows or min_context; a built-in name; a registered name without ``replace``;
            ``isolated=True`` with a factory a worker cannot make (a lambda, a local function, ``__main__``).
        TypeError: ``factory`` or ``availability`` not callable.
    """
    from fwgym.forecasters.hosted import factory_reference

    reference = factory_reference(factory) if isolated is not False and callable(factory) else None
    if isolated and reference is None:
        raise ValueError(f"{name}: isolated=True needs a factory a worker process can import (a module-level "
                         f"function or class, or a functools.partial of one), got {factory!r:.120}")
    spec = _register(ForecasterSpec(name, factory, tariff_rows, min_context, availability, description), replace)
    if reference is not None:
        _HOSTING[name] = {"reference": reference}
    elif isolated is None:
        from fwgym.warn import warn_user

        warn_user(f"plug-in forecaster {name!r} runs in this process: a worker process cannot make its factory "
                  f"{factory!r:.80} (a lambda, a local function or __main__'s code); give a module-level function "
                  "or class to run it isolated, or pass isolated=False for code you trust", RuntimeWarning)
    return spec


def _register(spec: ForecasterSpec, replace: bool) -> ForecasterSpec:
    _check_name(spec.name)
    if not callable(spec.factory):
        raise TypeError(f"{spec.name}: factory must be a zero-argument callable returning a QuantileForecaster")
    if spec.availability is not None and not callable(spec.availability):
        raise TypeError(f"{spec.name}: availability must be None or a zero-argument callable")
    if spec.min_context is not None:
        check_int(f"{spec.name}: min_context", spec.min_context, minimum=1, maximum=max(tariff.CONTEXT_BUCKETS))
    with _LOCK:
        if spec.name in _FACTORIES:
            raise ValueError(f"{spec.name!r} is a built-in model of fwgym; register the plug-in under another name")
        if spec.name in _PLUGINS and not replace:
            raise ValueError(f"a forecaster named {spec.name!r} is already registered ({_PLUGINS[spec.name].source}); "
                             "pass replace=True to replace it")
        rows = tariff.validate_rows(spec.name, spec.tariff)
        spec = ForecasterSpec(spec.name, spec.factory, rows, spec.min_context, spec.availability, spec.description,
                              spec.source)
        tariff.register_prices(spec.name, rows, replace=True)
        _PLUGINS[spec.name] = spec
        _HOSTING.pop(spec.name, None)
        _drop_instance(spec.name)
    return spec


def _drop_instance(name: str) -> None:
    """Forget the process-wide instance of ``name`` (a hosted one's worker is shut down)."""
    from fwgym.forecasters.hosted import HostedForecaster

    f = _INSTANCES.pop(name, None)
    if isinstance(f, HostedForecaster):
        f.close()


def unregister_forecaster(name: str) -> None:
    """Remove a plug-in registered in this process (its instance and its tariff rows).

    Raises:
        ValueError: ``name`` is not a registered plug-in.
    """
    with _LOCK:
        if name not in _PLUGINS:
            raise ValueError(f"{name!r} is not a registered plug-in forecaster")
        del _PLUGINS[name]
        _ENTRY_POINT_ORIGINS.pop(name, None)
        _HOSTING.pop(name, None)
        _drop_instance(name)
        tariff.unregister_prices(name)


def load_entry_points(reload: bool = False) -> list[str]:
    """Load the plug-ins of the ``fwgym.forecasters`` entry-point group (once per process).

    Args:
        reload: look the group up again (e.g. after installing a distribution at run time).

    Returns:
        names of the plug-ins registered from entry points (all of them so far).

    Raises:
        PluginError: an entry point fails to import, is not a :class:`ForecasterSpec` (or a callable
            returning one), names another model than its entry-point name, or clashes with a model
            already known. Raised again on every later call until ``reload``.
    """
    global _ENTRY_POINTS_LOADED, _ENTRY_POINT_ERROR
    from importlib.metadata import entry_points

    with _LOCK:
        if _ENTRY_POINTS_LOADED and not reload:
            if _ENTRY_POINT_ERROR is not None:
                raise _ENTRY_POINT_ERROR
            return [n for n, s in _PLUGINS.items() if s.source.startswith("entry point")]
        _ENTRY_POINTS_LOADED, _ENTRY_POINT_ERROR = True, None
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            where = (f"entry point {ep.name!r} = {ep.value!r} of distribution "
                     f"{getattr(dist, 'name', '?')} {getattr(dist, 'version', '')}".rstrip() + f" (group {ENTRY_POINT_GROUP!r})")
            current = _PLUGINS.get(ep.name)
            if current is not None and current.source == f"{where}":
                continue  # the same entry point, seen again by a reload
            try:
                _register_entry_point(ep, dist, where)
            except Exception as exc:
                _ENTRY_POINT_ERROR = PluginError(f"fwgym plug-in forecaster {where} failed to load: {_why(exc)}")
                raise _ENTRY_POINT_ERROR from exc
        return [n for n, s in _PLUGINS.items() if s.source.startswith("entry point")]


def _why(exc: BaseException) -> str:
    """``Type: message`` of a failure, the plug-in's own exception type when it failed in its worker."""
    from fwgym.isolation.process import WorkerFailure

    if isinstance(exc, WorkerFailure) and exc.remote_type:
        return f"{exc.remote_type.rpartition('.')[2]}: {exc.remote_message}"
    return f"{type(exc).__name__}: {exc}"


def _register_entry_point(ep, dist, where: str) -> None:
    """Register the plug-in of entry point ``ep``: its module is imported, and its spec read, in a worker
    process (:class:`~fwgym.forecasters.hosted.HostedForecaster`), never in this one."""
    from fwgym.forecasters.hosted import HostedForecaster

    distribution = {"name": getattr(dist, "name", None), "version": getattr(dist, "version", None)}
    hosted = HostedForecaster(ep.name, {"entry_point": ep.value}, distribution=distribution)
    spec = hosted.spec or {}
    if spec.get("name") != ep.name:
        hosted.close()
        raise ValueError(f"its spec names the model {spec.get('name')!r}; the entry point's name must be the model name")
    try:
        _register(ForecasterSpec(ep.name, _Existing(hosted), spec["tariff"], spec.get("min_context"), None,
                                 spec.get("description", ""), where), replace=False)
    except BaseException:
        hosted.close()
        raise
    _HOSTING[ep.name] = {"reference": {"entry_point": ep.value}, "distribution": distribution}
    _ENTRY_POINT_ORIGINS[ep.name] = f"{distribution['name'] or '?'}:{ep.value}"
    _INSTANCES[ep.name] = hosted  # the worker that read the spec serves the forecasts


class _Existing:
    """A factory that returns the forecaster made already: the hosted plug-in whose worker read the spec (closed
    by :func:`set_forecaster` / :func:`unregister_forecaster`, it starts a new worker when used again)."""

    def __init__(self, hosted):
        self.hosted = hosted

    def __call__(self):
        return self.hosted


def known_models() -> tuple[str, ...]:
    """Every model name :func:`get_forecaster` serves: the built-in ones (:data:`EXTENDED_MODELS`)
    and the plug-ins (entry points loaded on first call, then in-memory registrations).

    Raises:
        PluginError: an entry point fails (see :func:`load_entry_points`).
    """
    load_entry_points()
    return BUILTIN_MODELS + tuple(_PLUGINS)


def check_models(models: Sequence[str] | None, default: Sequence[str] = PRICED_MODELS) -> tuple[str, ...]:
    """Validate a forecast pool (an env's or an oracle's ``models=``).

    Args:
        models: model names, or ``None`` for ``default``.
        default: the pool used for ``None`` (the protocol's).

    Returns:
        the pool as a tuple, in the given order.

    Raises:
        ValueError: a name that is not a string, repeated, or not a known model (the message lists them).
        PluginError: an entry point fails (only looked up for names outside the built-in models).
    """
    pool = tuple(default if models is None else models)
    if any(not isinstance(m, str) for m in pool):
        raise ValueError(f"model names must be strings, got {list(pool)!r:.200}")
    if len(set(pool)) != len(pool):
        raise ValueError(f"models lists a model twice: {list(pool)}")
    if all(m in _FACTORIES or m in _PLUGINS for m in pool):
        return pool
    known = known_models()
    bad = [m for m in pool if m not in known]
    if bad:
        raise ValueError(f"unknown models {bad}; known: {list(known)} (plug-ins: fwgym.forecasters.register_forecaster "
                         f"or the {ENTRY_POINT_GROUP!r} entry-point group)")
    return pool


def model_origin(name: str) -> str:
    """Where a model comes from, for listings: ``"fwgym (built-in)"``, ``"entry point DIST:MODULE:ATTR"``
    (a plug-in of the ``fwgym.forecasters`` entry-point group of the installed distribution DIST) or
    ``"registered in-process"`` (:func:`register_forecaster`).

    Raises:
        ValueError: unknown model (as :func:`check_models`).
    """
    if name in _FACTORIES:
        return "fwgym (built-in)"
    check_models([name])
    spec = _PLUGINS[name]
    if spec.source.startswith("entry point"):
        return f"entry point {_ENTRY_POINT_ORIGINS.get(name, spec.source)}"
    return "registered in-process"


def plugin_spec(name: str) -> ForecasterSpec | None:
    """The :class:`ForecasterSpec` of a plug-in, or ``None`` for a built-in or unknown name."""
    return _PLUGINS.get(name)


def describe_pool(models: Sequence[str]) -> dict:
    """What a result record says about the forecast pool its env used.

    Returns:
        ``{"pool": "protocol" | "extended" | "custom", "models": [...], "tariff": {model: source},
        "extended_tariff": {"version", "sha256"} (when a model priced by the extended file is in the pool),
        "plugins": {model: source} and "plugin_hosting": {model: "worker" | "in-process"} (when plug-ins are in
        it: :mod:`fwgym.forecasters.hosted`), "registered_prices": {model: {"tariff":
        {"96": [6 credits], "336": [...]}, "min_context": int}} (when it holds models whose price is not one
        of fwgym's pinned tariffs: plug-ins, in-process registrations)}``. ``"protocol"`` / ``"extended"``
        mean exactly :data:`PRICED_MODELS` / :data:`EXTENDED_MODELS` in that order. The pinned tariffs are
        identified by their source (and the extended file by its sha256); a registered model's rows (credits
        per context bucket, one per horizon bucket of :data:`fwgym.core.tariff.HORIZON_BUCKETS`) and smallest
        context are written out, so two runs of one plug-in name at other prices are told apart
        (:func:`registered_prices`).

    Raises:
        ValueError: unknown models (as :func:`check_models`).
        PluginError: a registered model without its own ``min_context`` whose factory fails.
    """
    pool = check_models(models)
    name = next((k for k, v in POOLS.items() if v == pool), "custom")
    sources = {m: tariff.tariff_source(m) for m in pool}
    out = {"pool": name, "models": list(pool), "tariff": sources}
    if "extended" in sources.values():
        doc = tariff.extended_tariff()
        out["extended_tariff"] = {"version": doc["version"], "sha256": tariff.EXTENDED_TARIFF_SHA256}
    plugins = {m: _PLUGINS[m].source for m in pool if m in _PLUGINS}
    if plugins:
        out["plugins"] = plugins
        out["plugin_hosting"] = {m: "worker" if m in _HOSTING else "in-process" for m in plugins}
    prices = registered_prices(pool)
    if prices:
        out["registered_prices"] = prices
    return out


def registered_prices(models: Sequence[str]) -> dict[str, dict]:
    """What prices the models of ``models`` that fwgym's pinned tariffs do not price (tariff source
    ``"registered"``: plug-ins of an entry point or of :func:`register_forecaster`): ``{model: {"tariff":
    {context bucket as str: [credits per horizon bucket 24/64/96/192/240/336]}, "min_context": int}}``,
    in pool order; ``{}`` when every model is priced by the protocol's table or the extended file.
    ``min_context`` is the spec's, else the forecaster instance's (which creates it: its factory runs,
    weights still load lazily).

    Raises:
        ValueError: unknown models (as :func:`check_models`).
        PluginError: a factory fails (only for a spec without its own ``min_context``).
    """
    out = {}
    for m in check_models(models):
        if tariff.tariff_source(m) != "registered":
            continue
        spec = _PLUGINS.get(m)
        min_context = spec.min_context if spec is not None and spec.min_context is not None else \
            get_forecaster(m).min_context
        out[m] = {"tariff": {str(c): [int(x) for x in row] for c, row in sorted(tariff.tariff_rows(m).items())},
                  "min_context": int(min_context)}
    return out


def plugin_codes(models: Sequence[str]) -> dict[str, str]:
    """``{model: sha256 of its code}`` of the plug-ins among ``models`` (:func:`fwgym.forecasters.hosted.plugin_code`:
    a hosted plug-in's files and distribution, an in-process one's classes); ``{}`` without plug-ins. A run's
    ``plugin_code`` setting: ``--resume`` refuses an edited plug-in, runs of different plug-in code do not merge.

    Raises:
        ValueError: unknown models. PluginError: a plug-in cannot be made.
    """
    from fwgym.forecasters.hosted import plugin_code

    return {m: plugin_code(get_forecaster(m)) for m in check_models(models) if m in _PLUGINS}


def _availability_method(fn: Callable[[], Any], name: str) -> Callable[[], Availability]:
    def availability() -> Availability:
        got = fn()
        if isinstance(got, Availability):
            return got
        if isinstance(got, (bool, np.bool_)):
            return Availability(bool(got), "" if got else f"{name}: the plug-in reports itself unavailable", "plugin")
        raise TypeError(f"{name}: availability() returned {type(got).__name__}, expected Availability or bool")
    return availability


def _create(name: str) -> QuantileForecaster:
    if name in _FACTORIES:
        return _FACTORIES[name]()
    spec = _PLUGINS[name]
    hosting = _HOSTING.get(name)
    f: object  # a plug-in's factory may return anything: checked below
    if hosting is not None and not isinstance(spec.factory, _Existing):
        from fwgym.forecasters.hosted import HostedForecaster

        f = HostedForecaster(name, hosting["reference"], distribution=hosting.get("distribution"))
    else:
        f = spec.factory()
    if not isinstance(f, QuantileForecaster):
        raise PluginError(f"plug-in forecaster {name!r} ({spec.source}): its factory returned {type(f).__name__}, "
                          "expected a fwgym.forecasters.QuantileForecaster")
    f.name = name
    if spec.min_context is not None:
        f.min_context = spec.min_context
    if spec.availability is not None:
        f.availability = _availability_method(spec.availability, name)
    return f


def get_forecaster(name: str) -> QuantileForecaster:
    """The process-wide forecaster for ``name`` (created on first use, weights loaded lazily).

    Raises:
        ValueError: unknown name.
        PluginError: a plug-in's factory fails or returns something else than a QuantileForecaster,
            or an entry point fails to load.
    """
    f = _INSTANCES.get(name)  # the hot path: a dict read is atomic, creation below takes the lock
    if f is not None:
        return f
    if name not in _FACTORIES and name not in _PLUGINS:
        check_models([name])  # loads the entry points once; raises for an unknown name
    with _LOCK:
        if name not in _INSTANCES:
            try:
                _INSTANCES[name] = _create(name)
            except PluginError:
                raise
            except Exception as exc:
                if name in _FACTORIES:
                    raise
                raise PluginError(f"plug-in forecaster {name!r} ({_PLUGINS[name].source}): its factory failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        return _INSTANCES[name]


def set_forecaster(name: str, forecaster: QuantileForecaster | None) -> None:
    """Replace the process-wide forecaster for ``name`` (``None`` restores the default on next use),
    e.g. ``set_forecaster("chronos2", Chronos2(local_dir="/models/chronos-2"))``.

    Raises:
        ValueError: unknown name.
    """
    if name not in _FACTORIES and name not in _PLUGINS:
        check_models([name])
    with _LOCK:
        if forecaster is None:
            _drop_instance(name)
        else:
            _INSTANCES[name] = forecaster
