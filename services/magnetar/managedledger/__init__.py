"""Managed ledgers: a topic partition's log as a list of ledgers, and durable cursors on it."""

from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.cursor import ManagedCursor
from magnetar.managedledger.ledger import ManagedLedger
from magnetar.managedledger.position import ManagedLedgerName, Position
from magnetar.managedledger.rangeset import RangeSet

__all__ = ["ManagedCursor", "ManagedLedger", "ManagedLedgerConfig", "ManagedLedgerName", "Position", "RangeSet"]
