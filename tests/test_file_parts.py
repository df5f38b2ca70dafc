"""A binary kept in git is written in parts under 2 MiB (`repro.io.write_parts`) and read back whole, every part and
the whole checked (`read_parted`); the repository tracks no larger file (the warm-up adapter of a recorded arm, D246)."""

import hashlib
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.io import PART_BYTES, InputError, parts_index, read_json, read_parted, write_json, write_parts

ROOT = Path(__file__).resolve().parents[1]


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=64), part_bytes=st.integers(1, 9))
def test_the_parts_join_into_the_same_bytes(tmp_path_factory, data, part_bytes):
    directory = tmp_path_factory.mktemp("parts")
    (directory / "source").write_bytes(data)
    index = read_json(write_parts(directory / "source", directory / "weights", part_bytes))
    assert index["sha256"] == hashlib.sha256(data).hexdigest() and index["bytes"] == len(data)
    assert len(index["parts"]) == max(1, -(-len(data) // part_bytes))
    assert all(len((directory / name).read_bytes()) <= part_bytes for name in index["parts"])
    assert read_parted(directory / "weights") == data


def test_a_whole_file_is_read_as_it_is(tmp_path):
    (tmp_path / "weights").write_bytes(b"whole")
    assert read_parted(tmp_path / "weights") == b"whole"
    with pytest.raises(FileNotFoundError):
        read_parted(tmp_path / "absent")  # neither whole nor in parts


def test_a_damaged_or_missing_part_or_index_is_refused_naming_it(tmp_path):
    (tmp_path / "source").write_bytes(bytes(range(10)))
    index = write_parts(tmp_path / "source", tmp_path / "weights", part_bytes=4)
    weights = tmp_path / "weights"
    part = tmp_path / "weights.part-01"
    part.write_bytes(b"\x00\x00\x00\x00")
    with pytest.raises(InputError, match=rf"^{part}: its sha256 is not the one"):
        read_parted(weights)
    part.unlink()
    with pytest.raises(FileNotFoundError, match=rf"^{part}: {index} lists it, but the part is missing"):
        read_parted(weights)
    write_parts(tmp_path / "source", weights, part_bytes=4)
    entry = read_json(index)
    write_json(index, entry | {"sha256": "0" * 64})
    with pytest.raises(InputError, match=rf"^{index}: field 'sha256': the joined parts"):
        read_parted(weights)
    write_json(index, entry | {"parts": {}})
    with pytest.raises(InputError, match=rf"^{index}: field 'parts': lists no parts"):
        read_parted(weights)
    assert parts_index(weights) == index


def test_the_repository_tracks_no_file_over_2_mib():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    paths = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    assert paths, "git lists no tracked file"
    large = [str(path.relative_to(ROOT)) for path in paths if path.is_file() and path.stat().st_size > 2 * PART_BYTES]
    assert large == [], f"tracked files over 2 MiB (write them in parts, repro.io.write_parts): {large}"
