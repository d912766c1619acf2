"""What a benchmark ran on: one description shared by every script in `benchmarks/`.

Example:

>>> from machine import describe_machine, machine_line
>>> info = describe_machine()          # a dict, for a JSON report
>>> print(machine_line(info))          # one line, for a log
"""

import importlib.metadata
import os
import platform
import sys

PACKAGES = ("tensorflow", "tensorflow-text", "keras", "keras-hub", "torch", "jax", "sacrebleu")
# Environment variables that change what a benchmark measures (threads, XLA options, the Keras backend).
VECTOR_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile")
SETTINGS_PREFIXES = ("TF_XLA_", "TF_NUM_", "TF_ENABLE_", "XLA_FLAGS", "OMP_", "KERAS_BACKEND", "CT2_")


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_vector_flags():
    """The CPU's vector and low-precision units that decide a benchmark's speed (AVX2, AVX-512, bf16, VNNI, AMX)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        return []
    return sorted(flag for flag in flags if flag in VECTOR_FLAGS)


def tf_cpu_allocator(tf):
    """ "bfc" or "default": the CPU allocator the running TensorFlow uses (only BFC keeps statistics)."""
    try:
        tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:
        return "default"
    return "bfc"


def describe_machine():
    """Host, CPU, cores, load, accelerators, TensorFlow's CPU allocator, package versions and settings, as a dict."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    tf = sys.modules.get("tensorflow")  # GPUs as the running TensorFlow sees them, if it is loaded
    gpus = [device.name for device in tf.config.list_physical_devices("GPU")] if tf else []
    return {
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpu_flags": cpu_vector_flags(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "gpus": gpus,
        "tf_cpu_allocator": tf_cpu_allocator(tf) if tf else None,  # None: TensorFlow not loaded
        "versions": versions,
        "settings": {name: value for name, value in sorted(os.environ.items()) if name.startswith(SETTINGS_PREFIXES)},
    }


def machine_line(info=None):
    """`describe_machine()` on one line."""
    info = info or describe_machine()
    versions = ", ".join(f"{name} {version}" for name, version in info["versions"].items())
    flags = " ".join(info.get("cpu_flags", []))
    return (
        f"{info['host']} | {info['cpu']} ({flags}) | {info['cpus']} CPUs ({info['cpus_usable']} usable, "
        f"load {info['load_average_1min']}) | GPUs: {', '.join(info['gpus']) or 'none'} | "
        f"TensorFlow CPU allocator: {info['tf_cpu_allocator']} | {versions}"
        + "".join(f" | {name}={value}" for name, value in info.get("settings", {}).items())
    )
