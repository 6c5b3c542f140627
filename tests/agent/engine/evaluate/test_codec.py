import io
import pickle

import pytest
import torch

from agent.engine.evaluate.codec import DecodeError, read_result, write_result


def test_it_round_trips_a_header_and_tensors():
    buf = io.BytesIO()
    write_result(buf, {"stage": "done"}, {"outputs": [[torch.ones(3)]], "digests": {0: [torch.zeros(2)]}})
    header, tensors = read_result(buf.getvalue())
    assert header == {"stage": "done"}
    assert torch.equal(tensors["outputs"][0][0], torch.ones(3))


class _Boom:
    def __reduce__(self):
        return (print, ("unpickled arbitrary code",))


def test_it_refuses_to_unpickle_arbitrary_objects_from_a_job():
    head = b'{"stage": "done"}'
    payload = len(head).to_bytes(8, "big") + head + pickle.dumps({"x": _Boom()})
    with pytest.raises(DecodeError):
        read_result(payload)


def test_it_rejects_a_truncated_result():
    with pytest.raises(DecodeError):
        read_result(b"\x00\x00")
