"""The systems ``bench/compare.py`` measures side by side: Magnetar and its peers.

Each module holds one :class:`~systems.base.System`; ``base`` holds the interface, the
workloads' shared definitions (pacing, percentiles) and the process plumbing (free ports,
Debian packages, start/stop by PID).
"""
