import pytest

from netapp.upf.flows import FlowError, parse_flow


def test_a_flow_description_with_prefix_ports_and_assigned_is_parsed():
    flow = parse_flow("permit out 6 from 198.51.100.0/24 80,1000-2000 to assigned")
    assert flow.protocol == 6
    assert flow.source.network == "198.51.100.0/24"
    assert flow.source.ports == ((80, 80), (1000, 2000))
    assert flow.destination.assigned and flow.destination.network is None


def test_ipv6_and_any_are_taken():
    flow = parse_flow("permit out ip from 2001:db8::1 to any")
    assert flow.protocol is None
    assert flow.source.network == "2001:db8::1/128"


@pytest.mark.parametrize(
    "text, says",
    [
        ("deny out ip from any to any", "permit out"),
        ("permit in ip from any to any", "permit out"),
        ("permit out tcp from any to any", "protocol 'tcp'"),
        ("permit out ip from 10.0.0.300 to any", "address '10.0.0.300'"),
        ("permit out ip from any to any frag", "options"),
        ("permit out ip from !10.0.0.1 to any", "negation"),
        ("permit out ip from any 80 to any", "ports need protocol"),
        ("permit out 6 from any 70000 to any", "0..65535"),
        ("permit out 6 from any to", "missing"),
    ],
)
def test_a_flow_description_outside_the_grammar_is_refused_naming_the_word(text, says):
    with pytest.raises(FlowError) as refused:
        parse_flow(text)
    assert says in str(refused.value)
