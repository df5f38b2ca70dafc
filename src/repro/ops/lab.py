"""JupyterLab on the repository that leaves what DVC tracks as it was (issues #33 and #48, D197, D232).

    python -m repro.ops.lab [jupyter lab options]     # what `make lab` runs, from the repository root

A look at a run must not change it. Outputs are DVC-tracked directories (results/<profile>/<stage>/, data/...) whose
files link to their cache objects (hardlinks, or symlinks; D133), and plain JupyterLab writes into them three ways:

- opening a file makes a checkpoint in a `.ipynb_checkpoints/` beside it, inside the output, which `dvc status`
  then reports as modified (and every stage depending on it as changed): `OutsideCheckpoints` keeps the checkpoints
  under `CHECKPOINT_ROOT` in the layout of the files they copy, and `.dvcignore` hides any `.ipynb_checkpoints/`
  that another front end writes;
- jupyter_server saves (and restores a checkpoint) by writing into the file in place, through the link into the
  cache object (as root silently, whom the cache's read-only mode does not stop; for anyone else a 403): a linked
  file gets its own copy first (`repro.io.detach`), so that a save changes only the workspace, and `dvc status`
  reports that one output as modified;
- a kernel starts in the notebook's directory, where an executed copy's relative paths (`out_dir`, data/<profile>/)
  point inside the output: `RepositoryKernelManager` starts every kernel at the repository root, where the stage ran
  it (repro.ops.notebooks).

Lab's other writes (workspaces, the kernel's connection files, IPython's history, the notebook signatures) go under
the user's home, outside the repository.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from jupyter_core.utils import ensure_dir_exists
from jupyter_server.services.contents.filecheckpoints import AsyncFileCheckpoints
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from traitlets import default

from repro.io import detach

CHECKPOINT_ROOT = Path(".cache") / "lab" / "checkpoints"  # under the Lab's root; git-ignored, in no DVC output
LAB_OPTIONS = ("--ServerApp.contents_manager_class=repro.ops.lab.DetachingContentsManager",
               "--ServerApp.kernel_manager_class=repro.ops.lab.RepositoryKernelManager")


class OutsideCheckpoints(AsyncFileCheckpoints):
    """Jupyter's file checkpoints under <root>/CHECKPOINT_ROOT/<the file's directory>/ instead of beside the file;
    restoring one into a linked file gives the file its own copy first."""

    @default("root_dir")
    def _root_dir_default(self):
        return os.path.join(self.parent.root_dir, CHECKPOINT_ROOT)

    def checkpoint_path(self, checkpoint_id, path):
        # jupyter_server falls back to the system's temporary directory when the checkpoint's parent directory is
        # not writable, which a directory not yet mirrored under the root is not: create it first
        parent = ("/" + path.strip("/")).rsplit("/", 1)[0].strip("/")
        with self.perm_to_403():
            ensure_dir_exists(self._get_os_path(parent))
        return super().checkpoint_path(checkpoint_id, path)

    async def restore_checkpoint(self, contents_mgr, checkpoint_id, path):
        os_path = contents_mgr._get_os_path(path)
        with self.perm_to_403(os_path):
            detach(os_path)
        await super().restore_checkpoint(contents_mgr, checkpoint_id, path)


class DetachingContentsManager(AsyncLargeFileManager):
    """jupyter_server's default contents manager, except that a file linked to another name (a DVC output linked to
    its cache) is given its own copy before anything is written into it, and checkpoints are `OutsideCheckpoints`."""

    @default("checkpoints_class")
    def _checkpoints_class_default(self):
        return OutsideCheckpoints

    @contextlib.contextmanager
    def atomic_writing(self, os_path, *args, **kwargs):
        with self.perm_to_403(os_path):
            detach(os_path)
        with super().atomic_writing(os_path, *args, **kwargs) as file:
            yield file


class RepositoryKernelManager(AsyncMappingKernelManager):
    """Kernels start at the Lab's root, the repository, whichever notebook they run: the working directory of the
    stage that executed it."""

    def cwd_for_path(self, path, **kwargs):
        return self.root_dir


def main(argv: list[str] | None = None) -> None:
    from jupyterlab.labapp import LabApp

    LabApp.launch_instance(argv=[*LAB_OPTIONS, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
