//! Owner references, for controllers that own other objects: the controller reference of an
//! object ([`controller_ref`], [`controller_ref_of_kind`]), the reference that makes an owner
//! the controller ([`controller_ref_to`]), whether one object controls another
//! ([`is_controlled_by`]), and the claim step that adopts selected orphans and releases owned
//! objects no longer selected ([`decide`] for one candidate, [`claim`] to patch them all).
//!
//! Layout: `refs` (reading and writing references, the claim decision — no I/O), `claim` (the
//! patches), `kind` (mapping an owned object to its controller's key, for `Controller::owns`).

mod claim;
mod kind;
mod refs;

pub use claim::{claim, ClaimError};
pub(crate) use kind::OwnerKind;
pub use refs::{
    controller_ref, controller_ref_of_kind, controller_ref_to, decide, is_controlled_by,
    ClaimDecision,
};
