import pytest

import benchlab.evaluate as evaluate
from benchlab.evaluate.protocol import is_allowed_host

LOOPBACK = ["127.0.0.0/8", "::1", "localhost"]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:30000", True),
        ("http://127.9.9.9", True),
        ("https://localhost:8443/", True),
        ("http://[::1]:30000", True),
        ("http://LOCALHOST:1", True),
        ("http://10.0.0.5:30000", False),
        ("http://169.254.169.254/latest", False),
        ("http://localhost.evil.example", False),
        ("http://user:pw@127.0.0.1:1", False),  # credentials in a URL are refused
        ("file:///etc/passwd", False),
        ("gopher://127.0.0.1:70", False),
        ("http://127.0.0.1:99999", False),  # a malformed port
        ("127.0.0.1:30000", False),
        ("", False),
    ],
)
def test_router_allowlist_matches_loopback_only_by_default(url, allowed):
    assert is_allowed_host(url, LOOPBACK) is allowed


def test_allowlist_entries_may_name_hosts_and_networks():
    assert is_allowed_host("http://slime-main:30000", ["slime-main"])
    assert is_allowed_host("http://10.1.2.3:30000", ["10.0.0.0/8"])
    assert not is_allowed_host("http://10.1.2.3:30000", ["10.1.2.4"])


def test_public_api_is_pinned():
    assert evaluate.__all__ == [
        "EvalConfig",
        "MathVerifyPool",
        "Sandbox",
        "SandboxLimits",
        "SandboxResult",
        "SampleScore",
        "aggregate",
        "create_app",
        "create_stub_app",
        "flatten",
        "load_config",
        "majority_answer",
        "pass_at_k",
        "run_once",
    ]
    for name in evaluate.__all__:
        assert getattr(evaluate, name) is not None
