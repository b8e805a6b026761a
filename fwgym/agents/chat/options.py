"""The chat session's options, carried once: from the command line (or Python) to the session and its prompts.

:class:`ChatOptions` is what a :class:`~fwgym.agents.chat.session.ChatSession` is built from: how tools are
offered (natively, strictly, described in the prompt, constrained), how results are shown, which prompt.
A backend agent (:class:`~fwgym.agents.openai.OpenAIChatAgent`, :class:`~fwgym.agents.transformers.TransformersChatAgent`)
takes one ``options`` (a :class:`ChatOptions` or its JSON form, :meth:`ChatOptions.to_json`, which is what an
:class:`~fwgym.agents.factory.LLMAgentFactory` and the run manifest hold) and hands it on unchanged; a new
option is one field here, one command-line flag (:func:`fwgym.cli.agent_kinds.llm.chat_options`) and the code
that reads it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from fwgym.context.text import OBJECTIVES

__all__ = ["ChatOptions", "CONSTRAIN_MODES", "OBJECTIVES", "TOOL_RESULT_ROLES", "MAX_ARGUMENT_CHARS", "as_options"]

#: How tool results go back to the model: ``tool`` messages, or ``user`` messages (for chat templates
#: that drop ``tool`` messages, e.g. llama-cpp-python's ``chatml-function-calling``).
TOOL_RESULT_ROLES = ("tool", "user")
#: Longest tool-call argument string passed on (characters): the env's longest action
#: (:data:`fwgym.tools.actions.MAX_ACTION_CHARS`); a longer one is refused as ``arguments_too_long``.
MAX_ARGUMENT_CHARS = 100_000
#: constrained decoding of the replies (:mod:`fwgym.agents.chat.constrain`): a JSON schema or a GBNF grammar of
#: the episode's own answer and tool calls
CONSTRAIN_MODES = ("json-schema", "grammar")


@dataclass(frozen=True)
class ChatOptions:
    """Options of a chat session (frozen; :meth:`replace` for a changed copy).

    Attributes:
        native_tools: offer tools through native function calling (tool results go back as ``tool``
            messages); otherwise tools are described in the system message and called with JSON in text.
        text_tool_calls: accept JSON tool calls in the reply text (always on when ``native_tools`` is off).
        tools: the tool names to offer (``None``: the episode's ``tools`` fact, else every registered tool).
        max_tool_chars: truncate tool results longer than this in the messages (``None``: never).
        system: replace the system message text (``None``: the suite's system prompt).
        history_hours: show only the last N visible hours in the first message (``None``: all 336).
        describe_tools: list the tools and their arguments in the system message (``None``: only in
            text mode; on for servers that take ``tools`` without showing them to the model).
        compact_results: show tool results compactly
            (:func:`~fwgym.agents.chat.prompts.compact_result`) and the prompts without what the levels
            already say (no physical capacity grid).
        strict_tools: send OpenAI strict-mode schemas where a tool has one; ``null`` values of optional
            arguments in native calls are then dropped (:func:`fwgym.tools.registry.drop_null_arguments`).
        tool_results_as: ``"tool"`` (``tool`` messages after native calls) or ``"user"`` (results of one
            reply folded into one ``user`` message).
        max_argument_chars: refuse native tool-call arguments longer than this (``arguments_too_long``).
        direct_prompt: the direct-prompt baseline (:func:`~fwgym.agents.chat.prompts.direct_prompt`): no
            tools offered, no tool calls accepted; the model answers at once (forecast episodes: Context is Key's
            direct prompt, :mod:`fwgym.agents.chat.direct`).
        samples: completions per direct-prompt forecast (default 25, CiK's ``N_SAMPLES``).
        constrain: ``None``, ``"json-schema"`` or ``"grammar"``: constrain each reply to the episode's
            own answer and tool-call grammar (:mod:`fwgym.agents.chat.constrain`); replies are then JSON
            in text (native tools are not sent).
        objective: ``"score"`` (the protocol's S) or ``"loss"``: the prompts state the decision loss as the
            objective and nothing else changes (the paper's objective ablation, decision task only;
            :func:`~fwgym.agents.chat.prompts.objective_paragraph`, :func:`fwgym.context.text.objective_line`).

    Raises:
        ValueError: a value out of its range (when constructed).
    """

    native_tools: bool = True
    text_tool_calls: bool = True
    tools: tuple[str, ...] | None = None
    max_tool_chars: int | None = None
    system: str | None = None
    history_hours: int | None = None
    describe_tools: bool | None = None
    compact_results: bool = False
    strict_tools: bool = False
    tool_results_as: str = "tool"
    max_argument_chars: int = MAX_ARGUMENT_CHARS
    direct_prompt: bool = False
    samples: int = 25
    constrain: str | None = None
    objective: str = "score"

    def __post_init__(self) -> None:
        if self.tools is not None:
            if isinstance(self.tools, str) or not all(isinstance(t, str) for t in self.tools):
                raise ValueError(f"tools must be a list of tool names, got {self.tools!r:.100}")
            object.__setattr__(self, "tools", tuple(self.tools))
        if self.tool_results_as not in TOOL_RESULT_ROLES:
            raise ValueError(f"tool_results_as must be one of {list(TOOL_RESULT_ROLES)}, got {self.tool_results_as!r}")
        if not isinstance(self.max_argument_chars, int) or isinstance(self.max_argument_chars, bool) \
                or self.max_argument_chars < 2:
            raise ValueError(f"max_argument_chars must be an integer >= 2, got {self.max_argument_chars!r}")
        for name in ("max_tool_chars", "history_hours"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"{name} must be None or an integer >= 1, got {v!r}")
        if not isinstance(self.samples, int) or isinstance(self.samples, bool) or self.samples < 2:
            raise ValueError(f"samples must be an integer >= 2, got {self.samples!r}")
        if self.constrain is not None and self.constrain not in CONSTRAIN_MODES:
            raise ValueError(f"constrain must be None or one of {list(CONSTRAIN_MODES)}, got {self.constrain!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {list(OBJECTIVES)}, got {self.objective!r}")
        for name in ("native_tools", "text_tool_calls", "compact_results", "strict_tools", "direct_prompt"):
            object.__setattr__(self, name, bool(getattr(self, name)))

    def replace(self, **changes: Any) -> ChatOptions:
        """A copy with ``changes`` (validated)."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        """The options as JSON data (``tools`` a list), what factories and run manifests hold."""
        out = dataclasses.asdict(self)
        if out["tools"] is not None:
            out["tools"] = list(out["tools"])
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChatOptions:
        """Options from :meth:`to_json` output (unknown keys refused).

        Raises:
            ValueError: an unknown option or a bad value.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown chat options {unknown}; known: {sorted(names)}")
        return cls(**dict(data))

    @property
    def sends_native_tools(self) -> bool:
        """Whether tools go to the model by native function calling (not in the direct prompt, not when the
        replies are constrained to JSON in text)."""
        return self.native_tools and not self.direct_prompt and self.constrain is None


def as_options(options: ChatOptions | Mapping[str, Any] | None = None, **kwargs: Any) -> ChatOptions:
    """One :class:`ChatOptions` from an object, its JSON form, or keyword arguments (the older spelling of the
    agents' constructors, e.g. ``compact_results=True``); keywords given beside ``options`` replace its fields.

    Raises:
        ValueError: an unknown option or a bad value.
    """
    if options is None:
        base = ChatOptions()
    elif isinstance(options, ChatOptions):
        base = options
    elif isinstance(options, Mapping):
        base = ChatOptions.from_json(options)
    else:
        raise ValueError(f"options must be ChatOptions or a mapping of them, got {type(options).__name__}")
    if "direct" in kwargs:  # the session's older name of direct_prompt
        kwargs["direct_prompt"] = kwargs.pop("direct")
    if not kwargs:
        return base
    names = {f.name for f in dataclasses.fields(ChatOptions)}
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise TypeError(f"unknown chat option(s) {unknown}; known: {sorted(names)}")
    return base.replace(**kwargs)
