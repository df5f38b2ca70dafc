"""Which GPUs a CUDA library has code for, read from its binary (issue #45, D214).

nvcc puts a library's device code in the ELF section `.nv_fatbin`: one or more fat binaries (magic 0xBA55ED50,
a 16-byte header, then entries), each entry an SASS cubin for one `sm_XY` or PTX for one `compute_XY`, with the
architecture in its header (the layout cuobjdump lists; https://github.com/n-eiling/cuda-fatbin-decompression).
A GPU of compute capability X.Z runs SASS built for sm_XY with Y <= Z (same major), or JIT-compiles PTX built for
any compute_XY <= X.Z; nothing else.

    python -m repro.ops.cuda_archs faiss_gpu_cu12-1.13.2-....whl     # SASS sm_70 sm_80, PTX none
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import struct
import sys
import urllib.request
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
_SASS, _PTX = 2, 1

# The GPUs docs/gpu.md's runbook names, by compute capability (90 = 9.0)
RUNBOOK_GPUS = {"A100": 80, "A800": 80, "H100": 90, "H200": 90, "B200": 100}
# The libraries of each pinned GPU build whose device code the runs need (FAISS searches on the CPU; D214)
GPU_LIBRARIES = {"torch": ("torch/lib/libtorch_cuda.so",), "vllm": ("vllm/_C_stable_libtorch.abi3.so",)}


@dataclasses.dataclass(frozen=True)
class DeviceCode:
    """The architectures (as integers: 80 = sm_80) a binary carries SASS and PTX for."""

    sass: frozenset[int]
    ptx: frozenset[int]

    def runs_on(self, capability: int) -> bool:
        """Whether a GPU of this compute capability (90 for 9.0) can run the code: SASS of its major at or below
        its minor, or PTX at or below it."""
        return any(arch // 10 == capability // 10 and arch <= capability for arch in self.sass) or any(
            arch <= capability for arch in self.ptx
        )

    @classmethod
    def from_arch_list(cls, archs: list[str]) -> DeviceCode:
        """From torch's `torch.cuda.get_arch_list()`: ["sm_80", "sm_90", "compute_90", ...]."""
        numbers = [(a.split("_")[0], int("".join(c for c in a.split("_")[1] if c.isdigit()))) for a in archs]
        return cls(frozenset(n for kind, n in numbers if kind == "sm"),
                   frozenset(n for kind, n in numbers if kind == "compute"))

    def describe(self) -> str:
        sass = " ".join(f"sm_{a}" for a in sorted(self.sass)) or "none"
        ptx = " ".join(f"compute_{a}" for a in sorted(self.ptx)) or "none"
        return f"SASS {sass}; PTX {ptx}"


def _sections(elf: bytes, name: str) -> list[bytes]:
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a little-endian 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]
    found = []
    for name_at, _type, _flags, _addr, offset, size in headers:
        start = names_offset + name_at
        if elf[start : elf.index(b"\0", start)].decode() == name:
            found.append(elf[offset : offset + size])
    return found


def fatbin_code(fatbins: bytes) -> DeviceCode:
    """The SASS and PTX architectures of the fat binaries in one `.nv_fatbin` section's bytes."""
    sass, ptx, at = set(), set(), 0
    while at + 16 <= len(fatbins):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", fatbins, at)
        if magic != FATBIN_MAGIC:  # padding between fat binaries
            at += 8
            continue
        entry, end = at + header_size, at + header_size + size
        while entry + 32 <= end:
            kind, _flags, entry_header, payload = struct.unpack_from("<HHIQ", fatbins, entry)
            arch, = struct.unpack_from("<I", fatbins, entry + 28)
            {_SASS: sass, _PTX: ptx}.get(kind, set()).add(arch)
            entry += entry_header + payload
        at = end
    return DeviceCode(frozenset(sass), frozenset(ptx))


def library_code(elf: bytes) -> DeviceCode:
    """The device code of one shared library (empty sets for a library with none)."""
    parts = [fatbin_code(section) for section in _sections(elf, ".nv_fatbin")]
    return DeviceCode(
        frozenset().union(*(p.sass for p in parts)), frozenset().union(*(p.ptx for p in parts))
    )


def wheel_code(wheel: str | Path) -> dict[str, DeviceCode]:
    """Each shared library of a wheel that carries device code, by its path in the wheel."""
    found = {}
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if ".so" in Path(member).name:
                code = library_code(archive.read(member))
                if code.sass or code.ptx:
                    found[member] = code
    return found


class _RangeReader(io.RawIOBase):
    """A remote file read through HTTP range requests: a wheel's table of contents and one member cost only their
    own bytes, not the whole wheel's."""

    def __init__(self, url: str):
        self.url, self.position = url, 0
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as response:
            self.size = int(response.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = (offset, self.position + offset, self.size + offset)[whence]
        return self.position

    def readinto(self, buffer) -> int:
        end = min(self.size, self.position + len(buffer)) - 1
        if end < self.position:
            return 0
        headers = {"Range": f"bytes={self.position}-{end}"}
        with urllib.request.urlopen(urllib.request.Request(self.url, headers=headers), timeout=300) as response:
            data = response.read()
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def pypi_wheel_url(package: str, version: str, python: str = "cp311", platform: str = "manylinux") -> str:
    """The URL of `package==version`'s x86-64 Linux wheel for `python` (or an abi3 one) on PyPI."""
    request = urllib.request.Request(f"https://pypi.org/simple/{package}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    prefix = f"{package.replace('-', '_')}-{version}-"
    for f in files:
        name = f["filename"]
        tags = name[len(prefix):]
        if name.startswith(prefix) and platform in name and name.endswith("x86_64.whl") and (
                tags.startswith(f"{python}-") or "-abi3-" in tags):
            return f["url"]
    raise LookupError(f"PyPI lists no {platform} x86_64 wheel of {package}=={version} for {python}")


def remote_wheel_code(url: str, members: tuple[str, ...]) -> dict[str, DeviceCode]:
    """`wheel_code` for the named members of a wheel on a server, reading only them."""
    with zipfile.ZipFile(_RangeReader(url)) as archive:
        return {member: library_code(archive.read(member)) for member in members}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m repro.ops.cuda_archs", description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    for wheel in parser.parse_args(argv).wheels:
        for member, code in sorted(wheel_code(wheel).items()):
            print(f"{wheel.name}: {member}: {code.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
