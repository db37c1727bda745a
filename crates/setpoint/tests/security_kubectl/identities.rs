//! (issue 19: identities — filled in by its part)
