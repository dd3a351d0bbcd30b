"""ZooKeeper metadata through kazoo: znode paths, JSON codecs, versioned writes, registrations."""
