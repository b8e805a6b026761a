"""fwgym as a Model Context Protocol server (the official ``mcp`` SDK): one episode per server.

``fwgym mcp serve --split dev --case-id ID`` (:mod:`fwgym.cli.mcp`) serves one episode of one case over stdio
(the default: an MCP client starts the server as a subprocess) or streamable HTTP (``--http HOST:PORT``):

* **tools**: the env's tools under their own names, with the argument schemas of the env's forecast pool
  (:func:`fwgym.tools.registry.tool_parameters`). A call is ``env.step({"tool": name, "args": arguments})``
  on the one episode loop (:class:`~fwgym.integrations.bridge.EpisodeBridge`): every call counts, charges and is
  refused exactly as there, a malformed call is the same counted error result, and the 13th call ends the
  episode. The result is the env's tool result as JSON (text content and ``structuredContent``, ``isError``
  when it is an error) with ``calls_left`` and ``budget_left``; the call that ends the episode also carries
  the episode's record (``"episode"``: loss, floor, R, S, credits, valid, status, ...). Calls after the end
  are refused (``episode_over``), nothing run or counted.
* **prompt** ``fwgym_episode``: the case's instruction, the system prompt and first message fwgym's own chat
  harness gives a model (objective, contract, limits, the case context and the visible history table).
* **resources**: ``fwgym://episode/context`` (the context text), ``fwgym://episode/history`` (the visible
  history, JSON timestamps and values) and ``fwgym://episode/facts`` (the episode's public facts, the
  ``info["episode"]`` of the env's reset). Nothing at or after the decision cut-off is served.

One episode per server, not a ``next_case`` flow: a client session, and the model's conversation, belong to
one case (no memory across cases reaches the server or leaks through it), the prompt and resources stay
fixed for the server's life (clients cache them), a killed server loses only its own case, and a harness
plays many cases by starting one server per case, in sequence or in parallel, each with the same ``--out``.

``--out RUN`` (:func:`fwgym.integrations.runs.add_episodes`) writes the finished episode into a run directory
(manifest, record, trace) as policy ``--policy-name``, so MCP-played rows join ``fwgym leaderboard``. A client
that disconnects before the episode ends leaves a ``harness_error`` record (never scored; the run is
incomplete until the case is served and played again with the same ``--out``).
"""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Callable, Mapping

from fwgym.agents.chat.prompts import first_user_message, history_start, system_prompt
from fwgym.errors import HarnessError
from fwgym.integrations.bridge import CallAnswer, EpisodeBridge
from fwgym.tools import REGISTRY
from fwgym.tools.actions import result_json
from fwgym.tools.registry import pool_from_facts, tool_parameters

__all__ = ["PROMPT_NAME", "RESOURCES", "EpisodeServer", "episode_instruction"]

#: the server's one prompt
PROMPT_NAME = "fwgym_episode"
#: the resources: uri -> (name, MIME type, description)
RESOURCES: dict[str, tuple[str, str, str]] = {
    "fwgym://episode/context": ("context", "text/plain", "the case context (what the series is, units, place, "
                                                         "decision time, target window, contract, tools, notes)"),
    "fwgym://episode/history": ("history", "application/json", "the visible history: hourly timestamps (UTC) and "
                                                              "values, oldest first"),
    "fwgym://episode/facts": ("facts", "application/json", "the episode's public facts (case, windows, contract, "
                                                          "task, tools, budget, call limit, forecast pool)"),
}
#: why an episode whose client went away is not scored
DISCONNECTED = "the MCP client disconnected before the episode ended"


def episode_instruction(observation: Mapping, facts: Mapping) -> str:
    """The case's instruction for a model: fwgym's system prompt (native tools) and first user message."""
    task = "forecast" if facts.get("task") == "forecast" else "decision"
    system = system_prompt(max_calls=int(facts["max_calls"]), budget=float(facts["budget"]), tools=facts["tools"],
                           native_tools=True, task=task, episode=facts, pool=pool_from_facts(facts.get("pool")))
    user = first_user_message(observation, history_start=history_start(facts, len(observation["history"])),
                              native_tools=True)
    return system + "\n\n" + user


class EpisodeServer:
    """An MCP server (``mcp.server.lowlevel.Server``) serving one episode of ``env`` on ``case_id``.

    Args:
        env: the fwgym env (its split, suite settings and pool).
        case_id: the case.
        policy: the record's policy name.
        on_end: called once with the final :class:`~fwgym.integrations.bridge.CallAnswer` and the client's
            ``{"name", "version"}`` (``--out`` writes the run directory there); ``None``: nothing.
        timeout: seconds a call may wait for the env.

    Attributes:
        bridge: the :class:`~fwgym.integrations.bridge.EpisodeBridge` (the ledger, the record).
        server: the SDK's low-level server.
        client: the connected client's name and version (when it said).
    """

    def __init__(self, env: Any, case_id: str, *, policy: str,
                 on_end: Callable[[CallAnswer, dict], None] | None = None, timeout: float | None = None):
        import mcp_types as types
        from mcp.server.lowlevel import Server

        from fwgym.version import __version__

        self._types = types
        self.bridge = EpisodeBridge(env, case_id, policy=policy, episode_id=f"mcp:{policy}:{case_id}", timeout=timeout)
        self.observation = self.bridge.start()
        self.facts: dict = dict(self.bridge.reset_info.get("episode") or {})
        self.task = "forecast" if self.facts.get("task") == "forecast" else "decision"
        self.pool = pool_from_facts(self.facts.get("pool"))
        self.on_end, self.client = on_end, {}
        self._ended = False
        self.server = Server("fwgym", version=__version__, title="fwgym episode",
                             instructions=f"One fwgym episode: case {case_id}. Read the prompt {PROMPT_NAME!r} "
                                          "(or the resources), call the tools, and finish with submit.",
                             on_list_tools=self._list_tools, on_call_tool=self._call_tool,
                             on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt,
                             on_list_resources=self._list_resources, on_read_resource=self._read_resource)

    # -- handlers -------------------------------------------------------------------------------------

    def tools(self) -> list:
        """The MCP tools: the env's tools with the pool's argument schemas."""
        t = self._types
        return [t.Tool(name=name, description=REGISTRY[name].description,
                       input_schema=tool_parameters(name, self.task, self.pool))
                for name in self.facts.get("tools") or REGISTRY]

    async def _list_tools(self, ctx, params):
        self._note_client(ctx)
        return self._types.ListToolsResult(tools=self.tools())

    async def _call_tool(self, ctx, params):
        import anyio

        self._note_client(ctx)
        answer = await anyio.to_thread.run_sync(self.bridge.call, params.name, params.arguments)
        if answer.done:
            self._finish(answer)
        body = answer.to_json()
        t = self._types
        return t.CallToolResult(content=[t.TextContent(type="text", text=result_json(body))], structured_content=body,
                                is_error=not bool(answer.result.get("ok")))

    async def _list_prompts(self, ctx, params):
        t = self._types
        return t.ListPromptsResult(prompts=[t.Prompt(
            name=PROMPT_NAME, title="fwgym episode",
            description=f"The instruction of case {self.bridge.case_id}: objective, contract, limits, context and "
                        "visible history")])

    async def _get_prompt(self, ctx, params):
        t = self._types
        if params.name != PROMPT_NAME:
            from mcp.shared.exceptions import MCPError

            raise MCPError(t.INVALID_PARAMS, f"unknown prompt {params.name!r}; this server has {PROMPT_NAME!r}")
        text = episode_instruction(self.observation, self.facts)
        return t.GetPromptResult(description=f"fwgym case {self.bridge.case_id}", messages=[
            t.PromptMessage(role="user", content=t.TextContent(type="text", text=text))])

    async def _list_resources(self, ctx, params):
        t = self._types
        return t.ListResourcesResult(resources=[t.Resource(uri=uri, name=name, mime_type=mime, description=desc)
                                                for uri, (name, mime, desc) in RESOURCES.items()])

    async def _read_resource(self, ctx, params):
        t = self._types
        uri = str(params.uri)
        if uri not in RESOURCES:
            from mcp.shared.exceptions import MCPError

            raise MCPError(t.INVALID_PARAMS, f"unknown resource {uri!r}; this server has {list(RESOURCES)}")
        return t.ReadResourceResult(contents=[t.TextResourceContents(uri=uri, mime_type=RESOURCES[uri][1],
                                                                     text=self.resource_text(uri))])

    def resource_text(self, uri: str) -> str:
        """The text of resource ``uri`` (:data:`RESOURCES`)."""
        if uri == "fwgym://episode/context":
            return str(self.observation["context"])
        if uri == "fwgym://episode/history":
            start = history_start(self.facts, len(self.observation["history"]))
            values = [float(v) for v in self.observation["history"]]
            stamps = [(start + timedelta(hours=i)).strftime("%Y-%m-%dT%H:00:00Z") for i in range(len(values))] \
                if start is not None else None
            return json.dumps({"unit": (self.facts.get("case") or {}).get("unit"), "timestamps": stamps,
                               "values": values})
        return json.dumps(self.facts)

    # -- the end --------------------------------------------------------------------------------------

    def _note_client(self, ctx) -> None:
        if self.client:
            return
        info = getattr(getattr(getattr(ctx, "session", None), "client_params", None), "client_info", None)
        if info is not None:
            self.client = {"name": str(getattr(info, "name", "")), "version": str(getattr(info, "version", ""))}

    def _finish(self, answer: CallAnswer) -> None:
        if self._ended:
            return
        self._ended = True
        if self.on_end is not None:
            self.on_end(answer, dict(self.client))

    def close(self) -> CallAnswer:
        """End the server's episode: an episode still running when the client went away ends as
        ``harness_error`` (never scored: :data:`DISCONNECTED`). Returns the final answer."""
        if not self.bridge.done:
            answer = self.bridge.end(DISCONNECTED, harness=HarnessError(DISCONNECTED, "client_disconnected"))
        else:
            answer = self.bridge.end("")
        self._finish(answer)
        return answer

    # -- transports -----------------------------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve over stdin/stdout until the client closes them."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    async def run_http(self, host: str, port: int, *, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted (or the episode's record is
        written and ``stop`` is called)."""
        import uvicorn

        app = self.server.streamable_http_app(host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        self._uvicorn = server = uvicorn.Server(config)
        if on_ready is not None:
            import anyio

            async def announce() -> None:
                while not server.started and not server.should_exit:
                    await anyio.sleep(0.05)
                on_ready(f"http://{host}:{port}/mcp")

            async with anyio.create_task_group() as tg:
                tg.start_soon(announce)
                await server.serve()
        else:
            await server.serve()
