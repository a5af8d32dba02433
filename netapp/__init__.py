"""DPP NetApp: intent-driven XDP data-plane acceleration for the 5G edge."""

__version__ = "0.1.0"
