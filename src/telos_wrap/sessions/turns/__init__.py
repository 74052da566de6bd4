"""One request of a session, as pure functions: the turn, cache-break detection, pins and folds, the
other calls' steps, and I2 on the wire."""
