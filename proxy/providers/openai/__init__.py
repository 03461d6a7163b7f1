"""The OpenAI provider: its upstream, credentials and error format, shared by its APIs."""
