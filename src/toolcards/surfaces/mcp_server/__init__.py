"""The MCP server wing: governed tools, resources and prompts over stdio and streamable HTTP.

Imports the shared surfaces modules (runtime, config, outcomes, approval, http) and never
another wing; :mod:`toolcards.surfaces.serving` and :mod:`toolcards.surfaces.combined`
put it together with the others.
"""
