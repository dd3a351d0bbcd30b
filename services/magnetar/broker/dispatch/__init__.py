"""Dispatchers: which consumer of a subscription gets which entries, within its permits."""
