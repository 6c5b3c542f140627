"""The skill documents ship with the package and read back by name."""
from __future__ import annotations

import pytest

from agent.loop.skills import UnknownSkill, list_skills, read_skill

EXPECTED = {
    "memory_coalescing", "tiling_and_shared_memory", "vectorized_access", "warp_primitives", "tensor_cores",
    "occupancy", "fusion", "numerics_and_tolerances", "triton_basics", "cpu_kernels_openmp_simd",
    "reading_the_profiler", "kernelbench_format_and_rules",
}


def test_it_lists_every_shipped_skill() -> None:
    names = list_skills()
    assert names == sorted(names)
    assert EXPECTED <= set(names)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_skill_reads_with_a_title_and_a_code_example(name: str) -> None:
    text = read_skill(name)
    first = text.splitlines()[0]
    assert first.startswith("# ") and len(first) > 4
    assert 30 <= len(text.splitlines()) <= 150
    assert "```" in text  # every skill shows concrete code


def test_it_accepts_a_name_with_the_md_suffix() -> None:
    assert read_skill("fusion.md") == read_skill("fusion")


def test_it_names_the_available_skills_for_an_unknown_one() -> None:
    with pytest.raises(KeyError) as caught:
        read_skill("warp_magic")
    assert isinstance(caught.value, UnknownSkill)
    message = str(caught.value)
    assert "warp_magic" in message
    for name in EXPECTED:
        assert name in message


def test_the_rules_skill_names_every_rejecting_flag() -> None:
    from agent.engine.verdict import REJECTING_FLAGS

    rules = read_skill("kernelbench_format_and_rules")
    missing = [flag.value for flag in REJECTING_FLAGS if f"`{flag.value}`" not in rules]
    assert not missing, f"kernelbench_format_and_rules.md does not explain {missing}"
