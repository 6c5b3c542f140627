"""The planning count over a KernelBench-shaped folder: a small fixture of our own, written here (public
problems are never vendored), traced in the sandbox and planned as the policy's first turn does."""
from __future__ import annotations

from pathlib import Path

from benchmarks.builtin_policy import count_markdown, count_planned

HEADER = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
TAIL = "\n\ndef get_inputs():\n    return [torch.randn(8, 16)]\n\n\ndef get_init_inputs():\n    return []\n"
PROBLEMS = {
    ("level1", "1_Sum_over_dim0.py"): "    def forward(self, x):\n        return x.sum(dim=0)\n",
    ("level1", "2_Sort.py"): "    def forward(self, x):\n        return torch.sort(x, dim=-1).values\n",
    ("level2", "1_Linear_GroupNorm.py"): ("    def __init__(self):\n        super().__init__()\n"
                                          "        self.fc = nn.Linear(16, 16)\n        self.gn = nn.GroupNorm(4, 16)\n\n"
                                          "    def forward(self, x):\n        return torch.relu(self.gn(self.fc(x)))\n"),
}


def write_fixture(root: Path) -> None:
    for (level, name), body in PROBLEMS.items():
        folder = root / "KernelBench" / level
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(HEADER + body + TAIL)


def test_it_counts_planned_problems_per_level_and_names_the_op_that_stopped_the_others(tmp_path: Path) -> None:
    write_fixture(tmp_path)
    results = count_planned(tmp_path, [1, 2])
    planned = {r["problem"]: r["planned"] for r in results}
    assert planned == {"1_Sum_over_dim0": True, "2_Sort": False, "1_Linear_GroupNorm": True}
    refused = next(r for r in results if not r["planned"])
    assert refused["stopped_by"] == "operation aten.sort.default"
    table = count_markdown(results)
    assert "| 1 | 1 | 2 |" in table and "| 2 | 1 | 1 |" in table and "| 1 | 2_Sort | operation aten.sort.default |" in table
