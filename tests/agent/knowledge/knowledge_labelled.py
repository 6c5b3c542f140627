"""A labelled retrieval set for the knowledge base: stored entries about small KernelBench-style problems, and query
problems, each labelled by hand with the kind of work a performance engineer would look up lessons for (a GEMM
with a ReLU epilogue wants GEMM lessons; a conv followed by batch norm wants conv lessons). Each kind has at least
three entries, so precision@3 can reach 1 on every query."""
from __future__ import annotations


def problem(forward: str, init: str = "", inputs: str = "[torch.randn(B, N)]", sizes: str = "B = 256\nN = 1024") -> str:
    init_body = f"\n        super().__init__()\n        {init}" if init else "\n        super().__init__()"
    return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n{sizes}\n\n\n"
            f"class Model(nn.Module):\n    def __init__(self):{init_body}\n\n"
            f"    def forward(self, *xs):\n        x = xs[0]\n        return {forward}\n\n\n"
            f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n")


TWO = "[torch.randn(B, N), torch.randn(N, B)]"
BATCHED = "[torch.randn(8, B, N), torch.randn(8, N, B)]"
IMAGE = "[torch.randn(8, 16, 64, 64)]"
VOLUME = "[torch.randn(2, 8, 16, 32, 32)]"
SIGNAL = "[torch.randn(8, 16, 4096)]"
QKV = "[torch.randn(4, 8, 256, 64), torch.randn(4, 8, 256, 64), torch.randn(4, 8, 256, 64)]"

# (kind, title, problem source): the stored entries.
ENTRIES: list[tuple[str, str, str]] = [
    ("gemm", "square matmul, tiled shared-memory kernel", problem("torch.matmul(x, xs[1])", inputs=TWO)),
    ("gemm", "matmul + bias + relu epilogue", problem("torch.relu(x @ xs[1] + 1.0)", inputs=TWO)),
    ("gemm", "nn.Linear forward", problem("self.fc(x)", init="self.fc = nn.Linear(N, N)")),
    ("gemm", "batched matmul", problem("torch.bmm(x, xs[1])", inputs=BATCHED)),
    ("gemm", "linear + gelu", problem("F.gelu(self.fc(x))", init="self.fc = nn.Linear(N, 4 * N)")),
    ("gemm", "half-precision mm", problem("torch.mm(x, xs[1])", inputs="[torch.randn(B, N).half(), torch.randn(N, B).half()]")),
    ("conv", "conv2d 3x3", problem("self.conv(x)", init="self.conv = nn.Conv2d(16, 32, 3)", inputs=IMAGE)),
    ("conv", "conv2d + relu", problem("torch.relu(self.conv(x))", init="self.conv = nn.Conv2d(16, 16, 3, padding=1)", inputs=IMAGE)),
    ("conv", "conv1d", problem("self.conv(x)", init="self.conv = nn.Conv1d(16, 32, 5)", inputs=SIGNAL)),
    ("conv", "conv3d", problem("self.conv(x)", init="self.conv = nn.Conv3d(8, 8, 3)", inputs=VOLUME)),
    ("conv", "transposed conv2d", problem("self.up(x)", init="self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)", inputs=IMAGE)),
    ("norm", "row softmax, online", problem("torch.softmax(x, dim=1)")),
    ("norm", "log_softmax", problem("torch.log_softmax(x, dim=-1)")),
    ("norm", "layer norm", problem("self.ln(x)", init="self.ln = nn.LayerNorm(N)")),
    ("norm", "batch norm 2d", problem("self.bn(x)", init="self.bn = nn.BatchNorm2d(16)", inputs=IMAGE)),
    ("norm", "group norm", problem("self.gn(x)", init="self.gn = nn.GroupNorm(4, 16)", inputs=IMAGE)),
    ("elementwise", "swish x * sigmoid(x)", problem("x * torch.sigmoid(x)")),
    ("elementwise", "relu", problem("torch.relu(x)")),
    ("elementwise", "gelu", problem("F.gelu(x)")),
    ("elementwise", "silu + bias", problem("F.silu(x) + self.bias", init="self.bias = nn.Parameter(torch.randn(N))")),
    ("elementwise", "scaled tanh", problem("torch.tanh(x) * 0.5 + 0.5")),
    ("elementwise", "leaky relu", problem("F.leaky_relu(x, 0.01)")),
    ("reduce", "row sum", problem("torch.sum(x, dim=1)")),
    ("reduce", "mean over rows", problem("torch.mean(x, dim=0)")),
    ("reduce", "max along dim", problem("torch.amax(x, dim=1)")),
    ("reduce", "argmax", problem("torch.argmax(x, dim=1)")),
    ("pool", "max pool 2d", problem("self.pool(x)", init="self.pool = nn.MaxPool2d(2)", inputs=IMAGE)),
    ("pool", "average pool 2d", problem("self.pool(x)", init="self.pool = nn.AvgPool2d(3, stride=2)", inputs=IMAGE)),
    ("pool", "adaptive average pool", problem("self.pool(x)", init="self.pool = nn.AdaptiveAvgPool2d(1)", inputs=IMAGE)),
    ("attention", "q k^T softmax v", problem("torch.softmax(x @ xs[1].transpose(-2, -1) * 0.125, dim=-1) @ xs[2]", inputs=QKV)),
    ("attention", "scaled dot product attention", problem("F.scaled_dot_product_attention(x, xs[1], xs[2])", inputs=QKV)),
    ("attention", "bmm softmax bmm", problem("torch.bmm(torch.softmax(torch.bmm(x, xs[1]), dim=-1), x)", inputs=BATCHED)),
    ("scan", "cumsum", problem("torch.cumsum(x, dim=1)")),
    ("scan", "cumprod", problem("torch.cumprod(x, dim=1)")),
    ("scan", "reverse cumsum", problem("torch.cumsum(x.flip(1), dim=1).flip(1)")),
]

# (kind, query problem source): new problems, never in the pool.
QUERIES: list[tuple[str, str]] = [
    ("gemm", problem("torch.matmul(x, xs[1])", inputs="[torch.randn(4096, 4096), torch.randn(4096, 4096)]", sizes="")),
    ("gemm", problem("torch.relu(self.fc(x))", init="self.fc = nn.Linear(N, 256)")),
    ("gemm", problem("torch.bmm(x, xs[1])", inputs="[torch.randn(32, 64, 128), torch.randn(32, 128, 64)]")),
    ("gemm", problem("torch.matmul(x, xs[1])", inputs="[torch.randn(16384, 64), torch.randn(64, 16384)]")),
    ("gemm", problem("x @ xs[1].T", inputs="[torch.randn(B, N), torch.randn(B, N)]")),
    ("gemm", problem("torch.addmm(xs[2], x, xs[1])", inputs="[torch.randn(B, N), torch.randn(N, B), torch.randn(B)]")),
    ("conv", problem("self.bn(self.conv(x))", init="self.conv = nn.Conv2d(16, 32, 3); self.bn = nn.BatchNorm2d(32)", inputs=IMAGE)),
    ("conv", problem("self.conv(x)", init="self.conv = nn.Conv2d(16, 16, 3, groups=16)", inputs=IMAGE)),
    ("conv", problem("self.up(x)", init="self.up = nn.ConvTranspose3d(8, 4, 2)", inputs=VOLUME)),
    ("conv", problem("torch.relu(self.conv(x))", init="self.conv = nn.Conv1d(16, 16, 3)", inputs=SIGNAL)),
    ("norm", problem("torch.softmax(x, dim=-1)", inputs="[torch.randn(4096, 32768)]")),
    ("norm", problem("self.ln(x) * 2.0", init="self.ln = nn.LayerNorm(N)")),
    ("norm", problem("F.rms_norm(x, (N,))")),
    ("norm", problem("self.norm(x)", init="self.norm = nn.InstanceNorm2d(16)", inputs=IMAGE)),
    ("norm", problem("F.log_softmax(x, dim=1)")),
    ("elementwise", problem("F.hardswish(x)")),
    ("elementwise", problem("x * torch.sigmoid(x) * 1.5")),
    ("elementwise", problem("torch.clamp(x, 0.0, 6.0)")),
    ("elementwise", problem("F.elu(x)")),
    ("elementwise", problem("x * torch.tanh(F.softplus(x))")),
    ("reduce", problem("torch.sum(x, dim=0)", inputs="[torch.randn(8192, 512)]")),
    ("reduce", problem("torch.mean(x, dim=-1)")),
    ("reduce", problem("torch.max(x, dim=1)[0]")),
    ("reduce", problem("torch.argmin(x, dim=1)")),
    ("reduce", problem("F.mse_loss(x, xs[1])", inputs="[torch.randn(B, N), torch.randn(B, N)]")),
    ("pool", problem("self.pool(x)", init="self.pool = nn.MaxPool3d(2)", inputs=VOLUME)),
    ("pool", problem("self.pool(x)", init="self.pool = nn.AvgPool1d(4)", inputs=SIGNAL)),
    ("pool", problem("self.pool(x)", init="self.pool = nn.MaxPool2d(3, stride=2, padding=1)", inputs=IMAGE)),
    ("attention", problem("F.scaled_dot_product_attention(x, xs[1], xs[2], is_causal=True)", inputs=QKV)),
    ("attention", problem("torch.matmul(torch.softmax(torch.matmul(x, xs[1].transpose(-1, -2)), dim=-1), xs[2])", inputs=QKV)),
    ("scan", problem("torch.cumsum(x, dim=0)")),
    ("scan", problem("torch.cumprod(x, dim=-1)")),
]
