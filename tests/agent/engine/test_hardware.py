"""Hardware facts that name the machine (agent/engine/hardware.py)."""
from __future__ import annotations

from pathlib import Path

from agent.engine.hardware import cpu_model, describe, host_facts

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC   7R13 Processor
cpu cores\t: 1

processor\t: 1
model name\t: AMD EPYC 7R13 Processor
"""


def test_it_names_the_cpu_model_from_proc_cpuinfo(tmp_path: Path):
    (tmp_path / "cpuinfo").write_text(X86)
    assert cpu_model(tmp_path / "cpuinfo") == "AMD EPYC 7R13 Processor"
    facts = host_facts(tmp_path / "cpuinfo")
    assert facts["host_cpu"] == facts["cpu_model"] == "AMD EPYC 7R13 Processor"
    assert isinstance(facts["cpu_count"], int) and facts["cpu_count"] >= 1 and facts["cpu_arch"]


def test_without_a_model_name_it_falls_back_to_the_architecture(tmp_path: Path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")
    assert cpu_model(tmp_path / "cpuinfo") == "" and cpu_model(tmp_path / "missing") == ""
    assert host_facts(tmp_path / "missing")["host_cpu"]  # platform's word, never empty


def test_this_machine_is_named_by_its_model_and_cores():
    facts = host_facts()
    if Path("/proc/cpuinfo").exists() and "model name" in Path("/proc/cpuinfo").read_text():
        assert facts["host_cpu"] != facts["cpu_arch"]
    assert describe(facts).endswith(f", {facts['cpu_count']} cores")
    assert describe({**facts, "gpu": "NVIDIA H100 80GB HBM3"}).startswith("NVIDIA H100 80GB HBM3 on ")
