"""The data plane from Python: the C ABI binding (binding), the facade (facade), a no-kernel fake."""
