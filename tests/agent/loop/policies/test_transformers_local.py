"""TransformersPolicy on a tiny random Qwen2 checkpoint built offline (tiny_qwen.py): streaming, exact
token counts, Hermes tool-call parsing, clear errors, and the agent loop and CLI driven by it."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

# Set before transformers is imported (the Hub client reads it once): nothing here may reach the Hub.
# The policy loads with local_files_only as well, and so do the tests' own loads.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[agent]')")

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, ViTConfig

from agent.loop import runner as loop
from agent.cli import main as cli_main
from agent.engine.evaluate import Evaluator
from agent.loop.policies.base import PolicyError, ToolCall
from agent.loop.policies.transformers_local import (
    TransformersPolicy,
    parse_completion,
    parse_hermes,
    template_messages,
)
from agent.loop.tools import TOOL_SCHEMAS, Toolbox
from tests.agent.loop.conftest import CONFIG
from tests.agent.loop.policies import tiny_qwen
from tests.corpus.tiny_problem import TEMPLATE

PROBLEM = TEMPLATE.format(body="")
MAX_NEW_TOKENS = 12


def messages(text: str = "Write a fast ReLU kernel.") -> list[dict]:
    return [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": text}]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_qwen.build(tmp_path_factory.mktemp("tiny_qwen_local") / "model")


@pytest.fixture(scope="module")
def policy(tiny_model: Path) -> TransformersPolicy:
    return TransformersPolicy(tiny_model, temperature=1.0, max_new_tokens=MAX_NEW_TOKENS, seed=0)


# ---------------------------------------------------------------------------------- generation

def test_it_streams_the_raw_completion_in_chunks_and_counts_tokens_exactly(policy: TransformersPolicy,
                                                                           tiny_model: Path) -> None:
    chunks: list[str] = []
    turn = policy.respond(messages(), TOOL_SCHEMAS, on_text=chunks.append)
    completion = "".join(chunks)
    assert len(chunks) > 1
    # The stream is the completion as generated (tool-call markup included, the end-of-turn token not);
    # the turn is that completion parsed.
    assert parse_hermes(completion, "call_0") == (turn.text, turn.tool_calls)

    # The same seed and settings, generated directly: the same tokens, so the counts are exact.
    tokenizer = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, local_files_only=True, dtype=torch.float32)
    prompt_ids = tokenizer.apply_chat_template(template_messages(messages()), tools=TOOL_SCHEMAS,
                                               add_generation_prompt=True, return_tensors="pt")["input_ids"]
    torch.manual_seed(0)  # the policy's seed plus the turn's index, 0
    generated = model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), do_sample=True,
                               temperature=1.0, top_p=0.95, max_new_tokens=MAX_NEW_TOKENS,
                               pad_token_id=tokenizer.pad_token_id)[0, prompt_ids.shape[1]:].tolist()
    assert turn.prompt_tokens == prompt_ids.shape[1]
    assert turn.completion_tokens == len(generated)
    ended = generated[-1] == tokenizer.eos_token_id
    assert turn.finish_reason == (("tool_calls" if turn.tool_calls else "stop") if ended else "length")
    text_ids = generated[:-1] if ended else generated
    assert completion == tokenizer.decode(text_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_it_renders_a_tool_exchange_and_answers_with_a_well_formed_turn(policy: TransformersPolicy) -> None:
    history = messages() + [
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_0_0", "type": "function",
                         "function": {"name": "write_candidate", "arguments": '{"source": "import torch"}'}}]},
        {"role": "tool", "tool_call_id": "call_0_0", "content": "build ok"},
    ]
    turn = policy.respond(history, TOOL_SCHEMAS)
    assert turn.prompt_tokens and turn.completion_tokens and 0 < turn.completion_tokens <= MAX_NEW_TOKENS
    assert all(c.id.startswith("call_1_") for c in turn.tool_calls)  # ids name the turn: unique in the run
    assert policy.name == "transformers:model"


def test_it_passes_tool_call_arguments_to_the_template_as_objects() -> None:
    calls = [{"id": "a", "type": "function", "function": {"name": "submit", "arguments": '{"candidate": "best"}'}},
             {"id": "b", "type": "function", "function": {"name": "submit", "arguments": '{"candidate": "be'}}]
    original = [{"role": "assistant", "content": "", "tool_calls": calls}]
    rendered = template_messages(original)
    assert rendered[0]["tool_calls"][0]["function"]["arguments"] == {"candidate": "best"}
    assert rendered[0]["tool_calls"][1]["function"]["arguments"] == '{"candidate": "be'  # as the model wrote it
    assert original[0]["tool_calls"][0]["function"]["arguments"] == '{"candidate": "best"}'  # not mutated


# ---------------------------------------------------------------------------------- parsing

def test_it_parses_a_well_formed_call_and_the_text_before_it() -> None:
    text, calls = parse_hermes('Let me try a kernel.\n<tool_call>\n{"name": "write_candidate", "arguments": '
                               '{"source": "class ModelNew: ..."}}\n</tool_call>', "call_3")
    assert text == "Let me try a kernel."
    assert calls == [ToolCall(id="call_3_0", name="write_candidate", arguments='{"source": "class ModelNew: ..."}')]


def test_it_parses_several_calls_with_text_around_them() -> None:
    completion = ('First, measure.\n<tool_call>\n{"name": "benchmark", "arguments": {"candidate": "best"}}\n'
                  '</tool_call>\nThen profile.\n<tool_call>\n{"name": "profile", "arguments": {}}\n</tool_call>\n'
                  'Done.')
    text, calls = parse_hermes(completion)
    assert text == "First, measure.\nThen profile.\nDone."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_0", "benchmark", {"candidate": "best"}), ("call_1", "profile", {})]


def test_it_keeps_a_malformed_call_raw_with_the_name_it_could_read() -> None:
    body = '{"name": "write_candidate", "arguments": {"source": "class ModelNew(nn.Module):\n    pass}'
    text, calls = parse_hermes(f"Here.\n<tool_call>\n{body}\n</tool_call>")
    assert text == "Here."
    assert calls == [ToolCall(id="call_0", name="write_candidate", arguments=body)]


def test_it_keeps_calls_that_are_not_name_and_arguments_raw() -> None:
    _, calls = parse_hermes("<tool_call>[1, 2]</tool_call><tool_call></tool_call>")
    assert calls == [ToolCall(id="call_0", name="", arguments="[1, 2]"), ToolCall(id="call_1", name="", arguments="")]


def test_it_takes_a_call_cut_off_by_the_token_limit_to_the_end() -> None:
    _, calls = parse_hermes('Submitting.\n<tool_call>\n{"name": "submit", "arguments": {"candidate": "be')
    assert calls == [ToolCall(id="call_0", name="submit", arguments='{"name": "submit", "arguments": {"candidate": "be')]


def test_it_keeps_arguments_written_as_a_json_string() -> None:
    _, calls = parse_hermes('<tool_call>{"name": "submit", "arguments": "{\\"candidate\\": \\"best\\"}"}</tool_call>')
    assert calls[0].arguments == '{"candidate": "best"}'


def test_a_completion_without_calls_is_all_text() -> None:
    assert parse_hermes("  just thinking aloud\n") == ("just thinking aloud", [])


# A response template (transformers' declarative parser format) for a made-up tag, so that a parsed call
# proves the tokenizer's own parser ran: the Hermes parser knows only <tool_call>.
_CUSTOM_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {"open_pattern": r"\s*<call>", "close": "</call>", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close_pattern": r"\s*<\|im_end\|>", "content": "text"},
    },
}


def test_it_uses_the_checkpoints_own_response_parser_where_it_ships_one(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)
    tokenizer.response_template = _CUSTOM_TEMPLATE
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    text, calls = parse_completion(tokenizer, 'Measuring.\n<call>{"name": "benchmark", "arguments": {"candidate": '
                                   '"best"}}</call>', prompt, TOOL_SCHEMAS, "call_2")
    assert text == "Measuring."
    assert calls == [ToolCall(id="call_2_0", name="benchmark", arguments='{"candidate": "best"}')]


def test_it_falls_back_to_the_hermes_parser_for_a_call_the_response_parser_refuses(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)
    tokenizer.response_template = {**_CUSTOM_TEMPLATE, "fields": {
        **_CUSTOM_TEMPLATE["fields"],
        "tool_calls": {**_CUSTOM_TEMPLATE["fields"]["tool_calls"], "open_pattern": r"\s*<tool_call>",
                       "close": "</tool_call>"}}}
    broken = '{"name": "submit", "arguments": {"candidate": }'
    text, calls = parse_completion(tokenizer, f"<tool_call>{broken}</tool_call>", "", TOOL_SCHEMAS, "call_0")
    assert (text, calls) == ("", [ToolCall(id="call_0_0", name="submit", arguments=broken)])


# ---------------------------------------------------------------------------------- errors

def test_it_names_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as caught:
        TransformersPolicy(tmp_path / "no-such-model")
    assert str(tmp_path / "no-such-model") in str(caught.value) and "no model directory" in str(caught.value)


def test_it_refuses_a_directory_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no config.json"):
        TransformersPolicy(tmp_path)


def test_it_refuses_a_checkpoint_that_is_not_a_causal_lm(tiny_model: Path, tmp_path: Path) -> None:
    model_dir = Path(shutil.copytree(tiny_model, tmp_path / "vit"))
    ViTConfig().save_pretrained(model_dir)  # an image classifier's config over the tiny model's files
    with pytest.raises(PolicyError, match="not a causal language model"):
        TransformersPolicy(model_dir).respond(messages(), [])


def test_it_refuses_a_tokenizer_without_a_chat_template(tiny_model: Path, tmp_path: Path) -> None:
    model_dir = Path(shutil.copytree(tiny_model, tmp_path / "base"))
    (model_dir / "chat_template.jinja").unlink()
    with pytest.raises(PolicyError, match="no chat template"):
        TransformersPolicy(model_dir).respond(messages(), [])


def test_it_validates_its_settings(tiny_model: Path) -> None:
    with pytest.raises(ValueError, match="temperature"):
        TransformersPolicy(tiny_model, temperature=-1)


# ---------------------------------------------------------------------------------- the loop and the CLI

def test_a_loop_run_turns_the_models_gibberish_into_observations_and_stops_at_the_turn_budget(
        policy: TransformersPolicy, tmp_path: Path) -> None:
    evaluator = Evaluator(CONFIG, cache_root=tmp_path / "cache")  # its sandbox starts only if a tool evaluates
    try:
        toolbox = Toolbox(evaluator, CONFIG)
        state = loop.start(PROBLEM, toolbox)
        state = loop.run(state, policy, toolbox, loop.Budgets(max_turns=2))
    finally:
        evaluator.close()
    assert state.status == loop.STOPPED and "turn budget" in state.stop_reason
    assert state.turn == 2 and len(state.turns) == 2 and state.policy == "transformers:model"
    assert state.turns[1].prompt_tokens > state.turns[0].prompt_tokens > 0
    assert all(0 < t.completion_tokens <= MAX_NEW_TOKENS for t in state.turns)
    assistants = [i for i, m in enumerate(state.messages) if m["role"] == "assistant"]
    assert len(assistants) == 2
    for index in assistants:  # every turn got its observation: the nudge, or one answer per tool call
        message, following = state.messages[index], state.messages[index + 1]
        if message.get("tool_calls"):
            assert following["role"] == "tool" and following["tool_call_id"] == message["tool_calls"][0]["id"]
        else:
            assert following == {"role": "user", "content": loop.NO_TOOL_CALL}
    assert loop.AgentState.from_json(state.to_json()).turns == state.turns  # the stored turns survive a restart


def main(argv: list[str]) -> int:
    try:
        return cli_main(argv)
    except SystemExit as exc:
        return exc.code


def test_the_cli_runs_the_transformers_policy_and_appends_the_runs_record(tiny_model: Path, tmp_path: Path,
                                                                           capsys) -> None:
    problem, runs = tmp_path / "problem.py", tmp_path / "runs.jsonl"
    problem.write_text(PROBLEM)
    runs.write_text('{"an": "earlier run"}\n')
    code = main(["optimize", str(problem), "--policy", "transformers", "--model", str(tiny_model), "--max-turns", "1",
                 "--max-new-tokens", "8", "--seed", "1", "--json", "--no-compile-baseline",
                 "--cache-dir", str(tmp_path / "cache"), "--trajectory", str(runs)])
    outcome = json.loads(capsys.readouterr().out)
    assert code == 1 and outcome["policy"] == "transformers:model" and outcome["turns"] == 1
    assert outcome["status"] == "stopped" and outcome["verdict"] is None
    earlier, record = [json.loads(line) for line in runs.read_text().splitlines()]
    assert earlier == {"an": "earlier run"}
    assert record["policy"] == "transformers:model" and record["turns"] == 1 and record["turn_rewards"] == [0.0]
    assert record["completion_tokens"] == outcome["completion_tokens"] > 0


def test_the_cli_refuses_a_bad_model_path_with_status_2(tmp_path: Path, capsys) -> None:
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    assert main(["optimize", str(problem), "--policy", "transformers", "--model", str(tmp_path / "nope")]) == 2
    assert "no model directory" in capsys.readouterr().err
    assert main(["optimize", str(problem), "--policy", "transformers"]) == 2
    assert "--model" in capsys.readouterr().err
