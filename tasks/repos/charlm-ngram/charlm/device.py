"""Choosing the array backend: numpy on CPU, CuPy on CUDA GPUs."""

import os
import shutil


def cuda_available():
    return shutil.which("nvidia-smi") is not None and os.path.exists("/dev/nvidia0")


def get_backend(device):
    """Return the array module for `device` ('cpu' or 'cuda[:N]')."""
    if device == "cpu":
        import numpy

        return numpy
    if device.startswith("cuda"):
        if not cuda_available():
            raise RuntimeError(f"CUDA device '{device}' requested but no CUDA GPU is available")
        import cupy

        return cupy
    raise ValueError(f"unknown device {device!r}")
