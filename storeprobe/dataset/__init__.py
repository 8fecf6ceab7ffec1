"""Datasets that evolve: file trees and disk images, versioned, with reproducible content.

A backup probe needs more than N fresh objects of one size: it needs a tree of files
whose sizes look like real ones, and its next version, where some files changed, some
were added and some deleted; or a disk image of which a few blocks were rewritten.
Everything here is pure computation (no I/O, except :meth:`Tree.from_directory`, which
reads sizes and never content):

- :class:`Sizes`: a distribution of file sizes (fixed, uniform, lognormal, an explicit
  list, a histogram);
- :class:`File`: one file of a version: path, size and *generation*;
- :class:`Tree`: files under a directory, generated, shaped like a source tree, or
  taken from a real directory; :meth:`Tree.evolve` gives the next version;
- :class:`Image`: one large file (``disk.img``) in blocks, each with its generation;
  :meth:`Image.evolve` rewrites a fraction of the blocks in place;
- :class:`Changes`: what differs between two versions (:meth:`Tree.diff`);
- :func:`content`: a file's bytes in pieces through one reused buffer.

Content is generated like :mod:`storeprobe.workload` payloads (numpy SFC64, one
independently seeded 1 MiB block at a time, so incompressible and producible in
pieces), from a different domain constant:

- a tree file's bytes are a function of ``(seed, path, generation)`` only, so a file
  that did not change keeps its exact bytes in every later version, a changed file gets
  new bytes, and any version's file can be regenerated (and verified) from any tree of
  the same seed; a file rewritten in place (:meth:`Tree.evolve` with ``rewrite``) keeps
  the bytes of the generations in its ``history`` outside a few regions
  (:mod:`storeprobe.dataset.regions`);
- an image's block ``b`` is a function of ``(seed, b, generations[b])``.

A file's generation is the version that last wrote it: 0 for the files of the first
version, ``v`` for a file added or changed by the evolution that made version ``v``.
"""

from __future__ import annotations

from typing import Any

from storeprobe.dataset._common import IMAGE_PATH, Changes, Dataset, File, content
from storeprobe.dataset.image import Image
from storeprobe.dataset.layout import SOURCE_TREE, SourceTreeShape
from storeprobe.dataset.tree import Tree
from storeprobe.errors import ConfigurationError
from storeprobe.sizes import Sizes

__all__ = [
    "IMAGE_PATH",
    "SOURCE_TREE",
    "Changes",
    "Dataset",
    "File",
    "Image",
    "Sizes",
    "SourceTreeShape",
    "Tree",
    "content",
    "dataset_from_dict",
]


def dataset_from_dict(data: dict[str, Any]) -> Tree | Image:
    """A :class:`Tree` or :class:`Image` from its ``to_dict()`` (by its ``kind``)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "tree":
        return Tree.from_dict(data)
    if kind == "image":
        return Image.from_dict(data)
    raise ConfigurationError(f"unknown dataset kind {kind!r}: expected 'tree' or 'image'")
