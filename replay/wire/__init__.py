"""The wire level: what a provider model actually sends over HTTP, recorded, replayed and compared.

``capture`` wraps the HTTP clients during a session, ``store`` keeps the exchanges in the
cassette, ``serve`` answers a replay from them (the installed pydantic-ai-slim builds each
request for real), ``compare`` diffs the bodies and ``cache`` estimates the prompt-cache
prefix and the cost of each request.
"""
