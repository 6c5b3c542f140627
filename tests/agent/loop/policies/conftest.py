"""tiny_server (a real `transformers serve` on loopback) lives in tests/conftest.py: the studio's
end-to-end agent test uses the same session-wide server."""
