"""What a session keeps between turns: its durable state, the small records in it, and the
fingerprints of its requests."""
