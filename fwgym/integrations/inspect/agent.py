"""fwgym's chat harness with an inspect-ai model as its backend: :class:`InspectChatAgent`.

The episode runs through fwgym's one loop (:func:`fwgym.agents.run_episode`) with fwgym's own chat harness
(:class:`~fwgym.agents.chat.ChatAgent`: prompts, native tool calls or JSON in text, text answers, wasted replies,
the call limit), so an episode played from ``inspect eval`` is counted, charged and scored exactly as one played by
``fwgym evaluate --agent openai``. Only the model's replies come from inspect: each turn converts the chat to
inspect messages and awaits ``Model.generate`` on inspect's event loop (the episode runs on a worker thread of
it), so inspect's providers, retries, caching, token accounting and limits apply to every turn.

The tools are shown to the model as inspect ``ToolInfo`` (the env's argument schemas, as far as inspect's
``ToolParams`` carries them; the rules between arguments also in words in each description) but executed by the
env, not by inspect's tool runner: inspect's runner would refuse a call that breaks the schema without running
it, and such a call must count as a call, exactly as in ``env.step``.

Whose failure: inspect's limits (``message_limit``, ``token_limit``, ``time_limit`` ...: a
``LimitExceededError`` from ``generate``) end the episode as the model's failure (abstained, reason
``context_exhausted: inspect's ... limit``), scored invalid like a full context window. Any other exception of
``generate`` (a server or provider error after inspect's retries) propagates: the sample errors in inspect and is
never scored (``inspect eval-retry`` runs it again).
"""
from __future__ import annotations

from typing import Any, Mapping

from fwgym.agents.chat import ChatAgent, ContextExhausted, ModelReply, ToolRequest
from fwgym.agents.chat.prompts import describe_args

__all__ = ["InspectChatAgent", "tool_infos"]


def tool_infos(schemas: list[dict] | None) -> list:
    """inspect ``ToolInfo`` of OpenAI function schemas (the session's :meth:`~fwgym.agents.chat.ChatSession.tool_schemas`);
    each description ends with the schema's arguments and rules in words (``describe_args``), since inspect's
    ``ToolParams`` keeps types, enums, bounds and patterns but not ``minItems``/``maxItems`` nor rules between
    arguments (``oneOf``, ``if``/``then``)."""
    from inspect_ai.tool import ToolInfo, ToolParams

    out = []
    for s in schemas or ():
        fn = s["function"]
        params = fn["parameters"]
        desc = f"{fn['description']} Args: {describe_args(params)}"
        out.append(ToolInfo(name=fn["name"], description=desc, parameters=ToolParams.model_validate(params)))
    return out


class InspectChatAgent(ChatAgent):
    """A :class:`~fwgym.agents.chat.ChatAgent` whose replies are inspect ``Model.generate`` outputs.

    Args:
        model: the inspect ``Model`` (``inspect_ai.model.get_model()`` in a solver).
        state: the sample's ``TaskState``: the chat is mirrored into ``state.messages`` before every turn
            (inspect's message limit and its log viewer see it) and ``state.output`` is the last output.
        name: the records' policy name.
        **chat_kwargs: :class:`~fwgym.agents.chat.ChatAgent` arguments and chat options.

    Must be used from a thread that anyio started (``anyio.to_thread.run_sync``) inside inspect's event loop.
    """

    backend = "inspect"

    def __init__(self, model: Any, state: Any = None, *, name: str, **chat_kwargs: Any):
        super().__init__(name, **chat_kwargs)
        self.model, self.state = model, state

    def describe(self) -> dict:
        """Settings recorded in traces: the inspect model's name and the chat options."""
        return {"model": str(self.model), **self.options.to_json()}

    def complete(self, messages: list[dict], tools: list[dict] | None) -> ModelReply:
        """One inspect ``generate`` (see the module docstring for limits and errors)."""
        import anyio.from_thread
        from inspect_ai.util import LimitExceededError

        try:
            output, history = anyio.from_thread.run(self._generate, messages, tools)
        except LimitExceededError as exc:
            raise ContextExhausted(f"inspect's {exc.type} limit: {exc}") from None
        return _reply(output)

    async def _generate(self, messages: list[dict], tools: list[dict] | None):
        from inspect_ai.model import messages_from_openai

        history = await messages_from_openai(messages)
        if self.state is not None:
            self.state.messages = list(history)  # inspect's message limit counts these
        output = await self.model.generate(history, tools=tool_infos(tools))
        if self.state is not None:
            self.state.output = output
            self.state.messages = [*history, output.message]
        return output, history

    def mirror(self) -> None:
        """Copy the finished chat into ``state.messages`` (the log shows the whole episode)."""
        if self.state is None or self.session is None:
            return
        import anyio.from_thread
        from inspect_ai.model import messages_from_openai
        from inspect_ai.util import LimitExceededError

        try:  # the log shows the whole episode, unless the conversation is past inspect's message limit
            self.state.messages = anyio.from_thread.run(messages_from_openai, list(self.session.messages))
        except LimitExceededError:
            pass


def _reply(output: Any) -> ModelReply:
    """An inspect ``ModelOutput`` as a :class:`~fwgym.agents.chat.ModelReply` (usage as prompt/completion tokens)."""
    msg = output.message
    calls = []
    for i, c in enumerate(msg.tool_calls or []):
        args: Any = c.arguments if c.parse_error is None else f"<arguments inspect could not parse: {c.parse_error}>"
        calls.append(ToolRequest(id=c.id or f"call_{i}", name=c.function, arguments=args))
    meta: dict[str, Any] = {"requests": 1}
    if output.time is not None:
        meta["latency_s"] = round(float(output.time), 3)
    usage = output.usage
    if usage is not None:
        meta["usage"] = {"prompt_tokens": int(usage.input_tokens + (usage.input_tokens_cache_read or 0)
                                              + (usage.input_tokens_cache_write or 0)),
                         "completion_tokens": int(usage.output_tokens)}
    stop = output.stop_reason
    return ModelReply(content=msg.text or "", tool_calls=calls, reasoning=_reasoning(msg),
                      finish_reason={"max_tokens": "length", "tool_calls": "tool_calls"}.get(stop, stop), meta=meta)


def _reasoning(msg: Any) -> str | None:
    parts = [getattr(c, "reasoning", None) for c in (msg.content if isinstance(msg.content, list) else [])]
    text = "\n".join(p for p in parts if isinstance(p, str) and p)
    return text or None


def record_of(state: Any) -> Mapping | None:
    """The fwgym record a sample's solver stored (``None`` when the episode did not finish)."""
    return (state.metadata or {}).get("fwgym_record")
