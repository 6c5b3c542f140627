"""The config fills in the device's runtime window and says what to set when a value is wrong."""
import pytest

from trainer.synthesis.config import SynthesisConfig


def test_it_fills_in_the_devices_runtime_window_and_attempt_budget():
    cpu = SynthesisConfig(count=10)
    assert (cpu.min_ms, cpu.max_ms, cpu.max_attempts) == (0.05, 20.0, 200)
    cuda = SynthesisConfig(count=1, device="cuda", max_ms=5.0)
    assert (cuda.min_ms, cuda.max_ms) == (0.05, 5.0)
    assert cpu.check_settings().max_ms == 20.0 and cpu.check_settings().compile


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"count": 0}, "count=0"),
    ({"device": "tpu"}, "device='tpu': set it to one of cpu, cuda"),
    ({"dtype": "int8"}, "dtype='int8'"),
    ({"min_ops": 3, "max_ops": 2}, "need 1 <= min_ops <= max_ops <= 8"),
    ({"max_ops": 9}, "need 1 <= min_ops <= max_ops <= 8"),
    ({"min_ms": 5.0, "max_ms": 1.0}, "the runtime window needs 0 <= min_ms < max_ms"),
    ({"similarity": 0.0}, "similarity=0.0"),
    ({"rtol": -1.0}, "tolerances cannot be negative"),
    ({"timeout_s": 0}, "timeout_s=0"),
    ({"count": 5, "max_attempts": 4}, "max_attempts=4 is below count=5"),
    ({"threads": 0}, "threads=0"),
])
def test_it_rejects_bad_values_saying_what_to_set(kwargs, says):
    with pytest.raises(ValueError, match=None) as info:
        SynthesisConfig(**kwargs)
    assert says in str(info.value)


def test_it_has_help_on_every_field():
    helps = SynthesisConfig.help()
    assert helps and all(text.strip() for text in helps.values())
