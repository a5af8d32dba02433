"""One router per resource; netapp.api.main joins them."""
