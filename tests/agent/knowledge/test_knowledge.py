import json
from pathlib import Path

from agent.knowledge.lessons import MAX_ENTRIES_PER_RUN, distill
from agent.knowledge.ranking import NO_ENTRIES, format_entries, rank, scored, text_scores
from agent.knowledge.signature import Signature, problem_signature
from tests.agent.knowledge.knowledge_runs import Call, Turn, finished_run, summary, write

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()


SOFTMAX = corpus("problems/softmax_rows.py")
FAST_CUDA = corpus("candidates/legit_cuda_softmax_rows.py")
OPENMP = corpus("candidates/legit_cpp_softmax_rows.py")
NAIVE_CUDA = '''import torch
from torch.utils.cpp_extension import load_inline

CUDA = "__global__ void softmax_naive(const float* x, float* y, int cols) { /* one thread per row */ }"
_ext = load_inline(name="naive", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=CUDA, functions=["run"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.run(x)
'''
BROKEN_CUDA = NAIVE_CUDA.replace("{ /* one thread per row */ }", "{ int i = 0 }")
WRONG_CUDA = NAIVE_CUDA.replace("one thread per row", "no max shift")

KERNELBENCH_CONV = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
in_channels = 3
out_channels = 64
height = width = 256
kernel_size = 3


class Model(nn.Module):
    """Conv2d, then GELU, then a channel softmax."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = self._activate(x)
        return torch.softmax(x, dim=1)

    def _activate(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width * 2)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''

KERNELBENCH_HALF_MATMUL = '''
import torch
import torch.nn as nn

M = 1024 * 2
K = 4096
N = M // 4
DTYPE = torch.float16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B, scale):
        return (A @ B).sum(dim=0) * scale


def get_inputs():
    A = torch.randn(M, K, dtype=DTYPE)
    B = torch.rand((K, N)).half()
    idx = torch.randint(0, 10, (M,))
    return [A, B, 2.0, idx, torch.randn(unknown_size, 4), torch.tensor([1.0])]


def get_init_inputs():
    return []
'''


# ---------------------------------------------------------------------------------- signatures

def test_it_reads_ops_shapes_and_dtypes_of_corpus_problems():
    assert problem_signature(corpus("problems/linear_relu.py")) == Signature(["linear", "relu"], [[512, 512]], ["float32"])
    assert problem_signature(corpus("problems/elementwise_silu_bias.py")).ops == ["add", "mul", "sigmoid"]
    assert problem_signature(corpus("problems/sum_rows_gpu.py")).shapes == [[16384, 8192]]


def test_it_resolves_module_constants_layers_and_helper_methods():
    signature = problem_signature(KERNELBENCH_CONV)
    # nn.Conv2d built in __init__, F.gelu in a helper forward calls, torch.softmax in forward.
    assert signature.ops == ["conv2d", "gelu", "softmax"]
    assert signature.shapes == [[16, 3, 256, 512]]
    assert signature.dtypes == ["float32"]


def test_it_reads_dtypes_locals_operators_and_leaves_unknowns_as_none():
    signature = problem_signature(KERNELBENCH_HALF_MATMUL)
    assert signature.ops == ["matmul", "mul", "sum"]
    # The float 2.0 is an argument, not a tensor; randint defaults to int64; .half() casts.
    assert signature.shapes == [[2048, 4096], [4096, 512], [2048], [None, 4], None]
    assert signature.dtypes == ["float16", "float16", "int64", "float32", None]


def test_a_name_bound_again_by_unpacking_takes_its_last_value_as_python_does():
    # KernelBench's level2/11 binds height = width = 2048, then `height, width = 32, 32`: read from the first binding
    # its input was 512 GiB, and the upload refused it as too big. Unpacking what cannot be read leaves it unknown.
    source = (KERNELBENCH_CONV.replace("def get_inputs", "HEIGHT = WIDTH = 2048\nHEIGHT, WIDTH = 32, 64\n"
                                       "DEPTH, = unknown()\n\ndef get_inputs")
              .replace("torch.randn(batch_size, in_channels, height, width * 2)",
                       "torch.randn(batch_size, DEPTH, HEIGHT, WIDTH)"))
    assert "torch.randn(batch_size, DEPTH, HEIGHT, WIDTH)" in source
    assert problem_signature(source).shapes == [[16, None, 32, 64]]


def test_it_returns_an_empty_signature_for_garbage():
    empty = Signature()
    for source in ["", "def broken(:\n", "\0\1\2", "x = 1", "(" * 500 + ")" * 500, "x = " + "-" * 100_000 + "1",
                   "A = A + 1\nB = 2 ** 10 ** 9\nclass Model:\n    pass\n"]:
        assert problem_signature(source) == empty, source[:30]


def test_it_gives_up_on_sizes_it_cannot_compute_safely():
    source = "import torch\nA = A + 1\nB = 2 ** 10 ** 9\nC = 1 // 0\n\ndef get_inputs():\n    return [torch.randn(A, B, C, 8)]\n"
    assert problem_signature(source).shapes == [[None, None, None, 8]]


def test_it_never_runs_the_problem(tmp_path):
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\n" + corpus("problems/sum_rows.py")
    assert problem_signature(source).ops == ["sum"]
    assert not marker.exists()


def test_a_signature_survives_json_and_drops_malformed_parts():
    signature = problem_signature(KERNELBENCH_HALF_MATMUL)
    assert Signature.from_dict(json.loads(json.dumps(signature.to_dict()))) == signature
    assert Signature.from_dict({"ops": ["relu", 3], "shapes": [[2, "x"], "y"], "dtypes": [1]}) == \
        Signature(["relu"], [[2, None], None], [None])
    assert Signature.from_dict("nonsense") == Signature()


# ---------------------------------------------------------------------------------- distilling

PROFILE = {"tool": "torch.profiler", "total_us": 120.0, "note": "GPU time per kernel",
           "kernels": [{"name": "softmax_rows_kernel", "calls": 5, "total_us": 100.0, "avg_us": 20.0, "pct": 83.3}]}


def softmax_run():
    remeasured = summary("accepted", 3.0, 1.3)
    return finished_run(SOFTMAX, device="cuda", turns=[
        Turn("A plain kernel first: one thread per row.", [write(NAIVE_CUDA, summary("accepted", 0.8, 0.5))]),
        Turn("Online softmax, one block per row, warp shuffles and float4 loads.",
             [write(FAST_CUDA, summary("accepted", 3.1, 1.4))]),
        Turn("Where does the time go?", [Call("profile", {"candidate": "best"},
                                              "profile of the best candidate\nstatus: accepted\n"
                                              "profile (torch.profiler, GPU time):\n  softmax_rows_kernel: calls 5",
                                              remeasured)]),
        Turn("Unroll the row loop.", [write(BROKEN_CUDA, summary("build_error", message="error: expected a ';'\nline 4"))]),
        # A refused call records no verdict: the next evaluation must still get its own.
        Turn("Skip the max shift.", [Call("write_candidate", {"source": "print(1)"}, "error: the source defines no class ModelNew"),
                                     write(WRONG_CUDA, summary("incorrect", message="trial 2 (scaled_large): 4096 out of tolerance"))]),
        Turn("Done.", [Call("submit", {"candidate": "best"}, "submitted the best accepted candidate")]),
    ], best={"turn": 2, "source": FAST_CUDA, "summary": remeasured, "verdict": {"profile": PROFILE}})


def test_it_distills_accepted_candidates_fastest_first_then_one_per_failure_class():
    entries = distill(softmax_run())
    assert [e["status"] for e in entries] == ["accepted", "slower_than_pytorch", "build_error", "incorrect"]
    assert [e["turn"] for e in entries] == [2, 0, 3, 4]
    fast = entries[0]
    # The newest figures of a re-measured candidate stand, as in the loop.
    assert (fast["speedup_vs_eager"], fast["speedup_vs_compile"]) == (3.0, 1.3)
    assert fast["backend"] == "cuda" and fast["device"] == "cuda"
    assert fast["signature"] == problem_signature(SOFTMAX).to_dict()
    json.dumps(entries)


def test_an_accepted_entry_says_what_was_tried_and_what_it_did():
    fast = distill(softmax_run())[0]
    assert "3.00x vs eager, 1.30x vs torch.compile" in fast["title"] and "softmax" in fast["title"]
    for fact in ("softmax_rows_kernel", "shared memory", "warp shuffles", "float4 vector loads",
                 "Online softmax, one block per row", "Profile: top kernels (torch.profiler): softmax_rows_kernel"):
        assert fact in fast["body"], fact
    assert fast["profile"]["kernels"][0]["pct"] == 83.3


def test_a_correct_kernel_slower_than_pytorch_is_a_lesson_never_an_accepted_entry():
    slow = distill(softmax_run())[1]
    assert slow["status"] == "slower_than_pytorch" and "accepted" not in slow["title"]
    assert "not kept: correct but 0.50x the faster PyTorch baseline (torch.compile)" in slow["body"]
    # With a margin below its speedup the same candidate is a success.
    assert [e["status"] for e in distill(softmax_run(), min_speedup=0.4)][:2] == ["accepted", "accepted"]


def test_a_failure_entry_keeps_the_error_message():
    entries = distill(softmax_run())
    build, wrong = entries[2], entries[3]
    assert "error: expected a ';'" in build["title"] and "expected a ';'" in build["body"]
    assert "4096 out of tolerance" in wrong["body"] and "Skip the max shift" in wrong["body"]
    assert build["speedup_vs_eager"] is None and build["profile"] is None


def test_it_keeps_a_few_entries_of_a_long_run_with_the_best_first():
    turns = [Turn(f"variant {i}", [write(NAIVE_CUDA + f"# v{i}\n", summary("accepted", 2.0 + i))]) for i in range(8)]
    turns += [Turn("broken", [write(BROKEN_CUDA, summary("build_error"))]),
              Turn("hangs", [write(WRONG_CUDA, summary("timeout"))])]
    entries = distill(finished_run(SOFTMAX, turns))
    assert len(entries) == MAX_ENTRIES_PER_RUN
    assert [e["speedup_vs_eager"] for e in entries[:3]] == [9.0, 8.0, 7.0]
    assert [e["status"] for e in entries[3:]] == ["build_error", "timeout"]


def test_a_capacity_verdict_teaches_nothing_about_kernels():
    turns = [Turn("a plain kernel", [write(NAIVE_CUDA, summary("capacity", message="the problem does not fit the device"))])]
    assert distill(finished_run(SOFTMAX, turns)) == []


def test_a_run_that_evaluated_nothing_teaches_nothing():
    assert distill(finished_run(SOFTMAX, [Turn("thinking", [])])) == []


# ---------------------------------------------------------------------------------- ranking

def entry(title: str, problem: str, device: str = "cpu", body: str = "", status: str = "accepted",
          eager: float | None = 1.5) -> dict:
    return {"title": title, "body": body, "status": status, "speedup_vs_eager": eager, "speedup_vs_compile": None,
            "backend": "cpp", "device": device, "signature": problem_signature(corpus(problem)).to_dict(),
            "profile": None, "turn": 0}


KB = [entry("linear", "problems/linear_relu.py"), entry("softmax", "problems/softmax_rows.py"),
      entry("row sum", "problems/sum_rows.py"), entry("silu", "problems/elementwise_silu_bias.py")]


def test_ranking_prefers_the_similar_problem():
    # Same ops at other sizes: the entry of the like problem comes first.
    assert rank(KB, problem_signature(corpus("problems/softmax_rows_gpu.py")), limit=1)[0]["title"] == "softmax"
    assert rank(KB, problem_signature(corpus("problems/linear_relu_gpu.py")), limit=1)[0]["title"] == "linear"
    ranked = scored(KB, problem_signature(corpus("problems/sum_rows_gpu.py")))
    assert ranked[0].entry["title"] == "row sum" and ranked[0].score > 2 * ranked[1].score


def test_ranking_prefers_the_entry_matching_the_query():
    openmp = entry("softmax with threads", "problems/softmax_rows.py", body="OpenMP threads over rows", eager=4.0)
    shuffles = entry("softmax online", "problems/softmax_rows.py", body="online softmax with a warp shuffle reduction",
                     eager=2.0)
    signature = problem_signature(SOFTMAX)
    # Without a query the faster one leads; the query turns it round (and "shuffles" finds "shuffle").
    assert rank([openmp, shuffles], signature)[0] is openmp
    assert rank([openmp, shuffles], signature, "warp shuffles")[0] is shuffles
    assert rank([openmp, shuffles], signature, "openmp")[0] is openmp


def test_ranking_prefers_the_same_device_and_honours_limits():
    on_cpu, on_gpu = entry("cpu one", "problems/softmax_rows.py"), entry("gpu one", "problems/softmax_rows.py", "cuda")
    signature = problem_signature(SOFTMAX)
    assert rank([on_cpu, on_gpu], signature, device="cuda")[0] is on_gpu
    assert rank([on_cpu, on_gpu], signature, device="cpu")[0] is on_cpu
    assert rank(KB, signature, limit=2) == rank(KB, signature, limit=10)[:2]
    assert rank(KB, signature, min_score=0.5) == [KB[1]]
    assert rank([], signature, "anything") == []


def test_text_similarity_works_on_a_one_entry_knowledge_base():
    # Okapi BM25's idf is negative for a term in every document; BM25L keeps a lone match positive.
    assert text_scores([KB[1]], "softmax") == [1.0]
    assert text_scores([KB[1]], "convolution") == [0.0]
    assert text_scores(KB, "") == [0.0] * len(KB)


# ---------------------------------------------------------------------------------- what the model reads

def test_entries_are_numbered_and_capped_for_the_model():
    entries = distill(softmax_run())
    text = format_entries(entries)
    assert text.startswith("Knowledge base: 4 entries") and "\n1. " in text and "\n4. " in text
    assert entries[0]["title"] in text
    long = [dict(e, body="x" * 5000) for e in entries * 5]
    capped = format_entries(long, limit=3000)
    assert len(capped) <= 3100 and "more not shown" in capped


def test_no_entries_reads_as_such():
    assert format_entries([]) == NO_ENTRIES and "no entries" in NO_ENTRIES
