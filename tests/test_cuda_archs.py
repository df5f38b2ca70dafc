"""The device code of the pinned GPU builds, read from their binaries (issue #45, D214).

A synthetic ELF file laid out as nvcc writes one (a `.nv_fatbin` section of fat binaries) checks the reader; the
pinned torch and vLLM wheels are then read from PyPI (only the libraries named in `GPU_LIBRARIES`, by HTTP range
requests) and must have code for every GPU the runbook names.
"""

import struct
import urllib.error

import pytest
from test_environment_pins import gpu_pins

from repro.ops.cuda_archs import (FATBIN_MAGIC, GPU_LIBRARIES, RUNBOOK_GPUS, DeviceCode, library_code,
                                  pypi_wheel_url, remote_wheel_code)


def fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A fat binary of (kind, arch) entries, kind 2 = SASS, 1 = PTX, each with a few payload bytes."""
    body = b""
    for kind, arch in entries:
        payload = bytes(24)
        header = struct.pack("<HHIQIIHHI", kind, 0x0101, 64, len(payload), 0, 0, 0, 0, arch)
        body += header.ljust(64, b"\0") + payload
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes]) -> bytes:
    """A little-endian ELF64 file holding `sections` and its section-name table."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in [*sections, ".shstrtab"])
    data, offsets, at = b"", [], 64
    for content in [*sections.values(), names]:
        offsets.append(at + len(data))
        data += content
    shoff = 64 + len(data)
    name_at = [names.index(name.encode() + b"\0") for name in [*sections, ".shstrtab"]]
    headers = bytes(64)  # the null section
    for name, offset, content in zip(name_at, offsets, [*sections.values(), names]):
        headers += struct.pack("<IIQQQQIIQQ", name, 1, 0, 0, offset, len(content), 0, 0, 1, 0)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = header.ljust(0x28, b"\0") + struct.pack("<Q", shoff)
    header = header.ljust(0x3A, b"\0") + struct.pack("<HHH", 64, len(sections) + 2, len(sections) + 1)
    return header.ljust(64, b"\0") + data + headers


def test_the_reader_finds_each_fat_binarys_sass_and_ptx_architectures():
    section = fatbin([(2, 70), (2, 80)]) + bytes(8) + fatbin([(2, 90), (1, 90)])  # padding between the two
    code = library_code(elf({".text": b"\x90" * 16, ".nv_fatbin": section}))
    assert code == DeviceCode(frozenset({70, 80, 90}), frozenset({90}))
    assert library_code(elf({".text": b"\x90"})) == DeviceCode(frozenset(), frozenset())


def test_a_gpu_runs_sass_of_its_major_at_or_below_its_minor_or_older_ptx():
    faiss_gpu_cu12_1_13_2 = DeviceCode(frozenset({70, 80}), frozenset())  # what its wheel holds (D214)
    assert faiss_gpu_cu12_1_13_2.runs_on(80) and faiss_gpu_cu12_1_13_2.runs_on(86)
    assert not faiss_gpu_cu12_1_13_2.runs_on(90) and not faiss_gpu_cu12_1_13_2.runs_on(100)  # Hopper, Blackwell
    with_ptx = DeviceCode(frozenset({80, 90}), frozenset({90}))
    assert with_ptx.runs_on(100) and not with_ptx.runs_on(75)
    assert DeviceCode.from_arch_list(["sm_80", "sm_90a", "compute_90"]) == with_ptx


@pytest.mark.slow
@pytest.mark.parametrize("package", sorted(GPU_LIBRARIES))
def test_the_pinned_gpu_builds_have_code_for_every_gpu_of_the_runbook(package):
    """Reads about 300 MB from PyPI for torch, less for vLLM (seconds where PyPI is near); skipped without it."""
    version = gpu_pins()[package]
    try:
        code = remote_wheel_code(pypi_wheel_url(package, version), GPU_LIBRARIES[package])
    except (urllib.error.URLError, TimeoutError) as err:
        pytest.skip(f"PyPI unreachable: {err}")
    missing = {f"{member} ({c.describe()})": [gpu for gpu, cap in RUNBOOK_GPUS.items() if not c.runs_on(cap)]
               for member, c in code.items()}
    assert not any(missing.values()), f"{package}=={version}: no code for {missing}"
