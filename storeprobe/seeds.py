"""The four probes users name, for anything that measures an operation of a workload.

``upload_small``, ``download_small``, ``upload_large`` and ``download_large`` are the
seed comparisons (256 × 16 KiB and 1 × 256 MiB, up and down); a
:class:`~storeprobe.probe.Probe` and a :class:`~storeprobe.distributed.Distributed`
fleet both offer them through :class:`SeedProbes`.
"""

from __future__ import annotations

from storeprobe.result import Result
from storeprobe.workload import Workload

__all__ = ["SeedProbes"]


class SeedProbes:
    """``upload_small`` ... ``download_large`` from the subclass's ``upload`` and
    ``download`` (on a fleet, each worker moves the workload)."""

    __slots__ = ()

    def upload(self, workload: Workload) -> Result:
        """Time writing ``workload``."""
        raise NotImplementedError

    def download(self, workload: Workload) -> Result:
        """Time reading ``workload`` back."""
        raise NotImplementedError

    def upload_small(self) -> Result:
        """Upload 256 × 16 KiB."""
        return self.upload(Workload.small())

    def download_small(self) -> Result:
        """Download 256 × 16 KiB."""
        return self.download(Workload.small())

    def upload_large(self) -> Result:
        """Upload 1 × 256 MiB."""
        return self.upload(Workload.large())

    def download_large(self) -> Result:
        """Download 1 × 256 MiB."""
        return self.download(Workload.large())
