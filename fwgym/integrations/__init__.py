"""fwgym inside the tools LLM evaluators already run (DESIGN §10 ``integrations/``).

* :mod:`~fwgym.integrations.bridge`: :class:`EpisodeBridge`, one episode played by calls from outside through the
  one episode loop (:func:`fwgym.agents.run_episode`): the same ledger as ``env.step``;
* :mod:`~fwgym.integrations.mcp`: an MCP server of one episode (``fwgym mcp serve``; the ``mcp`` extra);
* :mod:`~fwgym.integrations.inspect`: inspect-ai tasks ``fwgym/decision``, ``fwgym/context``, ``fwgym/forecast``
  and the offline model ``fwgym/scripted`` (the ``inspect`` extra; registered through inspect's entry point);
* :mod:`~fwgym.integrations.runs`: run directories of episodes played there, so their rows join ``fwgym
  leaderboard``.

Nothing here is imported by the rest of fwgym except the command line; the optional SDKs are imported only where
they are used.
"""
