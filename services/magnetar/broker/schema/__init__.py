"""The schema registry's decisions: compatibility strategies and checks (pure, no ZooKeeper)."""
