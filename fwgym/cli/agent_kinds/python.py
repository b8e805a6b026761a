"""Agent kind ``python``: your own agent code, ``fwgym evaluate --agent MODULE:FACTORY`` or
``--agent FILE.py:FACTORY``.

``FACTORY`` is a function or class that returns an agent (an object with ``act(observation)``; see
:mod:`fwgym.agents.base`), called with the keyword arguments of ``--agent-kwargs JSON``. Examples::

    fwgym evaluate --agent mypkg.agents:make_agent --agent-kwargs '{"depth": 2}' --split test --limit 20
    fwgym evaluate --agent ./my_agent.py:MyAgent --agent-timeout 10

``MODULE`` is imported with the current directory first on ``sys.path`` (as ``python -m`` does); a file
is loaded by path. The agent runs **isolated** (:class:`fwgym.agents.isolation.IsolatedAgentFactory`): a
worker process that receives only the observations, the public reset info and, after each episode, its
record, sandboxed where the kernel allows it (docs/isolation.md); the env, the case data, hindsight and
the scorer stay in the evaluating process. An agent that
raises, exceeds ``--agent-timeout`` or exits fails its episode, not the run. ``--in-process`` runs it in
the evaluating process instead (code you trust; same records). The agent is built once when the command
starts, so a factory that fails, an object without ``act`` or an agent that declares
``requires_hindsight`` is a clear error before any case runs.

The agent's code is part of the run: the sha256 of its file (:func:`agent_source`) and of every module
of its own folder or package that it loaded when it was built (:func:`own_modules`: a ``helper.py`` beside
``my_agent.py``, ``mypkg/util.py`` beside ``mypkg/agents.py``) are in the agent's description in the run
manifest, so ``fwgym evaluate --resume`` refuses to finish a run whose agent code was edited since it
started (the row would mix two versions of the code), and no agent is built from edited code mid-run.
Modules it imports only later, while it plays, are not pinned (import them at module level).
"""
from __future__ import annotations

import os

from fwgym.cli.agent_kinds.isolation import add_isolation_arguments, in_process, isolation_kwargs, report_isolation
from fwgym.cli.args import add_arguments_once, json_object
from fwgym.isolation.sources import module_origin

KIND = "python"
HELP = ("your own agent code, given as --agent MODULE:FACTORY or --agent FILE.py:FACTORY (a function or class "
        "returning an agent; --agent-kwargs JSON), run in an isolated worker process")


def accepts(value: str) -> bool:
    """Whether an ``--agent`` value names a factory (``MODULE:FACTORY`` or ``FILE.py:FACTORY``)."""
    module, sep, attr = str(value).rpartition(":")
    return bool(sep and module and attr) and "//" not in value


def add_arguments(group) -> None:
    """``--agent-kwargs``, ``--agent-name`` (if no other kind added it) and the isolation options."""
    group.add_argument("--agent-kwargs", default=None, dest="agent_kwargs", metavar="JSON",
                       help="keyword arguments of the --agent MODULE:FACTORY factory, a JSON object")
    add_arguments_once(group, [(("--agent-name",), {"default": None, "dest": "agent_name",
                                                    "help": "policy name of the agent in results"})])
    add_isolation_arguments(group)


def _target(value: str) -> str:
    """The target with a file path made absolute (the worker may start elsewhere)."""
    module, _, attr = value.rpartition(":")
    if module.endswith(".py") or os.sep in module or (os.altsep and os.altsep in module):
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--agent {value}: no such file {path}")
        return f"{path}:{attr}"
    return value


def _is_file_target(module: str) -> bool:
    return module.endswith(".py") or os.sep in module or bool(os.altsep and os.altsep in module)


def agent_source(target: str) -> dict | None:
    """What identifies the code of an agent target in the run manifest: ``{"file": absolute path,
    "sha256": hex digest of its bytes}`` (and, once the agent is built, ``"modules"``: its own modules,
    :func:`own_modules`).

    For ``FILE.py:FACTORY`` the file; for ``MODULE:FACTORY`` the module's source file, found without
    importing it (:func:`fwgym.isolation.sources.module_origin`); for a package (``mypkg:make`` defined in ``mypkg/__init__.py``,
    or re-exported there) the package's ``__init__`` file.

    Returns:
        the dict, or ``None`` when the module has no source file (built-in, frozen, namespace package) or
        is not found (building the agent then fails with its own error).
    """
    from fwgym.evaluation.manifest import file_sha256

    module, _, _ = str(target).rpartition(":")
    if _is_file_target(module):
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            return None
    else:
        path = module_origin(module)
        if path is None:
            return None
    return {"file": path, "sha256": file_sha256(path)}


def agent_root(target: str) -> str | None:
    """The agent's own folder: the directory of ``FILE.py`` (or of a top-level module), or the folder of the
    top-level package of ``MODULE`` (``mypkg`` for ``mypkg.agents:make``), found without importing it;
    ``None`` when it has no source file."""
    module, _, _ = str(target).rpartition(":")
    if _is_file_target(module):
        return os.path.dirname(os.path.realpath(module))
    origin = module_origin(module.split(".")[0])
    if origin is None:
        return None
    return os.path.dirname(os.path.realpath(origin))


def own_modules(target: str, files) -> dict[str, str]:
    """``{path: sha256}`` of the loaded source ``files`` that belong to the agent: inside its own folder
    (:func:`agent_root`), except its main file (``agent_source``'s) and fwgym's own package (pinned by the
    run's fwgym version and commit); what ``--resume`` also checks.

    Args:
        target: the ``--agent`` target. files: paths of loaded modules' source files (the worker's hello
            ``modules``, or this process's ``sys.modules``).
    """
    from fwgym.evaluation.manifest import file_sha256

    root = agent_root(target)
    source = agent_source(target)
    if root is None:
        return {}
    fwgym_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # .../fwgym
    out = {}
    for f in files:
        real = os.path.realpath(f)
        inside = real.startswith(root.rstrip(os.sep) + os.sep)
        if not inside or real.startswith(fwgym_dir + os.sep) or not os.path.isfile(real):
            continue
        if source is not None and real == os.path.realpath(source["file"]):
            continue
        out[real] = file_sha256(real)
    return dict(sorted(out.items()))


def _loaded_files() -> list[str]:
    import sys

    files = (getattr(m, "__file__", None) for m in list(sys.modules.values()))
    return [f for f in files if isinstance(f, str) and f.endswith(".py")]


def make_in_process(target: str, kwargs: dict, name: str | None = None, source: dict | None = None):
    """The agent of ``target`` built in this process (``--in-process``): ``FACTORY(**kwargs)``, named ``name``
    when given; the working directory is put on ``sys.path`` as in the worker. Module-level, so
    ``functools.partial(make_in_process, ...)`` pickles for worker processes.

    Args:
        source: :func:`agent_source` of ``target`` when the run started (with its ``modules``); the files
            must still have those sha256 when an agent is built (:func:`fwgym.agents.isolation.check_source`).

    Raises:
        ValueError / ImportError / FileNotFoundError: as :func:`fwgym.isolation.worker.load_target`;
            ValueError also when the agent's file or one of its own modules changed since ``source`` was taken.
    """
    import sys

    from fwgym.agents.isolation import check_source
    from fwgym.isolation.worker import load_target

    if source is not None:
        check_source(source)
    if os.getcwd() not in sys.path:  # MODULE imports from the working directory, as in the worker
        sys.path.insert(0, os.getcwd())
    agent = load_target(target)(**kwargs)
    if name:
        agent.name = name
    return agent


def build(args):
    """The factory of ``--agent MODULE:FACTORY``: an :class:`~fwgym.agents.isolation.IsolatedAgentFactory`
    (JSON-serialisable, ``isolated = True``), or with ``--in-process`` a ``functools.partial`` of
    :func:`make_in_process`; either carries the :func:`agent_source` of the target (its file and sha256),
    which goes into the run manifest. One agent is built now to check the target.

    Raises:
        ValueError: ``--agent python`` without a target, malformed ``--agent-kwargs``, a target that does
            not import or whose factory fails, an object without ``act``, or an agent that requires hindsight.
        FileNotFoundError: a ``FILE.py`` that does not exist.
    """
    value = getattr(args, "agent", None) or ""
    if not accepts(value):
        raise ValueError("name your agent's factory: --agent MODULE:FACTORY or --agent FILE.py:FACTORY")
    target = _target(value)
    kwargs = json_object(getattr(args, "agent_kwargs", None), "--agent-kwargs") or {}
    name = getattr(args, "agent_name", None)
    source = agent_source(target)  # before the agent is built: the code that the run's episodes play
    pin = {"source": source} if source is not None else {}
    if in_process(args):
        import functools

        factory = functools.partial(make_in_process, target, kwargs, name, **pin)
        try:
            agent = factory()
        except ImportError as exc:
            raise ValueError(f"--agent {value}: {exc}") from None
        if not callable(getattr(agent, "act", None)):
            raise ValueError(f"--agent {value} made a {type(agent).__name__} without an act(observation) method")
        if getattr(agent, "requires_hindsight", False):
            raise ValueError(f"--agent {value} made an agent that requires hindsight, which only fwgym's registered "
                             "oracles receive")
        modules = own_modules(target, _loaded_files())
        if source is not None and modules:  # the agent's own modules it imported: pinned too
            factory = functools.partial(make_in_process, target, kwargs, name, source={**source, "modules": modules})
        return factory
    from fwgym.agents.isolation import AgentFailure, IsolatedAgentFactory

    factory = IsolatedAgentFactory(target, kwargs, name=name, **pin, **isolation_kwargs(args))
    try:
        agent = factory()  # starts the worker and builds the agent now; the worker is reused by the run
    except AgentFailure as exc:
        raise ValueError(f"--agent {value}: {exc}") from None
    modules = own_modules(target, agent.hello.get("modules") or ())
    agent.close()
    if source is not None and modules:  # the agent's own modules the worker loaded: pinned too
        factory["source"] = {**source, "modules": modules}
    report_isolation(factory, f"the agent {value}")
    return factory


__all__ = ["KIND", "HELP", "accepts", "add_arguments", "build", "make_in_process", "agent_source", "agent_root",
           "own_modules"]
