"""Unit tests: pure, a few seconds, no cluster, no root; the only place the API client is faked."""
