"""A CPU platform for veRL 0.9.1, so its training engine runs in tests on machines without a GPU.

veRL resolves every device call (``get_device_name``, ``get_torch_device().empty_cache()``,
the collective backend) through one platform object. 0.9.1 registers CUDA, NPU and ROCm only and
falls back to CUDA when none is present, so on a CPU-only machine its engine calls ``torch.cuda``
and fails. :class:`PlatformCPU` answers those calls for the CPU (``gloo`` collectives, no-op
cache and synchronisation). It is registered with veRL's own ``PlatformRegistry`` and selected
with ``VERL_PLATFORM=cpu`` (or :func:`use_cpu_platform`). Tests only: training on CPU is far too
slow for anything but a tiny model.
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry, set_platform


class _CPUDeviceModule(ModuleType):
    """``torch.cpu`` plus the ``torch.cuda``-style calls veRL makes on its device module.

    Memory statistics read 0 (veRL only logs them); anything else falls through to ``torch.cpu``.
    """

    def __init__(self) -> None:
        super().__init__("termgym_cpu_device")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def _zero(*args: Any, **kwargs: Any) -> int:
        return 0

    memory_allocated = memory_reserved = max_memory_allocated = max_memory_reserved = _zero

    @staticmethod
    def mem_get_info(*args: Any, **kwargs: Any) -> tuple[int, int]:
        pages = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * pages, os.sysconf("SC_PHYS_PAGES") * pages

    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def reset_peak_memory_stats(*args: Any, **kwargs: Any) -> None:
        return None

    @staticmethod
    def memory_stats(*args: Any, **kwargs: Any) -> dict[str, int]:
        return {}

    @staticmethod
    def is_available() -> bool:
        return True

    # The device generator is the CPU generator (veRL restores it from a checkpoint's "cpu" entry).
    get_rng_state = staticmethod(torch.get_rng_state)
    set_rng_state = staticmethod(torch.set_rng_state)

    @staticmethod
    def get_device_name(*args: Any, **kwargs: Any) -> str:
        return "CPU"  # veRL's FLOPs table names torch.cpu "CPU"


_DEVICE_MODULE = _CPUDeviceModule()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """veRL's device interface answered for the host CPU (one "device", gloo collectives)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"

    def current_device(self) -> str:  # type: ignore[override]
        # veRL passes this to ``module.to(device=...)`` and ``torch.device(...)``: an int there means
        # "accelerator n", which does not exist here.
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def use_cpu_platform() -> PlatformCPU:
    """Make :class:`PlatformCPU` veRL's platform in this process (and, via the env var, in children)."""
    os.environ["VERL_PLATFORM"] = "cpu"
    # veRL registers its FSDP engine for "cuda"/"npu"; VERL_ENGINE_DEVICE is its override for that lookup.
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
    platform = PlatformCPU()
    set_platform(platform)
    return platform
