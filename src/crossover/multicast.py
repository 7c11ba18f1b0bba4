"""NVLink multicast stays off: on hosts whose GPUs are shared, a multicast all-reduce can
take every GPU of the host out of service (docs/engines.md, "NVLink multicast stays off").

The switches every library honours are here, for everything crossover starts on GPUs
(commbench's workers, engines); engine-specific ones sit with their adapter.
"""

from __future__ import annotations

#: NCCL (NVLS), torch symmetric memory and NVSHMEM: multicast off
MULTICAST_OFF: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
