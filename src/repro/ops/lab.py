"""JupyterLab on the repository without reaching the DVC cache (issue #33, D197).

DVC links every output to its cache object (hardlinks, or symlinks; D133), and jupyter_server saves a file by
writing into it in place: `atomic_writing` copies the file aside and then opens the original path for writing, and
a symlink is followed to its target. A save from Lab would so rewrite the cache object behind every checkout of the
output, silently when it runs as root (whom the cache's read-only mode does not stop; `dvc checkout --force` then
restores the changed bytes), and fail with 403 for anyone else. `DetachingContentsManager` gives a linked file its own
copy first (`repro.io.detach`): the save changes only the workspace, the cache stays as it was, and `dvc status`
reports the output as modified.

    jupyter lab --ServerApp.contents_manager_class=repro.ops.lab.DetachingContentsManager     # what `make lab` runs
"""

from __future__ import annotations

import contextlib

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from repro.io import detach


class DetachingContentsManager(AsyncLargeFileManager):
    """jupyter_server's default contents manager, except that a file linked to another name (a DVC output linked to
    its cache) is given its own copy before anything is written into it."""

    @contextlib.contextmanager
    def atomic_writing(self, os_path, *args, **kwargs):
        with self.perm_to_403(os_path):
            detach(os_path)
        with super().atomic_writing(os_path, *args, **kwargs) as file:
            yield file
