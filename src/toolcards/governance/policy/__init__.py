"""The policy: ACL rules and rate limits as data (:mod:`.policy`), parsed and checked from
YAML (:mod:`.parse`), indexed for fast decisions (:mod:`.index`), and policy tables that run
rows of expected decisions against it (:mod:`.table`)."""
