"""Secrets kept out of rows, results and messages: the redactor (:mod:`.redactor`), its
patterns (:mod:`.patterns`) and decoded views (:mod:`.views`), and the output guardrail that
scans tool results (:mod:`.scanner`)."""
