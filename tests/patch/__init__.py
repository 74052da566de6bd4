"""The patch layer: what the SDKs send under ``telos_wrap.patch()`` (src/telos_wrap/patch)."""
