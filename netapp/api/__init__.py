"""The REST front door: a FastAPI app over the `IntentService` contract (netapp.service.contract)."""
