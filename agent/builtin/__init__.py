"""The built-in policy: no LLM, kernels from our own templates, searched over turns (DESIGN §7).

trace.py    a sandbox job: the problem's torch.fx graph with shapes (user code runs only there)
lower.py    the graph as a kernel plan: pointwise region, row operation, GEMM/convolution anchor
ops.py      pointwise operations as C expressions
codegen.py  candidate modules (C++ with SIMD on PyTorch's thread pool for the CPU, CUDA for GPUs) from a plan and a variant
policy.py   the Policy: analyse, propose variants turn by turn through the tools, submit the best
"""
