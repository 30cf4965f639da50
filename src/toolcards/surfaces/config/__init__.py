"""The surfaces' config: the YAML file every surface reads (:mod:`.model`), its one file read
(:mod:`.file`), its validation errors as one line each (:mod:`.hints`), and the governance
state every process of one config shares (:mod:`.shared`)."""

from toolcards.surfaces.config.model import (
    APPROVER_ROLE,
    DEFAULT_CONFIG,
    OWN_CARD_HINT,
    ConfigError,
    Principals,
    PrincipalSpec,
    SessionLimits,
    SurfaceConfig,
    TokenSpec,
    hash_token,
    load_config,
    new_token,
    parse_config,
)

__all__ = [
    "APPROVER_ROLE",
    "DEFAULT_CONFIG",
    "OWN_CARD_HINT",
    "ConfigError",
    "PrincipalSpec",
    "Principals",
    "SessionLimits",
    "SurfaceConfig",
    "TokenSpec",
    "hash_token",
    "load_config",
    "new_token",
    "parse_config",
]
