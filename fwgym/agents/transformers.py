"""An fwgym agent backed by a local Hugging Face chat model (``transformers``), tools called with JSON in text.

Example::

    from fwgym.agents import run_episode
    from fwgym.agents.transformers import TransformersChatAgent
    from fwgym.envs.fwbench import FWBenchEnv

    agent = TransformersChatAgent("HuggingFaceTB/SmolLM2-1.7B-Instruct", device="auto", max_new_tokens=512)
    result = run_episode(FWBenchEnv("electricity", split="dev"), agent, seed=0)

The model is loaded on the first ``act`` (so building an agent is cheap) and shared by every agent of
the process with the same settings. ``gguf_file`` loads a GGUF file through transformers (dequantised
to ``dtype``); with ``plain_cache_dir`` a plain safetensors copy is saved once and reused, which loads
in about a second instead of the dequantisation's tens of seconds.

Each turn renders the chat with the tokenizer's chat template (``apply_chat_template``, generation
prompt on; a system message is folded into the first user message if the template refuses the system
role), generates at most ``max_new_tokens`` (greedy when ``temperature`` is 0 or ``None``), and
decodes the new tokens. A prompt that leaves fewer than ``min_new_tokens`` of the model's window ends
the episode with status ``context_exhausted`` (the model's failure); a model that cannot be loaded
raises :class:`fwgym.errors.HarnessError` (kind ``"load"``: the episode is not scored).

KV cache across turns (``reuse_cache=True``, the default): the key/value cache of the previous turn
(a ``transformers`` ``DynamicCache``) is kept with its token ids; the next turn's prompt is compared
token by token, the cache is cropped to the common prefix (``DynamicCache.crop``) and passed as
``past_key_values``, so only the new tokens (the tool result and the generation prompt) are encoded.
The cache is dropped at every episode start, so episodes stay independent; greedy outputs equal those
without the cache up to floating-point summation order.

Threads: agents of one process share the loaded model (loading is locked); each agent keeps its own
KV cache. ``seed`` reseeds torch's global generator, so sampled (temperature > 0) replies are
reproducible only with one agent per process; greedy decoding is unaffected.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from fwgym.agents.chat import ChatAgent, ContextExhausted, ModelReply
from fwgym.agents.chat.options import ChatOptions, as_options
from fwgym.errors import HarnessError

_MODELS: dict[tuple, tuple[Any, Any]] = {}
_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(ChatOptions)) | {"direct"}
_LOAD_LOCK = threading.Lock()


def _cache_kwarg() -> str:
    """The ``generate`` keyword of a KV cache: ``cache`` (transformers >= 5.x) or ``past_key_values``."""
    try:
        from transformers.generation.utils import ALL_CACHE_NAMES
    except ImportError:
        return "past_key_values"
    return "cache" if "cache" in ALL_CACHE_NAMES else "past_key_values"


def resolve_device(device: str | None) -> str:
    """``"auto"``/``None`` -> ``"cuda"`` if available, else ``"mps"`` if available, else ``"cpu"``; other values unchanged."""
    if device not in (None, "auto"):
        return str(device)
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def _dtype(name: str | None, device: str):
    import torch

    if name in (None, "default"):
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if name == "auto":
        return "auto"
    try:
        dt = getattr(torch, name)
    except AttributeError:
        raise ValueError(f"unknown dtype {name!r}; use float32, bfloat16, float16 or auto") from None
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}; use float32, bfloat16, float16 or auto")
    return dt


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def plain_copy_of_gguf(model_path: str, gguf_file: str, cache_dir: str | os.PathLike) -> Path:
    """Save (once) a plain safetensors copy of a GGUF model and return its directory.

    The copy lives in ``cache_dir/<gguf stem>-<sha256 prefix>/`` and is written atomically. Workaround
    for transformers refusing ``save_pretrained`` on GGUF-loaded models: the config is copied without
    ``quantization_config``, a fresh model of the same class gets the dequantised weights, and that is saved.

    Raises:
        OSError: the GGUF file cannot be read or the copy cannot be written.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = Path(model_path) / gguf_file
    target = Path(cache_dir) / f"{Path(gguf_file).stem}-{_file_digest(src)}"
    if (target / "config.json").exists():
        return target
    tok = AutoTokenizer.from_pretrained(model_path, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(model_path, gguf_file=gguf_file)
    cfg = copy.deepcopy(model.config)
    if hasattr(cfg, "quantization_config"):
        delattr(cfg, "quantization_config")
    plain = type(model)(cfg)
    plain.load_state_dict(model.state_dict())
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    plain.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(tmp)
    try:
        tmp.rename(target)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_chat_model(model_path: str, *, gguf_file: str | None = None, device: str = "cpu", dtype: str | None = None,
                    plain_cache_dir: str | os.PathLike | None = None, trust_remote_code: bool = False):
    """``(tokenizer, model)`` for a local directory or hub id, cached per process.

    Raises:
        HarnessError: (kind ``"load"``) the model or tokenizer cannot be loaded (message says why), or
            the tokenizer has no chat template.
    """
    key = (str(model_path), gguf_file, device, dtype, str(plain_cache_dir), trust_remote_code)
    with _LOAD_LOCK:
        if key in _MODELS:
            return _MODELS[key]
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path, extra = str(model_path), {}
        try:
            if gguf_file and plain_cache_dir:
                path = str(plain_copy_of_gguf(path, gguf_file, plain_cache_dir))
            elif gguf_file:
                extra["gguf_file"] = gguf_file
            tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **extra)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=_dtype(dtype, device),
                                                         trust_remote_code=trust_remote_code, **extra)
        except (OSError, ValueError, ImportError) as exc:
            raise HarnessError(f"could not load the chat model {model_path!r}"
                               + (f" (gguf_file {gguf_file!r})" if gguf_file else "") + f": {exc}"[:1500], "load") from None
        if not getattr(tok, "chat_template", None):
            raise HarnessError(f"the tokenizer of {model_path!r} has no chat template; use an instruct/chat model", "load")
        model.to(device)
        model.eval()
        _MODELS[key] = (tok, model)
        return tok, model


class TransformersChatAgent(ChatAgent):
    """Chat agent running a local ``transformers`` causal LM (tools via JSON in text).

    Args:
        model_path: a local model directory or a Hugging Face hub id (the HF cache is used; set
            ``HF_HUB_OFFLINE=1`` to stay offline).
        gguf_file: name of a GGUF file inside ``model_path`` to load instead of safetensors weights.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or ``"auto"``.
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"``, ``"auto"``; default float32 on CPU, bfloat16 on CUDA.
        max_new_tokens: generation length limit per turn.
        temperature: 0 or ``None`` = greedy decoding; > 0 samples.
        top_p: nucleus sampling mass (sampling only).
        seed: ``torch.manual_seed(seed)`` at the start of each episode (sampling reproducibility).
        max_context: context window in tokens (default: the model config's ``max_position_embeddings``).
        min_new_tokens: a prompt leaving fewer free tokens than this ends the episode (``context_exhausted``).
        plain_cache_dir: folder for a plain copy of a GGUF model (faster reloads); ``None``: no copy.
        trust_remote_code: passed to ``from_pretrained``.
        generation_kwargs: extra ``GenerationConfig`` fields, e.g. ``{"repetition_penalty": 1.1}``.
        constrain: (a chat option) ``"json-schema"`` or ``"grammar"``: every reply is generated under the episode's
            reply schema or GBNF grammar (:mod:`fwgym.agents.transformers_constrain`, llguidance: ``pip install
            'fwgym[constrain]'``); the policy name gets ``+<mode>`` (``transformers:<model>+grammar``), as the
            openai kind's.
        reuse_cache: keep the KV cache across the turns of an episode (see the module docstring).
        name: policy name (default ``"transformers:<model folder or id>"``).
        **chat_kwargs: :class:`~fwgym.agents.chat.ChatAgent` arguments (``trace_out``, ``max_turns``,
            ``episode_timeout``, ...) and chat options (``options=`` or single ones: ``history_hours``,
            ``compact_results``, ``constrain``, ...; tools are always called with JSON in text).

    Raises:
        ValueError: bad ``max_new_tokens``/``min_new_tokens``/``temperature``.
        ImportError: ``constrain`` without llguidance installed.
        HarnessError: (on first ``act``) the model cannot be loaded.
    """

    backend = "transformers"

    def __init__(self, model_path: str, *, gguf_file: str | None = None, device: str = "cpu", dtype: str | None = None,
                 max_new_tokens: int = 512, temperature: float | None = None, top_p: float | None = None,
                 seed: int | None = None, max_context: int | None = None, min_new_tokens: int = 16,
                 plain_cache_dir: str | os.PathLike | None = None, trust_remote_code: bool = False,
                 generation_kwargs: dict | None = None, reuse_cache: bool = True, name: str | None = None,
                 **chat_kwargs: Any):
        if not model_path:
            raise ValueError("model_path must name a local model folder or a hub id")
        if max_new_tokens < 1 or min_new_tokens < 1:
            raise ValueError("max_new_tokens and min_new_tokens must be >= 1")
        if temperature is not None and temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        options = as_options(chat_kwargs.pop("options", None), **{k: chat_kwargs.pop(k) for k in list(chat_kwargs)
                                                                   if k in _OPTION_NAMES})
        options = options.replace(native_tools=False, text_tool_calls=True)  # no native tool calling here
        label = Path(str(model_path).rstrip("/")).name if os.path.isdir(str(model_path)) else str(model_path)
        if gguf_file:
            label = Path(gguf_file).stem
        super().__init__(name or f"transformers:{label}" + (f"+{options.constrain}" if options.constrain else ""),
                         options=options, **chat_kwargs)
        if options.constrain:
            from fwgym.agents.transformers_constrain import llguidance_version

            llguidance_version()  # refused now, not at the first turn, when the engine is missing
        self.model_path, self.gguf_file = str(model_path), gguf_file
        self.device, self.dtype = device, dtype
        self.max_new_tokens, self.min_new_tokens = int(max_new_tokens), int(min_new_tokens)
        self.temperature, self.top_p, self.seed = temperature, top_p, seed
        self.max_context = max_context
        self.plain_cache_dir = str(plain_cache_dir) if plain_cache_dir is not None else None
        self.trust_remote_code = trust_remote_code
        self.generation_kwargs = dict(generation_kwargs or {})
        self.reuse_cache = bool(reuse_cache)
        self._tok = self._model = None
        self._lltok: Any = None  # constrain: llguidance's tokenizer
        self._grammar: str | None = None  # constrain: the episode's compiled grammar
        self._kv = None  # (token ids (list of int) the cache holds keys for + the last generated one, DynamicCache)
        self._system_ok: bool | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tok"] = state["_model"] = state["_kv"] = None  # reloaded (from the process cache) on first use
        state["_lltok"] = state["_grammar"] = None
        return state

    def describe(self) -> dict:
        """Settings recorded in traces."""
        return {"model_path": self.model_path, "gguf_file": self.gguf_file, "device": self.device, "dtype": self.dtype,
                "max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "seed": self.seed, "max_context": self.context_window if self._model is not None else self.max_context,
                "generation_kwargs": self.generation_kwargs or None, "reuse_cache": self.reuse_cache,
                **self.options.to_json()}

    def load(self) -> None:
        """Load the tokenizer and model now (otherwise done on the first turn).

        Raises:
            HarnessError: the model cannot be loaded.
        """
        if self._model is None:
            self._tok, self._model = load_chat_model(self.model_path, gguf_file=self.gguf_file,
                                                     device=resolve_device(self.device), dtype=self.dtype,
                                                     plain_cache_dir=self.plain_cache_dir,
                                                     trust_remote_code=self.trust_remote_code)

    def preflight(self) -> dict:
        """Load the model and generate the same short reply twice (facts for the run manifest).

        Returns:
            ``{"model_path", "gguf_file", "device", "dtype", "context_window", "seed", "seed_honoured"
            (the two replies are equal), "transformers", "torch", "max_tokens" (``max_new_tokens``), "answer_tokens"
            (``{"decision": n, "forecast": n}``: a typical final answer in the model's tokenizer,
            :func:`fwgym.agents.chat.constrain.answer_lengths`), "answer_tokens_how"}``.

        Raises:
            HarnessError: the model cannot be loaded.
        """
        import torch
        import transformers

        self.load()
        msgs = [{"role": "user", "content": "Say OK."}]
        saved = self.max_new_tokens, self._kv
        self.max_new_tokens = 8
        try:
            texts = []
            for _ in range(2):
                if self.seed is not None:
                    torch.manual_seed(int(self.seed))
                self._kv = None
                texts.append(self.complete(msgs, None).content or "")
        finally:
            self.max_new_tokens, self._kv = saved
        from fwgym.agents.chat.constrain import answer_lengths

        tok: Any = self._tok
        answer = answer_lengths(lambda text: len(tok(text, add_special_tokens=False)["input_ids"]),
                                direct=self.options.direct_prompt)
        return {"model_path": self.model_path, "gguf_file": self.gguf_file, "device": str(self._model.device),
                "dtype": str(self._model.dtype), "context_window": self.context_window, "seed": self.seed,
                "seed_honoured": texts[0] == texts[1], "replies": [t[:80] for t in texts],
                "transformers": transformers.__version__, "torch": torch.__version__,
                "max_tokens": self.max_new_tokens, "answer_tokens": answer, "answer_tokens_how": "the model's tokenizer"}

    @property
    def context_window(self) -> int:
        """Tokens the model can attend to (explicit ``max_context`` or the config's)."""
        if self.max_context:
            return int(self.max_context)
        cfg = self._model.config
        for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            v = getattr(cfg, attr, None)
            if isinstance(v, int) and v > 0:
                return v
        return 2048

    def reset(self, info: Mapping | None = None) -> None:
        """Start a new episode (see :meth:`ChatAgent.reset <fwgym.agents.chat.agent.ChatAgent.reset>`);
        reseeds torch with ``seed`` when it is set and drops the KV cache of the previous episode."""
        super().reset(info)
        self._kv = self._grammar = None
        if self.seed is not None:
            import torch

            torch.manual_seed(int(self.seed))

    def render(self, messages: list[dict]):
        """Token ids (``BatchEncoding`` with ``input_ids`` of shape (1, n)) of the chat with a generation prompt."""
        self.load()
        msgs = [{"role": m["role"] if m["role"] in ("system", "user", "assistant") else "user",
                 "content": m.get("content") or ""} for m in messages]
        if self._system_ok is not False:
            try:
                enc = self._tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True)
                self._system_ok = True
                return enc
            except Exception:  # noqa: BLE001 - templates raise jinja errors for a system role they do not support
                if self._system_ok or not msgs or msgs[0]["role"] != "system":
                    raise
                self._system_ok = False
        if msgs and msgs[0]["role"] == "system":
            sys_text, rest = msgs[0]["content"], msgs[1:]
            if rest and rest[0]["role"] == "user":
                rest = [{"role": "user", "content": sys_text + "\n\n" + rest[0]["content"]}] + rest[1:]
            else:
                rest = [{"role": "user", "content": sys_text}] + rest
            msgs = rest
        return self._tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True)

    def complete(self, messages: list[dict], tools: list[dict] | None) -> ModelReply:
        """Generate one reply (``tools`` is ignored: tools are described in the system message)."""
        import torch
        from transformers import GenerationConfig

        t0 = time.perf_counter()
        enc = self.render(messages)
        n = int(enc["input_ids"].shape[1])
        window = self.context_window
        room = window - n
        if room < self.min_new_tokens:
            raise ContextExhausted(f"the prompt has {n} tokens; the model's window is {window} tokens "
                                   f"(at least {self.min_new_tokens} are needed for the reply)")
        new = min(self.max_new_tokens, room)
        sample = bool(self.temperature)
        eos = self._model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self._tok.eos_token_id is not None:
            eos_ids.add(self._tok.eos_token_id)
        pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else next(iter(eos_ids), 0)
        gen = GenerationConfig(max_new_tokens=new, do_sample=sample, eos_token_id=sorted(eos_ids) or None, pad_token_id=pad,
                               **({"temperature": float(self.temperature), "top_p": self.top_p or 1.0, "top_k": 0}
                                  if sample else {}), **self.generation_kwargs)
        device = self._model.device
        inputs = {k: v.to(device) for k, v in enc.items() if hasattr(v, "to")}
        guide = self._guide(n, sorted(eos_ids))
        if guide is not None:
            from transformers import LogitsProcessorList

            inputs["logits_processor"] = LogitsProcessorList([guide])
        reused = 0
        if self.reuse_cache:
            from transformers import DynamicCache

            ids = enc["input_ids"][0].tolist()
            cache = None
            if self._kv is not None:
                prev, cache = self._kv
                common = 0
                for a, b in zip(prev, ids):
                    if a != b:
                        break
                    common += 1
                reused = min(common, n - 1, cache.get_seq_length())  # at least one new token to encode
                if reused > 0 and getattr(cache, "is_croppable", True):
                    cache.crop(reused - cache.get_seq_length())  # a negative count: tokens removed from the end
                else:
                    reused, cache = 0, None
            if cache is None:
                cache = DynamicCache(config=self._model.config)
            inputs[_cache_kwarg()] = cache
        with torch.no_grad():
            out = self._model.generate(**inputs, generation_config=gen)
        new_ids = out[0, n:]
        if self.reuse_cache:
            self._kv = (out[0].tolist(), inputs[_cache_kwarg()])
        text = self._tok.decode(new_ids, skip_special_tokens=True)
        finish = "length" if len(new_ids) >= new and (not eos_ids or int(new_ids[-1]) not in eos_ids) else "stop"
        meta = {"latency_s": round(time.perf_counter() - t0, 3), "requests": 1, "cached_prompt_tokens": reused,
                "usage": {"prompt_tokens": n, "completion_tokens": int(len(new_ids))}}
        if guide is not None:
            meta["constrained_steps"] = guide.masked_steps
        return ModelReply(content=text, finish_reason=finish, meta=meta)

    def _guide(self, prompt_tokens: int, eos_ids: list[int]):
        """The turn's :class:`~fwgym.agents.transformers_constrain.GrammarLogitsProcessor` when the session's replies
        are constrained (``constrain``), else ``None``; the llguidance tokenizer is built once per agent and the
        grammar once per episode (:meth:`reset` drops it)."""
        constraint = self.session.constraint() if self.session is not None else None
        if constraint is None:
            return None
        from fwgym.agents.transformers_constrain import GrammarLogitsProcessor, compile_constraint, constraint_tokenizer

        if self._lltok is None:
            width = self._model.get_output_embeddings().weight.shape[0]
            self._lltok = constraint_tokenizer(self._tok, width, eos_ids)
        if self._grammar is None:  # dropped at every episode start (reset)
            self._grammar = compile_constraint(constraint[0], constraint[1], self._lltok)
        return GrammarLogitsProcessor(self._lltok, self._grammar, prompt_tokens)


__all__ = ["TransformersChatAgent", "load_chat_model", "plain_copy_of_gguf", "resolve_device"]
