"""The audit trail: one row per started call, written by a background thread
(:mod:`.log`), kept on disk when the store is away (:mod:`.spill`), and flushed when the
process ends (:mod:`.shutdown`)."""
