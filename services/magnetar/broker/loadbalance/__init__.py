"""The load manager (Pulsar's ModularLoadManagerImpl): load reports, placement of
unowned bundles, shedding of overloaded brokers, hot-bundle splitting. docs/load-balancing.md"""
