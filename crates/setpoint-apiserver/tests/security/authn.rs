//! (issue 19: authn — filled in by its part)
