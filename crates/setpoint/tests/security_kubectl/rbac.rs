//! (issue 19: rbac — filled in by its part)
