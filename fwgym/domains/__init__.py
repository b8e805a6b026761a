"""Domains (datasets) as specs: :class:`Domain` and the registry of domains.

Each domain is one module that builds a :class:`Domain` (its data file and digest, id prefix, time zone,
split calendars and cohorts, evaluation series, quality rules, context text pieces and holidays, scenario
families, sigma, figure words) and registers it. fwgym's own are :mod:`fwgym.domains.electricity` and
:mod:`fwgym.domains.cycle_hire`, the two domains of the FWBench protocol (:data:`DOMAINS`: the default
domains of ``fwgym evaluate`` and the aggregate id ``FWBench-v0``). Another dataset is registered from
outside the package::

    from fwgym.domains import Domain, register_domain
    register_domain(MY_DOMAIN)              # before making envs; then fwgym.envs.register_envs() for its ids

or by an entry point of the ``fwgym.domains`` group (a :class:`Domain`, or a callable returning one),
loaded the first time the registry is read. See ``docs/domains.md`` for a worked example.

Opt-in domains ship with fwgym but are not the protocol's (:func:`optional_domains`: ``pedestrian``,
``docs/pedestrian.md``): a module of this package defining ``SPEC``, registered the first time its name is looked
up (:func:`get_domain`, :func:`is_domain`, :func:`domain_of_prefix`), so the protocol's defaults stay the protocol's.
:func:`data_paths` lists every domain's data files and the installed source files that hold its values
(:attr:`Domain.source_files`), what an isolated agent may never read; :func:`source_files` the latter as declared.
"""
from __future__ import annotations

import threading
from types import MappingProxyType
from typing import Any, Mapping

from fwgym.domains.cycle_hire import CYCLE_HIRE
from fwgym.domains.electricity import ELECTRICITY
from fwgym.domains.rules import AllSeries, BusiestSeries, NoInactiveLocalDay, local_midnights
from fwgym.domains.spec import (NON_TRAIN_SPLITS, REQUIRED_SPLITS, DataFile, Domain, HistoryFacts, HolidayCalendar,
                                NoteText, PackageFile, QualityRule, SameMonthLastYear, SeriesSelection,
                                WeeksBeforeHistory)

__all__ = ["Domain", "DataFile", "PackageFile", "HolidayCalendar", "NoteText", "SameMonthLastYear", "WeeksBeforeHistory", "HistoryFacts",
           "SeriesSelection", "QualityRule", "AllSeries", "BusiestSeries", "NoInactiveLocalDay", "local_midnights",
           "NON_TRAIN_SPLITS", "REQUIRED_SPLITS", "DOMAINS", "BUILTIN_DOMAINS", "ENTRY_POINT_GROUP", "DomainError",
           "register_domain", "unregister_domain", "get_domain", "domain_names", "registered_domains",
           "domain_of_prefix", "load_entry_points", "is_domain", "optional_domains", "load_optional_domains",
           "data_paths", "source_files"]

#: the domains of the FWBench protocol, in protocol order: ``fwgym evaluate``'s default domains and
#: ``FWBench-v0`` (adding a domain never changes them)
DOMAINS: tuple[str, ...] = (ELECTRICITY.name, CYCLE_HIRE.name)
#: the domains that ship with fwgym
BUILTIN_DOMAINS: Mapping[str, Domain] = MappingProxyType({d.name: d for d in (ELECTRICITY, CYCLE_HIRE)})
#: the entry-point group of plug-in domains (a :class:`Domain` or a zero-argument callable returning one)
ENTRY_POINT_GROUP = "fwgym.domains"

_LOCK = threading.RLock()
_REGISTRY: dict[str, Domain] = dict(BUILTIN_DOMAINS)
_ENTRY_POINTS_LOADED = False


class DomainError(ValueError):
    """A domain that cannot be registered (a name, env name or id prefix taken) or an entry point that fails."""


def _check_free(domain: Domain) -> None:
    for other in _REGISTRY.values():
        if other.name == domain.name:
            continue
        for what in ("env_name", "id_prefix"):
            if getattr(other, what) == getattr(domain, what):
                raise DomainError(f"domain {domain.name!r}: {what} {getattr(domain, what)!r} is domain "
                                  f"{other.name!r}'s")


def register_domain(domain: Domain, *, replace: bool = False) -> Domain:
    """Add a domain to the registry (returns it). Register before making envs or RL features of it: the RL
    feature layout (:mod:`fwgym.rl.features`) takes its domain slots from the registry when first imported;
    env ids for it appear with :func:`fwgym.envs.register_envs`.

    Raises:
        TypeError: not a :class:`Domain`.
        DomainError: the name is taken (unless ``replace``; a built-in domain is never replaced), or its env
            name or id prefix is another domain's.
    """
    if not isinstance(domain, Domain):
        raise TypeError(f"register_domain needs a fwgym.domains.Domain, got {type(domain).__name__}")
    if domain.protocol and domain.name not in DOMAINS:
        raise DomainError(f"domain {domain.name!r}: only {list(DOMAINS)} are FWBench protocol domains")
    with _LOCK:
        _load_entry_points_locked()
        if domain.name in BUILTIN_DOMAINS and domain is not BUILTIN_DOMAINS[domain.name]:
            raise DomainError(f"domain {domain.name!r} is built in and cannot be replaced")
        if domain.name in _REGISTRY and not replace and _REGISTRY[domain.name] is not domain:
            raise DomainError(f"domain {domain.name!r} is already registered (pass replace=True to replace it)")
        _check_free(domain)
        _REGISTRY[domain.name] = domain
    return domain


def unregister_domain(name: str) -> None:
    """Remove a registered plug-in domain (tests; a process that registered one).

    Raises:
        DomainError: a built-in domain, or no such domain.
    """
    with _LOCK:
        if name in BUILTIN_DOMAINS:
            raise DomainError(f"domain {name!r} is built in and cannot be removed")
        if name not in _REGISTRY:
            raise DomainError(f"no registered domain {name!r}")
        del _REGISTRY[name]


def _load_entry_points_locked() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"{ep.name} = {ep.value}" + (f" (distribution {ep.dist.name})" if ep.dist is not None else "")
        try:
            obj: Any = ep.load()
            domain = obj() if callable(obj) and not isinstance(obj, Domain) else obj
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is reported as one clear error
            _ENTRY_POINTS_LOADED = False
            raise DomainError(f"fwgym plug-in domain {where} failed to load: {type(exc).__name__}: {exc}") from exc
        if not isinstance(domain, Domain):
            _ENTRY_POINTS_LOADED = False
            raise DomainError(f"fwgym plug-in domain {where} is a {type(domain).__name__}, not a fwgym.domains.Domain")
        if domain.name in _REGISTRY and _REGISTRY[domain.name] is not domain:
            _ENTRY_POINTS_LOADED = False
            raise DomainError(f"fwgym plug-in domain {where}: the name {domain.name!r} is taken")
        _check_free(domain)
        _REGISTRY[domain.name] = domain


def load_entry_points() -> tuple[str, ...]:
    """Load the ``fwgym.domains`` entry points (once; every registry read does it first) and return the
    registered domains' names.

    Raises:
        DomainError: an entry point fails to import, is not a :class:`Domain`, or takes a registered name.
    """
    with _LOCK:
        _load_entry_points_locked()
        return tuple(_REGISTRY)


def registered_domains() -> Mapping[str, Domain]:
    """``{name: Domain}`` of every registered domain: the built-in ones first, then the others in
    registration order (a read-only snapshot)."""
    with _LOCK:
        _load_entry_points_locked()
        return MappingProxyType(dict(_REGISTRY))


def domain_names() -> tuple[str, ...]:
    """The names of every registered domain (:func:`registered_domains` order)."""
    return tuple(registered_domains())


_NOT_DOMAINS = frozenset({"spec", "rules", *BUILTIN_DOMAINS})


def optional_domains() -> tuple[str, ...]:
    """The opt-in domains that ship with fwgym: the modules of this package other than the spec, the rules and
    the built-in domains (``pedestrian``), each defining ``SPEC``, its :class:`Domain`. They are not registered
    until asked for (:func:`get_domain` of the name, :func:`load_optional_domains`), so that the protocol's
    defaults (``FWBench-v0``, the RL feature slots) stay the protocol's."""
    import pkgutil

    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_DOMAINS))


def _register_optional_locked(name: str) -> Domain:
    """Import the opt-in domain module ``name`` and register its ``SPEC`` (a :class:`Domain` called ``name``).

    Raises:
        DomainError: the module has no such ``SPEC``.
    """
    import importlib

    spec = getattr(importlib.import_module(f"{__name__}.{name}"), "SPEC", None)
    if not isinstance(spec, Domain) or spec.name != name:
        raise DomainError(f"opt-in domain module {__name__}.{name} must define SPEC, the Domain {name!r}")
    if _REGISTRY.get(name) is not spec:
        register_domain(spec, replace=True)
    return spec


def load_optional_domains() -> tuple[str, ...]:
    """Register every opt-in domain of :func:`optional_domains` (importing its module); returns their names."""
    names = optional_domains()
    with _LOCK:
        for name in names:
            if name not in _REGISTRY:
                _register_optional_locked(name)
    return names


def get_domain(name: str) -> Domain:
    """The registered domain called ``name`` (an opt-in domain of :func:`optional_domains` is imported, so
    registered, the first time it is asked for).

    Raises:
        ValueError: an unknown domain (the message lists the registered and the opt-in ones).
    """
    with _LOCK:
        found = _REGISTRY.get(name) if isinstance(name, str) else None
        if found is None:
            _load_entry_points_locked()
            found = _REGISTRY.get(name) if isinstance(name, str) else None
        if found is None and isinstance(name, str) and name in optional_domains():
            found = _register_optional_locked(name)
    if found is None:
        known = list(dict.fromkeys([*domain_names(), *optional_domains()]))
        raise ValueError(f"unknown domain {name!r}; expected one of {known}")
    return found


def is_domain(name: str) -> bool:
    """Whether ``name`` is a registered or an opt-in domain (an opt-in one is registered by the check)."""
    try:
        get_domain(name)
    except ValueError:
        return False
    return True


def domain_of_prefix(prefix: str) -> Domain | None:
    """The registered domain whose case ids start with ``prefix`` (``"elec"``), or None (an opt-in domain is
    registered first if no registered one has the prefix: a case id names its domain in any process)."""
    found = next((d for d in registered_domains().values() if d.id_prefix == prefix), None)
    if found is None and optional_domains():
        load_optional_domains()
        found = next((d for d in registered_domains().values() if d.id_prefix == prefix), None)
    return found


def _every_spec() -> list[Domain]:
    """Every registered domain, then every opt-in domain that ships with fwgym and is not registered (read from its
    module's ``SPEC``, not registered)."""
    import importlib

    specs = list(registered_domains().values())
    for name in optional_domains():
        if name not in _REGISTRY:
            spec = getattr(importlib.import_module(f"{__name__}.{name}"), "SPEC", None)
            if isinstance(spec, Domain):
                specs.append(spec)
    return specs


def data_paths() -> tuple[str, ...]:
    """Every file that holds a domain's values (:meth:`Domain.data_paths`: the series file, ``extra_files`` and where
    the ``source_files`` are installed) of every registered domain and of every opt-in domain that ships with fwgym
    (read from its module's ``SPEC``, not registered), as absolute paths with symlinks resolved, sorted: what an
    isolated agent must never read (:func:`fwgym.isolation.remote.sandbox_protected`)."""
    return tuple(sorted({p for d in _every_spec() for p in d.data_paths()}))


def source_files() -> tuple[PackageFile, ...]:
    """The :attr:`Domain.source_files` of the same domains as :func:`data_paths`, each once (a worker locates them in
    its own environment too: :func:`fwgym.isolation.sandbox.installed_files`)."""
    return tuple(dict.fromkeys(f for d in _every_spec() for f in d.source_files))
