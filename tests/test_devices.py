"""``CUDA_VISIBLE_DEVICES`` read once for every user (``crossover.devices``): its entries in
their own form, sliced among a target's replicas, and counted against the machine's GPUs
as CUDA counts them."""

from __future__ import annotations

import pytest

from crossover.devices import Unread, given, listed, replica_devices, visible_indices

H100 = "NVIDIA H100 80GB HBM3"
UUIDS = [f"GPU-{c * 8}-1111-2222-3333-444444444444" for c in "abcd"]


def test_entries_keep_their_own_form_up_to_the_first_index_that_hides() -> None:
    assert listed("2,3") == ["2", "3"]
    assert listed(" 2 , 3 ") == ["2", "3"]
    assert listed(f"{UUIDS[1]},{UUIDS[0]}") == [UUIDS[1], UUIDS[0]]
    assert listed("MIG-xyz") == ["MIG-xyz"]
    assert listed("1,-1,2") == ["1"] and listed("-1") == [] and listed("") == []


def test_replica_k_gets_the_k_th_slice_of_the_entries_given() -> None:
    assert [replica_devices(["2", "3"], k, 1) for k in (0, 1)] == ["2", "3"]
    assert [replica_devices(["4", "5", "6", "7"], k, 2) for k in (0, 1)] == ["4,5", "6,7"]
    assert replica_devices(UUIDS, 1, 2) == f"{UUIDS[2]},{UUIDS[3]}"
    # nothing chose: the machine's GPUs by index
    assert [replica_devices(None, k, 2) for k in (0, 1)] == ["0,1", "2,3"]


def test_the_gpus_given_are_counted_as_cuda_counts_them() -> None:
    four = [H100] * 4
    assert given(None, four, UUIDS) == 4  # not set: the machine's
    assert given(None, None, ()) is None  # not set and not read: not guessed
    assert given("2,3", four, UUIDS) == 2
    assert given("2,3,9", four, UUIDS) == 2  # CUDA stops at 9, no GPU of four
    assert given("2,3,9", None, ()) == 3  # the machine not read: the entries
    assert given(UUIDS[3][:12], four, UUIDS) == 1
    assert given("", four, UUIDS) == 0 and given("-1", four, UUIDS) == 0
    assert given("MIG-a,MIG-b", four, UUIDS) == 2  # not read against NVML: its entries


def test_forms_not_read_against_the_machine_raise_unread() -> None:
    with pytest.raises(Unread, match="MIG-a is not an index"):
        visible_indices("MIG-a", [H100], [UUIDS[0]], pci_order=True)
    assert visible_indices("1,0", [H100, H100], UUIDS[:2], pci_order=False) == [1, 0]
