# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The NIC nearest a GPU from Python: Nic.rank() and Nic(near_gpu=N) on a
synthetic sysfs tree ($DEVMEMTCP_TEST_SYSFS, test builds), the fake CUDA
driver's device 0 at PCI 0000:1b:00.0 ($DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID, in
upper case as the driver writes it): its NIC below the same PCIe switch,
one on its socket, one on the other socket."""

import errno
import os

import pytest

import devmemtcp as dm


def pci(root, chain, numa):
    d = os.path.join(root, "devices", chain)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "numa_node"), "w") as f:
        f.write("%d\n" % numa)
    os.makedirs(os.path.join(root, "bus/pci/devices"), exist_ok=True)
    os.symlink(d, os.path.join(root, "bus/pci/devices", os.path.basename(chain)))
    return d


def net(root, ifname, dev):
    d = os.path.join(root, "class/net", ifname)
    os.makedirs(d)
    os.symlink(dev, os.path.join(d, "device"))


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    root = str(tmp_path)
    sw = "pci0000:18/0000:18:01.0/0000:19:00.0"
    pci(root, sw + "/0000:1a:00.0/0000:1b:00.0", 0)            # the GPU
    net(root, "ibp28s0", pci(root, sw + "/0000:1a:01.0/0000:1c:00.0", 0))
    net(root, "ens3", pci(root, "pci0000:00/0000:00:03.0/0000:03:00.0", 0))
    net(root, "ens9", pci(root, "pci0000:80/0000:80:03.0/0000:81:00.0", 1))
    os.makedirs(os.path.join(root, "class/net/lo"))
    monkeypatch.setenv("DEVMEMTCP_TEST_SYSFS", root)
    monkeypatch.setenv("DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID", "0000:1B:00.0")
    return root


def test_rank_from_gpu_and_pci(ctx, sysfs):
    want = [("ibp28s0", "0000:1c:00.0", dm.PCI_SAME_SWITCH, 0),
            ("ens3", "0000:03:00.0", dm.PCI_SAME_NUMA, 0),
            ("ens9", "0000:81:00.0", dm.PCI_OTHER, 1)]
    assert dm.Nic.rank(ctx, gpu=0) == want
    assert dm.Nic.rank(ctx, pci="0000:1b:00.0") == want
    with pytest.raises(TypeError):
        dm.Nic.rank(ctx)
    with pytest.raises(dm.Error) as e:
        dm.Nic.rank(ctx, pci="0000:1d:00.0")
    # ERRORS devmemtcp_nic_rank ENODEV
    assert e.value.errno == errno.ENODEV
    assert e.value.strerror == (
        "devmemtcp_nic_rank: no PCI device 0000:1d:00.0 in %s/bus/pci/devices: "
        "check the address with lspci -D" % sysfs)


def test_nic_near_gpu_opens_the_nearest(ctx, sysfs):
    # the synthetic interface does not exist: the open names the one chosen
    with pytest.raises(dm.Error) as e:
        dm.Nic(ctx, near_gpu=0, flows=["tcp4 dst-port 5201"])
    assert "ibp28s0" in str(e.value), e.value
    with pytest.raises(TypeError, match="Nic needs ifname or near_gpu=N"):
        dm.Nic(ctx)
    with pytest.raises(dm.Error) as e:
        dm.Nic(ctx, near_gpu=3)
    assert e.value.errno == errno.ENODEV, e.value
