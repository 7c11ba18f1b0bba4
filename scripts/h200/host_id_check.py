"""On the GPU machine: the host record crossover keeps, read through NVML and through the
nvidia-smi fallback, with its ``machine_id``; neither may hold a raw GPU UUID.

    PYTHONPATH=src:/tmp/site python3 scripts/h200/host_id_check.py
"""

from __future__ import annotations

import json
import subprocess

from crossover.measure import host

uuids = subprocess.run(
    ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
    capture_output=True,
    text=True,
    check=True,
).stdout.split()
nvml = host.read_host()
smi_reading = host._nvidia_smi()
smi = host.read_host(gpus=tuple(smi_reading) if smi_reading else None)
for name, h in (("nvml", nvml), ("nvidia-smi", smi)):
    dumped = json.dumps(h.model_dump(mode="json"))
    print(f"{name}: machine_id {h.machine_id}; {h.describe()}")
    print(f"  a raw UUID in the record: {any(u in dumped for u in uuids)}")
print(f"nvml module: {host.nvml_module() is not None}; GPUs: {len(uuids)}")
print(f"same machine: {nvml.same_machine(smi)}")
