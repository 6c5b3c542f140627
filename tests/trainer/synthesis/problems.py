"""Crafted problem sources for the filter tests: each one fails exactly one check."""

HEADER = "import os\nimport time\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def problem(forward_body: str, inputs: str = "torch.randn(256, 512)", init: str = "") -> str:
    body = "\n".join(f"        {line}" for line in forward_body.strip().splitlines())
    init_lines = "\n".join(f"        {line}" for line in init.strip().splitlines()) if init else ""
    return (HEADER + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + (init_lines + "\n" if init_lines else "")
            + f"\n    def forward(self, x):\n{body}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\n"
            "def get_init_inputs():\n    return []\n")


GOOD = problem("return torch.softmax(F.gelu(x) * 2.0, dim=-1)")
# Differs between runs only by noise far below the tolerance (as a CPU math library's code paths may).
ROUNDING_NOISE = problem("return torch.tanh(x) * 3.0 + 1e-7 * torch.rand_like(x)")
NONDETERMINISTIC = problem("return F.dropout(torch.relu(x), p=0.5, training=True)")
CONSTANT = problem("return torch.relu(x) - torch.relu(x)")
IGNORES_INPUT = problem("return self.w * 1.0 + 0.0 * x.sum()", init="self.w = nn.Parameter(torch.randn(256, 512))")
NON_FINITE = problem("return torch.log(x)")  # log of the negative half of randn: NaN
ALIASED = problem("return x.transpose(0, 1)")
EAGER_ERROR = problem("return x @ x")  # (256, 512) @ (256, 512): shapes do not match
TOO_SLOW = problem("time.sleep(0.2)\nreturn torch.relu(x)")
# torch.compiler.is_compiling() is True only while Dynamo traces: the compiled module does something else.
COMPILE_MISMATCH = problem("if torch.compiler.is_compiling():\n    return torch.relu(x) + 1.0\nreturn torch.relu(x)")
COMPILE_ERROR = problem("if torch.compiler.is_compiling():\n    return x.reshape(3, -1)\nreturn torch.relu(x)")
HANGS = problem("while True:\n    pass")
CRASHES = problem("os._exit(3)")
