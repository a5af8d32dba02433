"""What an OpenStack VM needs for the NetApp's XDP data plane, checked and prepared with openstacksdk.

`preconditions` says what is required (no OpenStack import), `cloud` connects, `inspector` reads a
server's flavor, image, ports and networks and judges them, `preparer` changes what it can, and
`report` writes the findings for people and for machines. vnfd/openstack.md explains each one.
"""
