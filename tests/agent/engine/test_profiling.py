"""Profile summaries: torch.profiler for real on the CPU; ncu's command line and its CSV parser."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import torch

from agent.engine import profiling
from agent.engine.profiling import NCU_METRICS, ncu_available, ncu_command, parse_ncu_csv, torch_profiler_summary

# --- torch.profiler ------------------------------------------------------------------------------


def test_it_summarises_a_cpu_function_with_the_real_profiler() -> None:
    a, b = torch.randn(96, 96), torch.randn(96, 96)
    calls = []

    def fn() -> torch.Tensor:
        calls.append(1)
        return (a @ b).relu()

    summary = torch_profiler_summary(fn, device="cpu", iterations=3)

    assert len(calls) == 4, "one warm-up call outside the profiler, then the profiled iterations"
    assert json.loads(json.dumps(summary)) == summary
    assert summary["tool"] == "torch.profiler"
    assert "self CPU time" in summary["note"] and "3 calls" in summary["note"]
    kernels = summary["kernels"]
    assert 0 < len(kernels) <= profiling.TOP_KERNELS
    assert set(kernels[0]) == {"name", "calls", "total_us", "avg_us", "pct"}
    times = [k["total_us"] for k in kernels]
    assert times == sorted(times, reverse=True)
    mm = next(k for k in kernels if k["name"] == "aten::mm")
    assert mm["calls"] == 3
    assert mm["avg_us"] == pytest.approx(mm["total_us"] / 3, abs=0.01)
    assert summary["total_us"] >= sum(times) - 0.01
    # Each share is rounded to 0.01, so the sum may exceed 100 by up to 0.005 per row.
    assert 0 < sum(k["pct"] for k in kernels) <= 100 + 0.005 * len(kernels) + 1e-9


def test_it_keeps_only_the_top_operators() -> None:
    x = torch.randn(8)
    ops = [torch.sin, torch.cos, torch.exp, torch.tanh, torch.sigmoid, torch.abs, torch.neg, torch.sqrt,
           torch.log1p, torch.expm1, torch.floor, torch.ceil, torch.round, torch.trunc, torch.sign, torch.square,
           torch.erf, torch.atan, torch.asinh, torch.relu]

    summary = torch_profiler_summary(lambda: [op(x) for op in ops], device="cpu", iterations=1)

    assert len(summary["kernels"]) == profiling.TOP_KERNELS


def test_it_refuses_an_unknown_device_or_no_iterations() -> None:
    with pytest.raises(ValueError, match="device"):
        torch_profiler_summary(lambda: None, device="tpu")
    with pytest.raises(ValueError, match="iteration"):
        torch_profiler_summary(lambda: None, device="cpu", iterations=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_it_ranks_cuda_kernels_by_gpu_time() -> None:
    x = torch.randn(1024, 1024, device="cuda")
    summary = torch_profiler_summary(lambda: (x @ x).relu(), device="cuda", iterations=3)
    assert summary["note"].startswith("GPU time per kernel")
    assert not any(k["name"].startswith("aten::") for k in summary["kernels"]), "kernels, not the operators that launch them"
    assert all(k["calls"] == 3 for k in summary["kernels"])


# --- ncu command line ----------------------------------------------------------------------------


def option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_it_builds_an_ncu_command_that_collects_our_metrics_as_raw_csv(tmp_path: Path) -> None:
    report = tmp_path / "ncu.csv"
    argv = ["python3", "-m", "agent.engine.evaluate.child", "--profile"]

    command = ncu_command(argv, report)

    assert Path(command[0]).name == "ncu"
    assert command[-len(argv):] == argv, "the profiled program comes last, untouched"
    assert option(command, "--metrics").split(",") == NCU_METRICS
    assert "--csv" in command and option(command, "--page") == "raw"
    assert option(command, "--target-processes") == "all"
    assert option(command, "--profile-from-start") == "off"
    assert option(command, "--clock-control") == "none"
    assert option(command, "--log-file") == str(report)
    assert all(isinstance(part, str) for part in command)


def test_its_metrics_cover_every_field_of_the_summary() -> None:
    assert set(NCU_METRICS) == {
        "gpu__time_duration.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "launch__registers_per_thread",
        "launch__shared_mem_per_block_static",
        "launch__shared_mem_per_block_dynamic",
        "launch__grid_size",
        "launch__block_size",
    }


def test_it_finds_ncu_on_the_path_or_in_the_cuda_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ncu"
    monkeypatch.setattr(profiling.shutil, "which", lambda name: None)
    monkeypatch.setattr(profiling, "NCU_FALLBACK_PATH", str(fake))
    assert not ncu_available()

    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert ncu_available()
    assert ncu_command(["python3"], tmp_path / "r.csv")[0] == str(fake)

    monkeypatch.setattr(profiling.shutil, "which", lambda name: "/opt/nsight/ncu")
    assert ncu_available()
    assert ncu_command(["python3"], tmp_path / "r.csv")[0] == "/opt/nsight/ncu"


# --- ncu CSV -------------------------------------------------------------------------------------

# REAL output, trimmed: written by ncu 2025.3.1 on an H100 80GB HBM3 (driver 580, torch 2.11+cu130)
# with exactly the command ncu_command builds, profiling `(x @ x).relu() + 1` on 2048x2048 floats
# between torch.cuda.profiler.start()/stop(). The raw page printed ~300 columns (device attributes,
# min/max/avg variants...); only the identity columns and the ones we read are kept here, in ncu's
# order. The ==WARNING==/==PROF== lines are verbatim.
H100_RAW_CSV = r'''==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, profiling results may be inconsistent.
==PROF== Connected to process 454 (/usr/bin/python3.12)
==PROF== Disconnected from process 454
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","launch__block_size","launch__grid_size","launch__registers_per_thread","launch__shared_mem_per_block_dynamic","launch__shared_mem_per_block_static","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","%","ns","","","register/thread","byte/block","byte/block","%","%"
"0","454","python3.12","127.0.0.1","void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)","1","7","(256, 1, 1)","(128, 1, 1)","0","9.0","1.65","343,776","256","128","202","49,152","0","84.64","12.50"
"1","454","python3.12","127.0.0.1","void at::vectorized_elementwise_kernel<4, at::<unnamed>::launch_clamp_scalar(at::TensorIteratorBase &, c10::Scalar, c10::Scalar, detail::ClampLimits)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","48.14","11,360","128","4,096","28","0","0","14.94","70.87"
"2","454","python3.12","127.0.0.1","void at::vectorized_elementwise_kernel<4, at::CUDAFunctorOnSelf_add<float>, std::array<char *, 2>>(int, T2, T3)","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","47.63","11,520","128","4,096","32","0","0","5.96","71.75"
'''

# SYNTHETIC, written by hand in the same raw-page shape (header, units row, one row per launch) to
# exercise what the real sample above does not: auto-scaled units, a metric column ncu left out
# (no launch__grid_size), "n/a" values, the program's own output mixed into the log, and ==ERROR== lines.
SYNTHETIC_CSV = '''program says hello
==PROF== Connected to process 99 (/usr/bin/python3)
==ERROR== Failed to profile "kernel_b" in process 99
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","launch__registers_per_thread","launch__shared_mem_per_block_static","launch__shared_mem_per_block_dynamic","launch__block_size"
"","","","","","","","","","","","usecond","%","%","%","register/thread","Kbyte/block","byte/block",""
"0","99","python3","host","kernel_a(float*, int)","1","7","(1024, 1, 1)","(1,320, 1, 1)","0","9.0","1,234.5","91.2","40.1","88.8","40","2","1,024","1,024"
"1","99","python3","host","kernel_b(float*)","1","7","(64, 1, 1)","(1, 1, 1)","0","9.0","n/a","","n/a","","","","",""
program says goodbye
'''


def test_it_parses_real_h100_raw_csv() -> None:
    summary = parse_ncu_csv(H100_RAW_CSV)

    assert summary["tool"] == "ncu"
    assert [k["name"][:30] for k in summary["kernels"]] == [
        "void cutlass::Kernel2<cutlass_",
        "void at::vectorized_elementwis",
        "void at::vectorized_elementwis",
    ]
    gemm = summary["kernels"][0]
    assert gemm == {
        "name": "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)",
        "duration_us": 343.776,
        "dram_pct": 1.65,
        "sm_pct": 84.64,
        "occupancy_pct": 12.5,
        "registers": 202,
        "shared_mem_bytes": 49152,
        "grid": 128,
        "block": 256,
    }
    assert summary["kernels"][1]["grid"] == 4096, "thousands separators are read"
    assert summary["total_us"] == pytest.approx(343.776 + 11.36 + 11.52)
    assert json.loads(json.dumps(summary)) == summary


def test_it_shortens_very_long_kernel_names() -> None:
    name = parse_ncu_csv(H100_RAW_CSV)["kernels"][1]["name"]
    assert len(name) == profiling.MAX_NAME_CHARS and name.endswith("...")


def test_it_converts_units_and_leaves_missing_metrics_as_none() -> None:
    kernels = parse_ncu_csv(SYNTHETIC_CSV)["kernels"]

    assert len(kernels) == 2
    a, b = kernels
    assert a["duration_us"] == 1234.5
    assert a["shared_mem_bytes"] == 2 * 1000 + 1024
    assert a["block"] == 1024
    assert a["grid"] is None, "launch__grid_size was not collected"
    assert b == {
        "name": "kernel_b(float*)",
        "duration_us": None,
        "dram_pct": None,
        "sm_pct": None,
        "occupancy_pct": None,
        "registers": None,
        "shared_mem_bytes": None,
        "grid": None,
        "block": None,
    }
    assert parse_ncu_csv(SYNTHETIC_CSV)["total_us"] == 1234.5


def test_it_reports_no_kernels_when_ncu_wrote_no_table() -> None:
    log = "==PROF== Connected to process 7\n==WARNING== No kernels were profiled.\n==PROF== Disconnected from process 7\n"
    summary = parse_ncu_csv(log)
    assert summary["kernels"] == [] and summary["total_us"] == 0.0
    assert "torch.cuda.profiler.start()" in summary["note"]
    assert parse_ncu_csv("")["kernels"] == []
