//! GitRepository: resolving refs, artifacts, conditions (tests owned by the source loop).
