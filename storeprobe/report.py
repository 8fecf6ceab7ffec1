"""Transitional alias: :class:`ResultSet` lives in :mod:`storeprobe.resultset`.

Kept only while ``storeprobe.probe`` imports it from here; import
``storeprobe.ResultSet`` or ``storeprobe.resultset.ResultSet`` instead.
"""

from __future__ import annotations

from storeprobe.resultset import ResultSet

__all__ = ["ResultSet"]
