"""PFCP (3GPP TS 29.244), the N4 interface: the codec adapter, the messages and the UDP endpoint."""
