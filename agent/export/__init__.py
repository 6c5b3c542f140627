"""What leaves the studio: trajectories as a training dataset, accepted kernels as a module or a package.

dataset      runs as a Hugging Face `datasets` dataset in TRL's tool-calling format (DESIGN §8)
packaging    an accepted kernel as one importable .py or an installable package zip

Names below are imported on first use (agent/lazy.py).
"""
from agent.lazy import public_face

__getattr__, __dir__ = public_face(__name__, {
    "agent.export.dataset": "read_jsonl save to_dataset write_jsonl",
    "agent.export.packaging": "KernelFacts package_zip standalone_module zip_name",
})
