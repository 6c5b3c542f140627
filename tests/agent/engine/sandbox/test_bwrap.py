"""Which NVIDIA device nodes a sandbox gets: the mapping from CUDA_VISIBLE_DEVICES to /dev/nvidiaN on fake
/proc and /dev trees, and, on a host with two GPUs, that a job cannot open the other GPU's node."""
import json
import os
from pathlib import Path

import pytest

from agent.engine.sandbox import Job, Sandbox, bwrap

UUID_A = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
UUID_B = "GPU-bbbbbbbb-1111-2222-3333-444444444444"
UUID_C = "GPU-cccccccc-1111-2222-3333-444444444444"


def _host(tmp_path: Path, gpus: list[dict], nodes: tuple[str, ...] = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")):
    """A fake /proc with the driver's information file per GPU (its real layout) and a fake /dev with the
    shared nodes and one node per GPU; returns (proc_root, dev_root)."""
    proc, dev = tmp_path / "proc", tmp_path / "dev"
    dev.mkdir()
    for gpu in gpus:
        info = proc / "driver" / "nvidia" / "gpus" / gpu["bus"] / "information"
        info.parent.mkdir(parents=True)
        uuid_line = f"GPU UUID: \t {gpu['uuid']}\n" if gpu.get("uuid") else ""
        info.write_text(f"Model: \t\t {gpu.get('model', 'NVIDIA H200')}\nIRQ:   \t\t 0\n{uuid_line}"
                        "Video BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                        f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {gpu['bus']}\n"
                        f"Device Minor: \t {gpu['minor']}\nGPU Excluded:\t No\n")
        if gpu.get("node", True):
            (dev / f"nvidia{gpu['minor']}").touch()
    for name in nodes:
        (dev / name).touch()
    return str(proc), str(dev)


def _names(selection: bwrap.GpuSelection) -> list[str]:
    return [os.path.basename(p) for p in selection.nodes]


# Minor numbers follow the order the driver probed the GPUs in, not PCI order: index 0 is minor 1 here.
TWO = [{"bus": "0000:c1:00.0", "minor": 0, "uuid": UUID_B}, {"bus": "0000:18:00.0", "minor": 1, "uuid": UUID_A}]


def test_it_binds_only_the_shared_nodes_and_the_node_of_the_gpu_an_index_names_in_pci_order(tmp_path):
    proc, dev = _host(tmp_path, TWO)
    first = bwrap.select_gpus("0", None, proc_root=proc, dev_root=dev)
    assert _names(first) == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert first.visible == UUID_A and first.warning == ""
    second = bwrap.select_gpus("1", "PCI_BUS_ID", proc_root=proc, dev_root=dev)
    assert "nvidia0" in _names(second) and "nvidia1" not in _names(second) and second.visible == UUID_B


def test_it_maps_uuids_and_their_unique_prefixes_to_their_nodes(tmp_path):
    proc, dev = _host(tmp_path, TWO)
    assert _names(bwrap.select_gpus(UUID_B, proc_root=proc, dev_root=dev))[2:] == ["nvidia0", "nvidiactl"]
    prefix = bwrap.select_gpus("GPU-bbbb", proc_root=proc, dev_root=dev)
    assert prefix.visible == UUID_B and "nvidia0" in _names(prefix)
    assert bwrap.select_gpus("GPU-", proc_root=proc, dev_root=dev).nodes == []  # ambiguous: names no GPU


def test_it_keeps_the_order_cuda_visible_devices_gives_inside_the_sandbox(tmp_path):
    proc, dev = _host(tmp_path, TWO)
    both = bwrap.select_gpus("1,0", None, proc_root=proc, dev_root=dev)
    assert both.visible == f"{UUID_B},{UUID_A}"
    assert {"nvidia0", "nvidia1"} <= set(_names(both))


def test_it_binds_every_gpu_when_cuda_visible_devices_is_unset_and_none_when_it_is_empty(tmp_path):
    proc, dev = _host(tmp_path, TWO, nodes=("nvidiactl", "nvidia-uvm", "nvidia-modeset"))
    (Path(dev) / "nvidia-caps").mkdir()
    (Path(dev) / "nvidia-foo").touch()  # an unknown node: never bound
    unset = bwrap.select_gpus(None, proc_root=proc, dev_root=dev)
    assert _names(unset) == ["nvidia-caps", "nvidia-modeset", "nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
    assert unset.visible is None
    assert bwrap.select_gpus("", proc_root=proc, dev_root=dev) == bwrap.GpuSelection([], "")


def test_it_stops_at_the_first_entry_that_names_no_gpu_as_cuda_does(tmp_path):
    proc, dev = _host(tmp_path, TWO)
    assert bwrap.select_gpus("1,7,0", proc_root=proc, dev_root=dev).visible == UUID_B
    assert bwrap.select_gpus("7,0", proc_root=proc, dev_root=dev) == bwrap.GpuSelection([], "")
    assert bwrap.select_gpus("0,0", proc_root=proc, dev_root=dev).visible == UUID_A


def test_it_counts_only_gpus_whose_node_exists_as_cuda_skips_the_others(tmp_path):
    # A container that sees the driver's whole list but holds only the third GPU's node.
    gpus = [{"bus": "0000:18:00.0", "minor": 0, "uuid": UUID_A, "node": False},
            {"bus": "0000:2a:00.0", "minor": 1, "uuid": UUID_B, "node": False},
            {"bus": "0000:3b:00.0", "minor": 2, "uuid": UUID_C}]
    proc, dev = _host(tmp_path, gpus)
    selection = bwrap.select_gpus("0", proc_root=proc, dev_root=dev)
    assert "nvidia2" in _names(selection) and selection.visible == UUID_C


def test_it_renumbers_by_rank_among_the_bound_gpus_where_the_driver_gives_no_uuid(tmp_path):
    gpus = [{"bus": "0000:18:00.0", "minor": 3}, {"bus": "0000:2a:00.0", "minor": 0},
            {"bus": "0000:3b:00.0", "minor": 1}]
    proc, dev = _host(tmp_path, gpus)
    selection = bwrap.select_gpus("2,0", proc_root=proc, dev_root=dev)
    assert [n for n in _names(selection) if n[-1].isdigit()] == ["nvidia1", "nvidia3"]
    assert selection.visible == "1,0"  # inside, minor 3 comes first in PCI order, minor 1 second


def test_it_binds_every_gpu_and_warns_when_an_index_cannot_be_mapped_on_a_mixed_host(tmp_path):
    gpus = [{"bus": "0000:18:00.0", "minor": 0, "uuid": UUID_A, "model": "NVIDIA H200"},
            {"bus": "0000:2a:00.0", "minor": 1, "uuid": UUID_B, "model": "NVIDIA L4"}]
    proc, dev = _host(tmp_path, gpus)
    fastest = bwrap.select_gpus("0", None, proc_root=proc, dev_root=dev)
    assert {"nvidia0", "nvidia1"} <= set(_names(fastest)) and fastest.visible == "0"
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in fastest.warning
    # PCI order, or a UUID, maps on the same host.
    assert bwrap.select_gpus("1", "PCI_BUS_ID", proc_root=proc, dev_root=dev).visible == UUID_B
    assert bwrap.select_gpus(UUID_B, None, proc_root=proc, dev_root=dev).warning == ""


def test_it_binds_every_gpu_and_warns_without_the_drivers_gpu_list(tmp_path):
    proc, dev = _host(tmp_path, [])
    (Path(dev) / "nvidia0").touch()
    selection = bwrap.select_gpus("0", proc_root=proc, dev_root=dev)
    assert "nvidia0" in _names(selection) and selection.visible == "0" and "lists none" in selection.warning


def test_it_binds_a_mig_instance_with_its_gpu_and_the_capability_nodes(tmp_path):
    proc, dev = _host(tmp_path, TWO)
    (Path(dev) / "nvidia-caps").mkdir()
    legacy = f"MIG-{UUID_B}/1/0"
    selection = bwrap.select_gpus(legacy, proc_root=proc, dev_root=dev)
    assert set(_names(selection)) == {"nvidia-caps", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl"}
    assert selection.visible == legacy
    # A MIG UUID does not say which GPU it is on: every GPU, with a warning.
    opaque = bwrap.select_gpus("MIG-0d2b7a35-2a1e-5d43-9b05-3c1e2e6c7f10", proc_root=proc, dev_root=dev)
    assert {"nvidia0", "nvidia1", "nvidia-caps"} <= set(_names(opaque)) and "which GPU" in opaque.warning


def test_the_command_binds_the_chosen_nodes_and_renames_the_gpus_inside(tmp_path, monkeypatch):
    proc, dev = _host(tmp_path, TWO)
    real = bwrap.select_gpus
    monkeypatch.setattr(bwrap, "select_gpus", lambda visible, order: real(visible, order, proc_root=proc, dev_root=dev))
    args = bwrap.command("bwrap", ["true"], {"CUDA_VISIBLE_DEVICES": "0", "PATH": "/usr/bin"})
    pairs = list(zip(args, args[1:], args[2:]))
    assert ("--setenv", "CUDA_VISIBLE_DEVICES", UUID_A) in pairs
    bound = [target for flag, target, _ in pairs if flag == "--dev-bind"]
    assert [os.path.basename(b) for b in bound] == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]


def _two_gpus() -> str:
    """Why the two-GPU check cannot run here ("" when it can)."""
    if bwrap.usable()[0] is None:
        return f"bubblewrap is not usable here: {bwrap.usable()[1]}"
    try:
        count = len(bwrap.installed_gpus())
    except Exception as exc:  # noqa: BLE001 - any reason the driver's list cannot be read is a reason to skip
        return f"the driver's GPU list cannot be read: {exc}"
    return "" if count >= 2 else f"needs two GPUs, this host has {count}"


@pytest.mark.skipif(bool(_two_gpus()), reason=_two_gpus() or "-")
@pytest.mark.parametrize("index", [0, 1])
def test_a_job_sees_only_its_workers_gpu_and_cannot_open_the_others_node(index):
    gpus = bwrap.installed_gpus()
    mine, other = gpus[index], gpus[1 - index]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    with Sandbox(preload=("agent.engine.sandbox.probes",), env=env, bwrap=True) as box:
        out = box.run(Job("agent.engine.sandbox.probes:devices", {"paths": [f"/dev/nvidia{mine.minor}",
                                                                     f"/dev/nvidia{other.minor}"], "cuda": True},
                          device="cuda"))
    assert out.ok, out.stderr
    facts = json.loads(out.result)
    assert facts["opened"][f"/dev/nvidia{mine.minor}"] is True
    assert facts["opened"][f"/dev/nvidia{other.minor}"] == "No such file or directory"
    assert len(facts["uuids"]) == 1, facts  # CUDA inside sees this worker's GPU alone...
    assert not mine.uuid or facts["uuids"][0].lower() == mine.uuid.lower()  # ...and it is the right one
