"""``--model fwgym/scripted``: an offline, deterministic inspect-ai model (registered through inspect's model-API
entry point), for trying and testing the fwgym tasks without a model, a server or a download.

It plays the script of fwgym's scripted chat server (:func:`fwgym.testing.chat_server.play_every_suite`): in the
decision and context tasks it calls ``classical_plan`` with ``weekday_empirical`` (``-M method=NAME`` for another
of the 8 classical methods), then answers with that plan as the final answer JSON, so its S equals the
``weekday_empirical`` row of ``fwgym leaderboard`` on the same cases; in the forecast task it buys a
``seasonal_empirical`` forecast and submits its 24 target rows (the ``seasonal_empirical_quantiles`` row). Replies
depend on the request only.

Token counts need no tokenizer (inspect's default estimate downloads tiktoken's ``o200k_base``): a stated
estimate of 4 bytes of UTF-8 per token, ``ceil(bytes / 4)``, for the prompt (its messages and tool schemas as
JSON) and the completion.
"""
from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["ScriptedModel", "estimate_tokens", "BYTES_PER_TOKEN"]

#: the token estimate's bytes per token (module docstring)
BYTES_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """``ceil(len(text.encode("utf-8")) / 4)``: the scripted model's token count (no tokenizer)."""
    return math.ceil(len(str(text).encode("utf-8")) / BYTES_PER_TOKEN)


def _make():
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelAPI, ModelOutput, ModelUsage, modelapi
    from inspect_ai.model import messages_to_openai
    from inspect_ai.tool import ToolCall

    from fwgym.forecasters.classical import CLASSICAL_METHODS
    from fwgym.testing.chat_server import play_every_suite

    @modelapi(name="fwgym")
    class ScriptedModel(ModelAPI):
        """The ``fwgym`` model API; its one model is ``scripted`` (``--model fwgym/scripted``)."""

        def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                     config: Any = None, method: str = "weekday_empirical", **model_args: Any):
            from inspect_ai.model import GenerateConfig

            super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
            if model_name != "scripted":
                raise ValueError(f"the fwgym model API has one model, 'scripted' (--model fwgym/scripted), got "
                                 f"{model_name!r}")
            if method not in CLASSICAL_METHODS:
                raise ValueError(f"method must be one of {list(CLASSICAL_METHODS)}, got {method!r}")
            self.method = method
            self._respond = play_every_suite(method)

        async def count_text_tokens(self, text: str) -> int:
            return estimate_tokens(text)

        async def generate(self, input, tools, tool_choice, config):
            messages = await messages_to_openai(input)
            body = {"model": self.model_name, "messages": messages,
                    "tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                                "parameters": t.parameters.model_dump(exclude_none=True)}}
                              for t in tools]}
            reply = self._respond(body)["choices"][0]["message"]
            calls = [ToolCall(id=c["id"], function=c["function"]["name"],
                              arguments=json.loads(c["function"]["arguments"]), type="function")
                     for c in reply.get("tool_calls") or []]
            content = reply.get("content") or ""
            prompt = estimate_tokens(json.dumps(messages, default=str)) + estimate_tokens(
                json.dumps([t.model_dump(exclude_none=True) for t in tools], default=str))
            completion = estimate_tokens(content + json.dumps([c["function"] for c in reply.get("tool_calls") or []]))
            message = ChatMessageAssistant(content=content, tool_calls=calls or None, model="fwgym/scripted",
                                           source="generate")
            return ModelOutput(model="fwgym/scripted", choices=[ChatCompletionChoice(
                message=message, stop_reason="tool_calls" if calls else "stop")],
                usage=ModelUsage(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion))

    return ScriptedModel


ScriptedModel = _make()
