"""The run folder, local or on blob storage.

Files are written to a local folder: the run folder itself when ``--out`` is a path (local
disk or an NFS mount), or a staging folder under the landcover cache when ``--out`` is a blob
URL, from which :meth:`RunFolder.publish` uploads them after each epoch (TensorBoard and
matplotlib write local files). Checkpoints go straight to their final place with one atomic
write each (a rename on disk; a single block-blob commit on Azure).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from landcover import storage
from landcover.diskerrors import check_output_folder
from landcover.fileio import remove_stale_temporaries
from landcover.synthetic.sample import cache_root


class RunFolder:
    """Where a run's files go.

    Args:
        out: The run folder: a path or a blob URL.
        check: Create the local (or staging) folder and check that it can be written now;
            without it nothing is created until :meth:`check` (to look for a checkpoint
            before any file is written). A process builds its run folder once and hands it
            down (launcher, worker, trainer).

    Raises:
        OutputError: If the (local or staging) folder cannot be created or written.
    """

    def __init__(self, out: str, check: bool = True) -> None:
        self.url = out.rstrip("/")
        self.remote = storage.is_remote(out)
        if self.remote:
            key = hashlib.sha256(self.url.encode()).hexdigest()[:16]
            self.local = cache_root() / "runs" / key
        else:
            self.local = Path(out)
        self.checked = False
        if check:
            self.check()

    def check(self) -> None:
        """Creates the local (or staging) folder and checks that it can be written, once.

        Raises:
            OutputError: If the folder cannot be created or written, or is full.
        """
        if not self.checked:
            check_output_folder(self.local)  # one line if read-only, not writable or full
            self.checked = True

    def path(self, *parts: str) -> Path:
        """A local file of the run (in the staging folder for a remote run)."""
        return self.local.joinpath(*parts)

    def url_of(self, *parts: str) -> str:
        """The final location of a file of the run."""
        return storage.join(self.url, *parts) if self.remote else str(self.local.joinpath(*parts))

    def publish(self, *relative: str) -> None:
        """Uploads local files (or every file of local folders) of a remote run.

        Args:
            relative: Paths relative to the run folder; missing ones are skipped.
        """
        if not self.remote:
            return
        for rel in relative:
            path = self.path(rel)
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for file in files:
                if file.is_file():
                    storage.upload_file(file, self.url_of(*file.relative_to(self.local).parts))

    def pull(self, relative: str) -> None:
        """Downloads a file of a remote run into the staging folder (if it exists remotely).

        Args:
            relative: Path relative to the run folder.
        """
        if self.remote and storage.is_file(self.url_of(relative)):
            storage.download_file(self.url_of(relative), self.path(relative))

    def write_checkpoint(self, name: str, data: bytes) -> None:
        """Writes ``checkpoints/{name}`` atomically at its final place."""
        storage.write_bytes(self.url_of("checkpoints", name), data)

    def checkpoint_names(self, clean: bool = True) -> list[str]:
        """Names of the checkpoint files present.

        Args:
            clean: Remove the stale temporaries of a local run first (only the worker holding
                the folder's lock may: another job's may be live).

        Returns:
            The ``.pt`` names, sorted.
        """
        folder = self.url_of("checkpoints")
        if clean and not self.remote:
            remove_stale_temporaries(folder)
        if not storage.exists(folder):
            return []
        names = [storage.name(u) for u in storage.listdir(folder)]
        return sorted(n for n in names if n.endswith(".pt") and not n.startswith("."))

    def remove_checkpoint(self, name: str) -> None:
        """Deletes ``checkpoints/{name}``."""
        storage.remove(self.url_of("checkpoints", name))
