"""Layer 1, lift: SDK request bodies to the TELOS IR (src/telos_wrap/lift)."""
