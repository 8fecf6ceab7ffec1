"""storeprobe: honest storage-throughput probes over any fsspec filesystem.

>>> from storeprobe import Probe
>>> probe = Probe.from_url("memory://bench", repeats=1)
>>> probe.upload_small().ok
True
"""

from __future__ import annotations

from storeprobe._version import __version__
from storeprobe.backends.s3_endpoint import S3Credentials, S3Endpoint
from storeprobe.comparison import Report, compare_results
from storeprobe.cost import Cost, PriceSheet, price_sheets, scenario_cost
from storeprobe.dataset import Image, Sizes, Tree
from storeprobe.distributed import Distributed
from storeprobe.environment import Environment
from storeprobe.errors import (
    ConfigurationError,
    MissingDependencyError,
    ResultFormatError,
    StoreProbeError,
    StoreProbeWarning,
    TargetError,
    TargetNotFoundError,
    TargetPermissionError,
    TargetUnreachableError,
    UnitError,
)
from storeprobe.named_target import NamedTarget
from storeprobe.notices import Code, Notice
from storeprobe.probe import Probe
from storeprobe.rclone_config import RcloneConfig
from storeprobe.result import (
    SCHEMA_VERSION,
    Fleet,
    Member,
    Result,
    Sample,
    dump_results,
    load_results,
)
from storeprobe.resultset import ResultSet, Saturation
from storeprobe.settings import Settings
from storeprobe.step import Step
from storeprobe.strategy import Strategy
from storeprobe.subject import Subject
from storeprobe.target import Target
from storeprobe.targets_file import TargetsFile
from storeprobe.timeline import Timeline
from storeprobe.units import format_rate, format_size, parse_size
from storeprobe.workload import Workload

__all__ = [
    "SCHEMA_VERSION",
    "Code",
    "ConfigurationError",
    "Cost",
    "Distributed",
    "Environment",
    "Fleet",
    "Image",
    "Member",
    "MissingDependencyError",
    "NamedTarget",
    "Notice",
    "PriceSheet",
    "Probe",
    "RcloneConfig",
    "Report",
    "Result",
    "ResultFormatError",
    "ResultSet",
    "S3Credentials",
    "S3Endpoint",
    "Sample",
    "Saturation",
    "Settings",
    "Sizes",
    "Step",
    "StoreProbeError",
    "StoreProbeWarning",
    "Strategy",
    "Subject",
    "Target",
    "TargetError",
    "TargetNotFoundError",
    "TargetPermissionError",
    "TargetUnreachableError",
    "TargetsFile",
    "Timeline",
    "Tree",
    "UnitError",
    "Workload",
    "__version__",
    "compare_results",
    "dump_results",
    "format_rate",
    "format_size",
    "load_results",
    "parse_size",
    "price_sheets",
    "scenario_cost",
]
