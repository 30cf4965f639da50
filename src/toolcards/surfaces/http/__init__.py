"""What the HTTP surfaces (the MCP server over HTTP and the dashboard) share: bearer tokens
(:mod:`.tokens`), the caller of a request (:mod:`.auth`, with OAuth resource-server tokens in
:mod:`.oauth`, :mod:`.oauth_config` and :mod:`.jwks`), the bounds on clients (:mod:`.limits`,
:mod:`.guard`), the uvicorn server (:mod:`.server`) and the listening socket (:mod:`.ports`).

A shared folder: it imports no wing and no module that composes the wings.
"""
