"""Running code the evaluator should not run in its own interpreter (DESIGN §9, trust; docs/isolation.md).

A *worker* is a fresh interpreter on the standalone script :mod:`fwgym.isolation.worker` that hosts one
object and answers requests over a pipe:

* :mod:`~fwgym.isolation.protocol`: frames, plain-data requests, JSON replies (standard library only);
* :mod:`~fwgym.isolation.sandbox`: the Landlock sandbox a worker applies to itself, and the evaluator's own
  protection (standard library only);
* :mod:`~fwgym.isolation.process`: the worker process, its deadlines, scrubbed environment and pool;
* :mod:`~fwgym.isolation.remote`: :class:`~fwgym.isolation.remote.RemoteObject`, an object hosted in a
  worker, and what isolation a worker gets;
* :mod:`~fwgym.isolation.worker`: the script (standard library only until it loads the hosted code);
* :mod:`~fwgym.isolation.sources`: where hosted code lives and its sha256, found without running it.

The hosted objects are code agents (:mod:`fwgym.agents.isolation`, ``--agent FILE.py:F``, SB3 zips) and
plug-in forecasters (:mod:`fwgym.forecasters.hosted`). This room lies below both: it imports no other part
of fwgym.
"""
