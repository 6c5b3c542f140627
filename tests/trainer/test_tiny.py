"""trainer.tiny builds a random chat model offline whose template TRL recognises (tool-call parsing)."""
from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import add_response_schema, get_training_chat_template


def test_it_builds_a_qwen2_5_style_chat_model_trl_can_train(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, local_files_only=True)
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == len(tokenizer)
    assert get_training_chat_template(tokenizer) is not None  # assistant-only loss works on it
    parsed = add_response_schema(tokenizer).parse_response(
        '<tool_call>\n{"name": "submit", "arguments": {"candidate": "best"}}\n</tool_call><|im_end|>', prefix="")
    assert parsed["tool_calls"][0]["function"] == {"name": "submit", "arguments": {"candidate": "best"}}
