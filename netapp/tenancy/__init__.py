"""Tenancy: the traffic each tenant owns, the quotas it has, and keeping its rules inside them."""
