//! The conformance suite: the behaviour every [`Store`] backend must show, written
//! once and run against each (the embedded store on disk and in memory, the model, later etcd).
//!
//! Each case is a `pub async fn case<S: Store>(store: S)` that panics on a violation, taking a
//! fresh, empty store. [`conformance_tests!`](crate::conformance_tests) expands to one
//! `#[tokio::test]` per case, so a backend's test file is a few lines and each case reports on
//! its own:
//!
//! ```no_run
//! use setpoint_store::conformance::Fixture;
//! use setpoint_store::ModelStore;
//!
//! setpoint_store::conformance_tests!(|| async { Fixture::new(ModelStore::new()) });
//! # fn main() {}
//! ```
//!
//! The calling crate needs `tokio` with the `macros` and `rt-multi-thread` features. Watch reads
//! time out (after [`WAIT`]) rather than hang, so a lost event fails the case.
//!
//! The cases and [`ModelCheck::run`] are test drivers, not cancel-safe: a run cut short proves
//! nothing and may leave writes in flight.
//!
//! [`ModelCheck`] is the other half of the verification: random operations against a backend
//! and the [`crate::ModelStore`], every answer compared.

mod compaction;
mod error_shape;
mod list;
mod model_check;
mod random_ops;
mod reader;
mod watch;
mod writes;

use std::any::Any;
use std::time::Duration;

use bytes::Bytes;

use crate::{Revision, Store};

pub use compaction::{
    compact_should_refuse_future_and_already_compacted_revisions,
    compaction_should_keep_current_values_and_refuse_older_reads,
};
pub use error_shape::{outcome, ErrorShape};
pub use list::{
    list_at_a_future_revision_should_fail,
    list_at_an_old_revision_should_return_the_values_as_they_were,
    list_should_limit_and_report_the_remaining_keys,
    list_should_return_exactly_the_keys_under_the_prefix_in_byte_order,
    list_should_start_at_the_start_key_inclusive,
    list_with_a_start_key_outside_the_prefix_should_be_invalid,
    paged_list_should_read_one_snapshot_while_writes_continue,
};
pub use model_check::{seeds_from_env, ModelCheck};
pub use reader::WatchReader;
pub use watch::{
    concurrent_watchers_should_see_the_same_sequence,
    concurrent_writers_should_get_distinct_revisions_seen_in_order,
    dropped_watches_should_not_disturb_the_store, watch_from_a_compacted_revision_should_fail,
    watch_from_a_future_revision_should_wait_then_deliver,
    watch_left_behind_by_compaction_should_fail_or_continue_without_gaps,
    watch_should_deliver_every_change_in_order_with_prev_values,
    watch_should_only_deliver_changes_under_its_prefix,
    watch_should_resume_from_every_retained_revision,
};
pub use writes::{
    conditional_updates_under_contention_should_lose_no_write,
    count_should_count_the_keys_under_a_prefix_now,
    create_of_an_existing_key_should_fail_with_the_current_value,
    delete_should_return_the_deleted_value_and_the_deletion_revision,
    delete_with_expected_revision_should_apply_only_on_match,
    empty_keys_should_be_invalid_arguments, failed_writes_should_consume_no_revision,
    get_should_return_the_current_value_or_none, recreated_key_should_start_a_new_incarnation,
    revisions_should_increase_by_one_per_successful_write,
    update_or_delete_of_a_missing_key_should_fail_with_not_found,
    update_with_expected_revision_should_apply_only_on_match,
    updates_should_keep_the_create_revision_and_bump_the_version,
    values_over_the_limit_should_be_refused,
};

/// How long a case waits for a watch to deliver before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// A fresh store for one case, with whatever must outlive it (a temporary directory, say).
pub struct Fixture<S> {
    /// The empty store under test.
    pub store: S,
    /// Dropped only after the case is done with `store`.
    pub guard: Box<dyn Any + Send>,
}

impl<S: Store> Fixture<S> {
    /// A store that needs nothing kept alive.
    pub fn new(store: S) -> Self {
        Fixture::with_guard(store, ())
    }

    /// A store that needs `guard` kept alive while it is in use.
    pub fn with_guard(store: S, guard: impl Any + Send) -> Self {
        Fixture {
            store,
            guard: Box::new(guard),
        }
    }
}

/// Expands to one `#[tokio::test]` per conformance case, each running the case on a store made
/// by `$factory`: an expression callable with no arguments that returns a future of a
/// [`Fixture`](crate::conformance::Fixture).
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@cases ($factory)
            revisions_should_increase_by_one_per_successful_write
            failed_writes_should_consume_no_revision
            create_of_an_existing_key_should_fail_with_the_current_value
            updates_should_keep_the_create_revision_and_bump_the_version
            update_with_expected_revision_should_apply_only_on_match
            delete_with_expected_revision_should_apply_only_on_match
            update_or_delete_of_a_missing_key_should_fail_with_not_found
            delete_should_return_the_deleted_value_and_the_deletion_revision
            recreated_key_should_start_a_new_incarnation
            get_should_return_the_current_value_or_none
            count_should_count_the_keys_under_a_prefix_now
            empty_keys_should_be_invalid_arguments
            values_over_the_limit_should_be_refused
            conditional_updates_under_contention_should_lose_no_write
            list_should_return_exactly_the_keys_under_the_prefix_in_byte_order
            list_should_start_at_the_start_key_inclusive
            list_should_limit_and_report_the_remaining_keys
            paged_list_should_read_one_snapshot_while_writes_continue
            list_at_an_old_revision_should_return_the_values_as_they_were
            list_at_a_future_revision_should_fail
            list_with_a_start_key_outside_the_prefix_should_be_invalid
            compaction_should_keep_current_values_and_refuse_older_reads
            compact_should_refuse_future_and_already_compacted_revisions
            watch_should_deliver_every_change_in_order_with_prev_values
            watch_should_only_deliver_changes_under_its_prefix
            watch_should_resume_from_every_retained_revision
            watch_from_a_future_revision_should_wait_then_deliver
            watch_from_a_compacted_revision_should_fail
            watch_left_behind_by_compaction_should_fail_or_continue_without_gaps
            concurrent_watchers_should_see_the_same_sequence
            concurrent_writers_should_get_distinct_revisions_seen_in_order
            dropped_watches_should_not_disturb_the_store
        );
    };
    (@cases ($factory:expr) $($case:ident)*) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let $crate::conformance::Fixture { store, guard } = ($factory)().await;
                $crate::conformance::$case(store).await;
                drop(guard);
            }
        )*
    };
}

/// A key or value from text or bytes.
pub(crate) fn b(data: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(data.as_ref())
}

/// The store's current revision; panics if it cannot say.
pub(crate) async fn current<S: Store + ?Sized>(store: &S) -> Revision {
    store.current_revision().await.expect("current revision")
}
