"""Credentials are masked wherever text leaves the process; ordinary settings are left alone."""

import pytest

from grasp_core.redact import is_secret_key, one_line_error, redact


@pytest.mark.parametrize(
    "text, masked",
    [
        ("cannot connect to bolt://neo4j:hunter2@db:7687", "cannot connect to bolt://neo4j:***@db:7687"),
        ("postgresql://u:p%40ss@h/db?x=1", "postgresql://u:***@h/db?x=1"),
        ("password=hunter2, NEO4J_PASSWORD: hunter2", "password=***, NEO4J_PASSWORD: ***"),
        ("{'api_key': 'sk-123', 'token': 'abc'}", "{'api_key': '***', 'token': '***'}"),
        ("max_new_tokens=700 tokenizer_node_texts=2000 bolt://db:7687", None),  # nothing secret
    ],
)
def test_redact(text, masked):
    assert redact(text) == (text if masked is None else masked)


def test_secret_keys_are_told_apart_from_settings_named_like_them():
    assert [is_secret_key(k) for k in ("graph_store.password", "hf_token", "api_key", "client_secret")] == [True] * 4
    assert not any(is_secret_key(k) for k in ("graph_store.uri", "max_input_tokens", "tokenizer_node_texts", "author"))


def test_one_line_error_is_one_redacted_line():
    assert one_line_error(ValueError("bad uri bolt://a:b@c\nsecond line")) == "ValueError: bad uri bolt://a:***@c"
