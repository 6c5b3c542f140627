"""Compiler errors on the candidate's own lines (agent/engine/diagnostics.py)."""
from __future__ import annotations

from agent.engine.diagnostics import diagnostics
from tests.apps.cast import BAD_BUILD_CANDIDATE

# What g++ 12 printed for tests/corpus/candidates/fault_cpp_build_error.py in the studio's build (the
# studio compiles twice, with full then slim headers, so each error comes twice).
GXX_LOG = """=== main.cpp with original headers: failed in 17.1 s
$ c++ -DTORCH_EXTENSION_NAME=ks_fault -fPIC -std=c++20 -O3 -fopenmp -c main.cpp -o main.o
main.cpp: In function 'at::Tensor silu_bias(at::Tensor, at::Tensor)':
main.cpp:7:5: error: expected ',' or ';' before 'float'
    7 |     float* yp = y.data_ptr<float>();
      |     ^~~~~
main.cpp:8:45: error: 'yp' was not declared in this scope; did you mean 'y'?
    8 |     for (int64_t i = 0; i < y.numel(); ++i) yp[i] = undeclared_silu(x_ptr[i]);
      |                                             ^~
=== main.cpp with slim headers: failed in 5.6 s
main.cpp:7:5: error: expected ',' or ';' before 'float'
    7 |     float* yp = y.data_ptr<float>();
      |     ^~~~~
"""


def test_it_puts_gxx_errors_on_the_candidate_lines_they_echo():
    source = BAD_BUILD_CANDIDATE.read_text()
    found = diagnostics(GXX_LOG, source)
    lines = source.splitlines()
    assert [(d.line, d.col, d.placed) for d in found] == [(12, 5, True), (13, 45, True)]
    assert lines[11].strip().startswith("float* yp") and "undeclared_silu" in lines[12]
    assert found[0].reported_at == "main.cpp:7:5" and "before 'float'" in found[0].message


def test_it_places_nvcc_errors_without_an_echo_by_their_offset_in_the_literal():
    source = 'import torch\nCUDA_SRC = r"""\n#include <cuda_runtime.h>\n__global__ void k(float* x) {\n    x[0] = y;\n}\n"""\n'
    log = "/tmp/build/cuda.cu(7): error: identifier \"y\" is undefined\n\n1 error detected"
    [d] = diagnostics(log, source)
    # cuda.cu has torch's three include lines first, then the literal's text from its opening line.
    assert (d.line, d.severity, d.placed) == (5, "error", True) and source.splitlines()[4].strip() == "x[0] = y;"


def test_it_keeps_an_error_it_cannot_place_on_line_one_saying_so():
    [d] = diagnostics("other.cpp:99:1: error: something broke", "x = 1\n")
    assert (d.line, d.placed, d.reported_at) == (1, False, "other.cpp:99:1")


def test_it_finds_nothing_in_a_clean_log():
    assert diagnostics("=== main.cpp built in 3.1 s\n$ c++ -c main.cpp", BAD_BUILD_CANDIDATE.read_text()) == []
