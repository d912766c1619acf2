"""The CPU's low-precision units: which bf16 and int8 instruction sets `/proc/cpuinfo` reports.

bf16 products run on `avx512_bf16` (AVX-512 BF16) or `amx_bf16` (AMX); int8
products on `avx512_vnni`, `avx_vnni` (VNNI) or `amx_int8` (AMX). Training
(`training.precision`) and decoding (`translators.precision`) choose their
routes by these.

Example:

>>> units("bfloat16", cpuinfo_path="/nonexistent")  # no cpuinfo: no units known
()
>>> sorted(UNITS)
['bfloat16', 'int8']
"""

UNITS = {
    "bfloat16": ("amx_bf16", "avx512_bf16"),
    "int8": ("amx_int8", "avx512_vnni", "avx_vnni"),
}


def cpu_flags(cpuinfo_path="/proc/cpuinfo"):
    """The flags of the first CPU in `cpuinfo_path`, as a frozenset; empty if it cannot be read."""
    try:
        with open(cpuinfo_path) as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def units(precision, cpuinfo_path="/proc/cpuinfo"):
    """The instruction sets of `UNITS[precision]` this CPU reports, sorted; () if none."""
    return tuple(sorted(cpu_flags(cpuinfo_path).intersection(UNITS[precision])))
