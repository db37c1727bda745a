//! The reference model: every change kept in a list, every read recomputed from it. Slow and
//! obviously correct; the randomized tests compare the real backends with it.

/// The in-memory reference model of a [`Store`](crate::Store).
#[derive(Clone, Default)]
pub struct ModelStore {}
