"""A problem and a candidate that build nothing (torch.relu, allow-listed), and a quick CPU configuration: for tests
of the engine's plumbing (memory plan, speed of light) that need a real evaluation but no compiler."""
from agent.engine.evaluate import EvalConfig
from agent.engine.sandbox import Limits


def relu_problem(rows: int, cols: int) -> str:
    return f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn({rows}, {cols})]

def get_init_inputs():
    return []
'''


CANDIDATE = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''
CONFIG = EvalConfig(device="cpu", compile_baseline=False, allowed_ops=("relu",), min_rounds=2, max_rounds=2,
                    batch_ms=5.0, limits=Limits(wall_seconds=60, memory_bytes=4 << 30))
