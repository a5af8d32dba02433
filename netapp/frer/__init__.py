"""FRER, IEEE 802.1CB frame replication and elimination: the data path's ABI (abi), the reference
model of sequence recovery (model), the streams as a tenant states them (models), their map entries
(compiler, slots), an intent's protection of its flow as a stream (protect), the stored streams
(store, schema), the maps' writer and reader (table), what a tenant may use (scope), the service
over them (service), the REST router (routes) and the CLI (cli)."""
