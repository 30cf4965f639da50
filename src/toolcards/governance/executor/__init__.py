"""The governed executor: one pipeline for every call from every surface (:mod:`.pipeline`)."""
