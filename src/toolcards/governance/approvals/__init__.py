"""Approvals bound to the exact call: the broker that stores and decides pending requests
(:mod:`.broker`, :mod:`.decisions`), what an approver is shown (:mod:`.view`), an approver's
edit of the arguments (:mod:`.edits`), the audit rows of decisions (:mod:`.records`), and
answers elicited from an MCP client (:mod:`.elicitation`)."""
