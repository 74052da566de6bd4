"""Read-only views of a session: explain's records and text, and the stats."""
