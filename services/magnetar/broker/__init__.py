"""The broker: topics, managed ledgers, cursors, dispatchers."""
