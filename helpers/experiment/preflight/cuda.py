"""The CUDA check: where the run asks for device cuda, torch sees a GPU, or the reason and what to install.

The reason is `helpers.backends.qwen3.backend.cuda_unavailable_reason`: a CPU build of torch, no NVIDIA driver, or a
driver older than the CUDA version torch was built for (with the driver or the torch wheel to install).
"""

from __future__ import annotations

from helpers.experiment.run.params import RunParams
from helpers.experiment.preflight.check import PreflightError


def check_cuda(P: RunParams) -> str:
    """A line on the run's device; PreflightError where it asks for CUDA that torch cannot use."""
    import torch

    from helpers.backends.qwen3.backend import cuda_unavailable_reason

    if P.device == "cpu":
        return "device cpu: no CUDA needed"
    if torch.cuda.is_available():
        return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees {torch.cuda.device_count()} GPU(s): "
                f"{torch.cuda.get_device_name(0)}")
    reason = cuda_unavailable_reason()
    if P.device == "auto":
        return f"device auto runs on the CPU here: {reason}"
    raise PreflightError(f"device cuda, but torch sees no GPU: {reason}; or set device: cpu")
