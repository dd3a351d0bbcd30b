"""Test support: real ZooKeeper and service processes as pytest fixtures (``magnetar.testing``)."""
