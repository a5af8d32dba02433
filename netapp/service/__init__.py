"""The NetApp service: desired state, transactions between store and maps, reconciliation."""
