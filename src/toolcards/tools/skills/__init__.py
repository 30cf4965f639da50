"""SkillTool: a menu of named skills."""
