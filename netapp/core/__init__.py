"""Process-wide pieces of the NetApp: settings."""
