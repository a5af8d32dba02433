"""Intents: the northbound models (native and legacy), the document format and the pure compiler."""
