"""Agents that are code run in a separate, sandboxed process (DESIGN §9, trust; SECURITY.md; docs/isolation.md).

An agent given as a file or a name on the command line (an SB3 zip, whose loading unpickles it; a
``module:factory`` of yours) is code the evaluator should not run in its own interpreter: there it could
read ``env.unwrapped.hindsight()`` from its caller's frame, import the case data, or patch the scorer.

* :class:`IsolatedAgent` is an ordinary agent for :func:`fwgym.agents.run_episode` (``reset(info)``,
  ``act``, ``end_episode``, ``episode_stats`` when the hosted agent has it) that forwards each call to the
  agent hosted in a worker process (:class:`fwgym.isolation.remote.RemoteObject`). The worker receives only
  plain data: the observations, the public reset ``info`` and, after the episode has ended, the record.
  The env, its case data, ``hindsight()`` and the scorer stay here.
* :class:`IsolatedAgentFactory` is the picklable, JSON-serialisable factory the ``--agent module:factory``
  kind builds (``isolated = True``), so the runner can build one per worker process or thread; its
  description (the run manifest's) says how the agent was isolated (``"isolation"``: ``"sandbox"`` or
  ``"process"``) and whether it keeps memory between episodes (``"memory"``).

The workers, their pool, deadlines and scrubbed environment are :mod:`fwgym.isolation.process`; the sandbox
(Landlock: no reading fwgym's data, the run directory or the evaluator's ``/proc``, no signalling the
evaluator) is :mod:`fwgym.isolation.sandbox`; the worker script is :mod:`fwgym.isolation.worker`.

**Failures are the agent's.** An agent that raises, does not answer in time, exits or sends a reply that is
not plain data raises :class:`AgentFailure` here, which :func:`~fwgym.agents.run_episode` treats as the
agent's failure, as any exception of an in-process agent. A dead worker is replaced at the next ``reset``:
the next episode starts with a fresh agent.
"""
from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

from fwgym.isolation.process import (DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_REPLY_BYTES, DEFAULT_START_TIMEOUT, WORKER_DIR,
                                     WORKER_ENV, WORKER_ENV_PREFIXES, WORKER_SCRIPT, WorkerFailure, WorkerProcess,
                                     close_idle_workers, env_names, worker_argv, worker_environ)
from fwgym.isolation.protocol import DENIED_MODULES, plain_data
from fwgym.isolation.remote import MEMORY_MODES, SANDBOX_MODES, RemoteObject, isolation_status

__all__ = ["AgentFailure", "IsolatedAgent", "IsolatedAgentFactory", "RemoteObject", "WorkerProcess", "plain_data",
           "worker_argv", "worker_environ", "close_idle_workers", "isolation_status", "check_source", "WORKER_ENV",
           "WORKER_ENV_PREFIXES", "WORKER_SCRIPT", "WORKER_DIR", "DEFAULT_CALL_TIMEOUT", "DEFAULT_START_TIMEOUT",
           "DEFAULT_MAX_REPLY_BYTES", "DENIED_MODULES", "SANDBOX_MODES", "MEMORY_MODES"]

#: an isolated agent failed (raised, timed out, exited, replied junk): the agent's failure
AgentFailure = WorkerFailure


class IsolatedAgent:
    """An agent whose code runs in a worker process; to :func:`fwgym.agents.run_episode` it is an agent
    like any other (see the module doc for what crosses the process boundary).

    Args:
        target: the agent's factory, ``"package.module:factory"`` or ``"path/to/file.py:factory"`` (a
            function or class returning an object with ``act(observation)``).
        kwargs: keyword arguments of the factory (plain data, e.g. JSON values).
        name: policy name of the records (default: the hosted agent's ``name``, else its class name).
        call_timeout: seconds per call (default :data:`DEFAULT_CALL_TIMEOUT`).
        start_timeout: seconds to start a worker and make the agent (default :data:`DEFAULT_START_TIMEOUT`).
        worker_command: how to start the worker (:func:`worker_argv`; e.g. as another user or in a container).
        max_reply_bytes: largest reply accepted (default 64 MiB).
        guard: install the worker's import guard (tests turn it off to show what it stops).
        worker_env: names of environment variables the agent needs, passed to its worker on purpose (its
            environment is otherwise the allow-list :data:`WORKER_ENV`: no API keys or tokens).
        sandbox: ``"auto"`` (default: Landlock where the kernel allows it), ``"require"`` or ``"off"``
            (:func:`isolation_status`).
        read_paths, write_paths: further paths the sandboxed agent may read (e.g. its weights) / write.
        memory: ``"worker"`` (default: a worker plays episode after episode, a fresh agent object per
            factory call) or ``"none"`` (a fresh process for every episode).

    Attributes:
        isolated: ``True`` (:func:`fwgym.agents.run_episode` never passes hindsight to it).
        requires_hindsight: ``False``; a hosted agent that declares ``requires_hindsight`` is refused.
        target, name, pid (the current worker's process id), isolation (:func:`isolation_status`), memory.

    Methods ``reset(info)``, ``act(observation)``, ``end_episode(record)`` and, only when the hosted agent
    has one, ``episode_stats()`` forward to the hosted agent and raise :class:`AgentFailure` when it fails.

    Raises:
        ValueError: the hosted object has no ``act``, or it requires hindsight; a ``worker_env`` name
            that is not set; a bad ``sandbox`` or ``memory``.
        AgentFailure: the worker cannot start or the factory fails (``kind``: see :class:`AgentFailure`).
    """

    isolated = True
    requires_hindsight = False

    def __init__(self, target: str, kwargs: Mapping | None = None, *, name: str | None = None,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT, start_timeout: float = DEFAULT_START_TIMEOUT,
                 worker_command: str | Sequence[str] | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                 guard: bool = True, worker_env: Sequence[str] = (), sandbox: str = "auto",
                 read_paths: Sequence[str] = (), write_paths: Sequence[str] = (), memory: str = "worker"):
        self.target = str(target)
        self._remote = RemoteObject(target, kwargs, fresh=True, call_timeout=call_timeout,
                                    start_timeout=start_timeout, worker_command=worker_command,
                                    max_reply_bytes=max_reply_bytes, guard=guard, worker_env=worker_env,
                                    sandbox=sandbox, read_paths=read_paths, write_paths=write_paths, memory=memory)
        self.isolation, self.memory = self._remote.isolation, memory
        self._check(self._remote.hello)
        self.name = str(name) if name else self._remote.hello["name"]

    def _check(self, hello: dict) -> None:
        if not hello["has"].get("act"):
            self._remote.close()
            raise ValueError(f"{self.target} made a {hello['name']} without an act(observation) method: not an agent")
        if hello.get("requires_hindsight"):
            self._remote.close()
            raise ValueError(f"{self.target} made an agent that declares requires_hindsight: an agent given as code "
                             "runs isolated and never receives hindsight (only fwgym's registered oracles do, "
                             "through run_episode's explicit hindsight grant; see SECURITY.md)")

    @property
    def pid(self) -> int | None:
        """Process id of the current worker."""
        return self._remote.pid

    @property
    def hello(self) -> dict:
        """The hosted agent's hello (its worker's pid, sandbox, the source files it loaded, ...)."""
        return self._remote.hello

    def reset(self, info: Mapping) -> None:
        """Start an episode: a fresh worker (and agent) if the last one died or, with ``memory="none"``,
        played an episode; then forward ``reset``."""
        if self._remote.begin_episode():
            self._check(self._remote.hello)
        self._remote.reset(info)

    def act(self, observation: Mapping) -> Any:
        """The hosted agent's action for ``observation`` (JSON values: a dict or a string)."""
        return self._remote.call("act", observation)

    def end_episode(self, record: Mapping) -> None:
        """Forward the finished episode's record (nothing when the hosted agent has no ``end_episode``, or
        its worker died during the episode)."""
        if self._remote.alive and self._remote.hello["has"].get("end_episode"):
            self._remote.call("end_episode", dict(record))

    @property
    def episode_stats(self):
        """The hosted agent's ``episode_stats`` (``None`` when its worker died during the episode); an
        ``AttributeError`` (so ``getattr(agent, "episode_stats", None)`` is ``None``) when it has none."""
        if not self._remote.hello["has"].get("episode_stats"):
            raise AttributeError(f"{self.name} has no episode_stats")
        return self._episode_stats

    def _episode_stats(self) -> Any:
        if not self._remote.alive:
            return None
        return self._remote.call("episode_stats")

    def close(self) -> None:
        """Done with this agent: its worker goes back to this process's pool (as when the agent is collected),
        where the next agent of the same spec reuses it with a fresh agent object (not after an episode with
        ``memory="none"``); idle workers end with the process (or :func:`close_idle_workers`)."""
        self._remote.release()

    def terminate(self) -> None:
        """Shut this agent's worker down now."""
        self._remote.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"IsolatedAgent({self.target!r}, name={self.name!r}, pid={self.pid})"


def check_source(source: Mapping) -> None:
    """Check that the agent's code is what ``source`` pinned: the file's sha256 and, under ``"modules"``,
    each of its own modules' (``{path: sha256}``; :func:`fwgym.cli.agent_kinds.python.agent_source`).

    Raises:
        ValueError: a file that cannot be read any more or whose sha256 changed (naming it).
    """
    pinned = {source["file"]: source["sha256"], **dict(source.get("modules") or {})}
    for path, want in pinned.items():
        try:
            with open(path, "rb") as f:
                now = hashlib.sha256(f.read()).hexdigest()
        except OSError as exc:
            raise ValueError(f"the agent's file {path} cannot be read any more: {exc}") from None
        if now != want:
            raise ValueError(f"the agent's file {path} changed since the run started (sha256 {want[:12]} -> "
                             f"{now[:12]}): restore it, or start a new run")


#: entries of an :class:`IsolatedAgentFactory` that describe it but are not arguments of :class:`IsolatedAgent`
_DESCRIPTION_ONLY = ("source", "isolation", "isolation_note")


class IsolatedAgentFactory(dict):
    """A picklable, JSON-serialisable zero-argument factory of :class:`IsolatedAgent` (what
    ``fwgym evaluate --agent module:factory`` builds): a ``dict`` of :class:`IsolatedAgent`'s arguments
    (``worker_env`` holds variable names only, never values: the dict goes into the run manifest), and:

    * ``isolation``: ``"sandbox"`` or ``"process"`` (:func:`isolation_status` when the factory is made; with
      ``"process"``, ``isolation_note`` says why). A factory that says ``"sandbox"`` builds its agents with
      ``sandbox="require"``, so a worker elsewhere (a Ray node on another kernel) fails rather than run
      unsandboxed under that description;
    * ``memory``: ``"worker"`` or ``"none"``;
    * ``source`` (``{"file": absolute path, "sha256": hex, "modules": {path: sha256}}``, set by ``fwgym
      evaluate --agent``: the agent's file, or for ``module:factory`` the module's source file, and the
      agent's own modules it loaded) identifies the agent's code, so ``--resume`` refuses a run whose agent
      code changed; each call checks it (:func:`check_source`: a worker started after an edit mid-run would
      run other code). Absent when not given.

    ``sandbox`` (when not ``"auto"``), ``read_paths`` and ``write_paths`` (when given) are kept as given.

    Attributes:
        isolated: ``True`` (agents of this factory run in worker processes).

    Example::

        factory = IsolatedAgentFactory("mypkg.agents:make_agent", {"depth": 2}, call_timeout=10)
        records = fwgym.evaluation.evaluate([factory], split="test", limit=5)

    Raises:
        ValueError: as :class:`IsolatedAgent` for bad ``worker_env``, ``sandbox`` or ``memory``.
    """

    isolated = True

    def __init__(self, target: str, kwargs: Mapping | None = None, *, name: str | None = None,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT, start_timeout: float = DEFAULT_START_TIMEOUT,
                 worker_command: str | Sequence[str] | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                 worker_env: Sequence[str] = (), source: Mapping | None = None, sandbox: str = "auto",
                 read_paths: Sequence[str] = (), write_paths: Sequence[str] = (), memory: str = "worker"):
        if memory not in MEMORY_MODES:
            raise ValueError(f"memory must be one of {list(MEMORY_MODES)}, got {memory!r}")
        command = None if worker_command is None else worker_argv(worker_command)
        status = isolation_status(sandbox, command)
        super().__init__(target=str(target), kwargs=dict(kwargs or {}), name=name, call_timeout=float(call_timeout),
                         start_timeout=float(start_timeout), worker_command=command,
                         max_reply_bytes=int(max_reply_bytes), isolation=status["isolation"], memory=memory)
        if status["isolation"] != "sandbox":
            self["isolation_note"] = status["reason"]
        if sandbox != "auto":
            self["sandbox"] = sandbox
        for key, paths in (("read_paths", read_paths), ("write_paths", write_paths)):
            if paths:
                self[key] = [str(p) for p in paths]
        names = env_names(worker_env)
        if names:  # only when given: the description of a factory without it is what it was before the option
            self["worker_env"] = list(names)
        if source is not None:  # only when given, as worker_env
            self["source"] = dict(source)

    def __call__(self) -> IsolatedAgent:
        if self.get("source") is not None:
            check_source(self["source"])
        kwargs = {k: v for k, v in self.items() if k not in _DESCRIPTION_ONLY}
        if self.get("isolation") == "sandbox":
            kwargs["sandbox"] = "require"
        return IsolatedAgent(**kwargs)
