"""Managed ledgers: a topic partition's log as a list of ledgers, and durable cursors on it."""

from magnetar.broker.managedledger.config import ManagedLedgerConfig
from magnetar.broker.managedledger.cursor import ManagedCursor
from magnetar.broker.managedledger.ledger import ManagedLedger
from magnetar.broker.managedledger.position import ManagedLedgerName, Position
from magnetar.broker.managedledger.rangeset import RangeSet

__all__ = ["ManagedCursor", "ManagedLedger", "ManagedLedgerConfig", "ManagedLedgerName", "Position", "RangeSet"]
