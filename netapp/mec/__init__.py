"""ETSI MEC front doors: MEC 011 (Mp1) application instances and their traffic rules, compiled onto intents."""
