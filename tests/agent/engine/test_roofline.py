"""Where a kernel sits against the hardware's roofs (agent/engine/roofline.py)."""
from __future__ import annotations

import pytest

from agent.engine.roofline import place

H100 = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132}


def test_it_places_a_matmul_under_the_compute_roof_with_the_measured_bandwidth():
    work = {"bytes": 3 * 4096 * 4096 * 4, "flops": 2 * 4096**3, "copy_bytes_per_s": 2.9e12}
    p = place(work, 5.0, H100)
    assert p.memory_roof.source.startswith("measured") and p.memory_roof.value == 2.9e12
    assert p.compute_roof.source.startswith("datasheet") and "not measured" in " ".join(p.notes)
    assert p.achieved_flops_per_s == pytest.approx(2 * 4096**3 / 0.005)
    assert p.intensity == pytest.approx(2 * 4096**3 / (3 * 4096 * 4096 * 4))
    assert p.bound == "compute"  # ~680 FLOP/byte is far right of the H100's ridge
    assert p.pct_of_roof == pytest.approx(100 * p.achieved_flops_per_s / 67e12)


def test_it_places_elementwise_work_by_memory_traffic_against_the_datasheet_when_nothing_was_measured():
    p = place({"bytes": 8 * 2**20, "flops": 0}, 0.01, H100)
    assert p.bound == "memory" and p.memory_roof.source.startswith("datasheet")
    assert p.pct_of_roof == pytest.approx(100 * (8 * 2**20 / 1e-5) / 3.35e12)
    assert any("counted no FLOPs" in n for n in p.notes)


def test_it_draws_no_roof_for_a_cpu_and_says_so():
    p = place({"bytes": 8 * 2**20, "flops": 0}, 0.5, {"host_cpu": "x86_64", "cpu_count": 2})
    assert p.memory_roof is None and p.compute_roof is None and p.pct_of_roof is None
    assert p.achieved_bytes_per_s == pytest.approx(8 * 2**20 / 5e-4)
    assert any("No roofline ceilings were measured for x86_64" in n for n in p.notes)


def test_it_says_when_the_work_or_the_time_is_missing():
    p = place(None, None, H100)
    assert p.achieved_bytes_per_s is None and p.bound == ""
    assert any("memory traffic was not recorded" in n for n in p.notes)
    assert any("no timing" in n for n in p.notes)


def test_measured_peaks_are_the_roofs_where_the_verdict_carries_them():
    peaks = {"copy_bytes_per_s": 2.0e11, "fp32_flops_per_s": 1.0e11, "measured_at": "2026-11-25T23:00:00Z"}
    placed = place({"bytes": 2 * 10**9, "flops": 0}, 20.0, {"host_cpu": "Some CPU"}, peaks)
    assert placed.memory_roof.value == 2.0e11 and placed.memory_roof.source.startswith("measured")
    assert placed.compute_roof.value == 1.0e11 and placed.bound == "memory"
    assert placed.pct_of_roof == pytest.approx(50.0)  # 1e11 B/s achieved of a 2e11 B/s roof
