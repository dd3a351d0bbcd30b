"""The bookie server's request figures, as BookKeeper's ``bookkeeper_server`` scope keeps
them (``ADD_ENTRY_REQUEST``, ``READ_ENTRY_REQUEST``), counted by the gRPC door."""

from __future__ import annotations

from magnetar.common.opstats import OpStats


class ServerStats:
    """The requests a bookie server answered, with their latencies in seconds."""

    __slots__ = ("add_entry_request", "read_entry_request")

    def __init__(self) -> None:
        self.add_entry_request = OpStats()
        """One per add request (a batch of entries), from its arrival to its answer."""
        self.read_entry_request = OpStats()
        """One per read request (one entry, a range or a list), from arrival to its last answer."""
