"""KnowledgeGraphTool: a team-shared graph of entities and relations with hybrid search."""
