"""Where session state lives: the store protocol and the in-memory store, the Redis store and its
URLs, the circuit breaker."""
