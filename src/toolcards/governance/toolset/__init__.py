"""The pydantic-ai toolset of governed calls (:mod:`.governed`), its listing layers
(:mod:`.layers`) and its per-caller listing cache (:mod:`.listing`)."""
