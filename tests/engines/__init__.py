"""Layer 3, engines: the IR to wire bodies, and wire usage to a UsageReport (src/telos_wrap/engines)."""
