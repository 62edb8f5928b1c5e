"""The LLM layer: an OpenAI-compatible client, a managed vLLM server, the per-job sandbox gateway, and a
scripted server for tests and offline demos.

How the pieces meet: ``serve.VLLMServer`` (optional) starts a model server; ``client.LLMClient`` talks to it
(or to any OpenAI-compatible endpoint) from the host; ``gateway.Gateway`` gives one sandboxed job a unix
socket that forwards to the same endpoint with the key added and tokens metered against ``usage.TokenMeter``
budgets; ``forwarder.py`` turns that socket into a TCP ``OPENAI_BASE_URL`` inside the sandbox.
"""
