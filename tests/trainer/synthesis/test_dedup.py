"""Near-duplicates are found by op signature and by token similarity; new problems pass."""
import json

import pytest

from trainer.synthesis.dedup import DuplicateIndex, fingerprint, load_existing

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
FOOTER = "\n\ndef get_inputs():\n    return [torch.randn(64, 128)]\n\n\ndef get_init_inputs():\n    return []\n"

LINEAR_GELU = HEADER + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(128, 256)

    def forward(self, x):
        return F.gelu(self.fc(x))
''' + FOOTER

# The same computation written another way: a module for the activation, other names, other sizes.
LINEAR_GELU_AGAIN = HEADER + '''class Model(nn.Module):
    """Projection then GELU."""
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(512, 64)
        self.act = nn.GELU()

    def forward(self, inp):
        h = self.proj(inp)
        return self.act(h)
''' + FOOTER

SOFTMAX_SCALE = HEADER + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = torch.softmax(x, dim=-1)
        x = x * 0.5
        x = torch.clamp(x, -1.0, 1.0)
        x = torch.tanh(x)
        return x
''' + FOOTER


def test_it_reads_the_ops_in_evaluation_order_with_normalized_names():
    assert fingerprint("a", LINEAR_GELU).signature == ("linear", "gelu")
    assert fingerprint("b", LINEAR_GELU_AGAIN).signature == ("linear", "gelu")
    assert fingerprint("c", SOFTMAX_SCALE).signature == ("softmax", "mul_scalar", "clamp", "tanh")


def test_it_rejects_the_same_ops_written_differently():
    index = DuplicateIndex(threshold=0.97)
    index.add("examples/linear_gelu.py", LINEAR_GELU)
    why = index.match(LINEAR_GELU_AGAIN)
    assert why is not None and "the same ops (linear > gelu)" in why and "examples/linear_gelu.py" in why


def test_it_rejects_a_copy_with_renamed_variables_and_one_constant_changed_by_similarity():
    renamed = SOFTMAX_SCALE.replace("x", "h").replace("0.5", "0.25").replace("torch.tanh(h)", "torch.sigmoid(h)")
    index = DuplicateIndex(threshold=0.9)
    index.add("softmax_scale", SOFTMAX_SCALE)
    assert fingerprint("", renamed).signature != fingerprint("", SOFTMAX_SCALE).signature
    why = index.match(renamed)
    assert why is not None and "similar to softmax_scale" in why


def test_it_lets_a_different_problem_through():
    index = DuplicateIndex(threshold=0.97)
    index.add("linear_gelu", LINEAR_GELU)
    index.add("softmax_scale", SOFTMAX_SCALE)
    other = SOFTMAX_SCALE.replace("torch.softmax(x, dim=-1)", "torch.cumsum(x, dim=-1)").replace(
        "x = torch.tanh(x)", "x = F.layer_norm(x, (128,))\n        x = torch.amax(x, dim=-1)")
    assert index.match(other) is None


def test_it_loads_existing_problems_from_folders_files_and_jsonl(tmp_path):
    (tmp_path / "a.py").write_text(LINEAR_GELU)
    (tmp_path / "notes.txt").write_text("not a problem")
    lines = tmp_path / "kept.jsonl"
    lines.write_text(json.dumps({"name": "s1", "source": SOFTMAX_SCALE}) + "\n\n")
    found = load_existing([tmp_path, lines])
    assert [name for name, _ in found] == [str(tmp_path / "a.py"), "s1"]


def test_it_says_which_existing_path_it_cannot_read(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1 is not a JSON object with a \"source\" field"):
        load_existing([bad])
    with pytest.raises(ValueError, match="is not a folder, a .py problem file or a .jsonl file"):
        load_existing([tmp_path / "missing.txt"])
