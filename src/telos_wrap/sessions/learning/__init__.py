"""What sessions learn from traffic: volatile values and spans, the schema order first seen, and
fleet learning across the conversations of an application."""
