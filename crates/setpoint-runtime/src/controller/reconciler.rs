//! [`Reconciler`]: the user's code a controller runs for one object at a time.
//!
//! Any `Fn(Arc<K>, Arc<C>) -> impl Future<Output = Result<Action, E>> + Send` closure is a
//! reconciler (a plain `async fn` too); implement the trait yourself to keep state in a type or
//! to mark some errors [terminal](OnError::Terminal). A reconciler is level-based: it gets the
//! object's current cached state, never the event that triggered it, and must bring the world
//! in line with that state whatever happened before (several events may have been coalesced
//! into one reconcile, and reconciles are retried).
//!
//! A reconciler is never called for an object that is gone from the cache: cleanup on deletion
//! is done with a finalizer, which keeps the object (with a deletion timestamp) until the
//! reconciler has cleaned up and removed it.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::action::Action;

/// What the controller does with a reconcile error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnError {
    /// Retry the key after its exponential backoff (the default).
    Retry,
    /// Do not retry: the error will not go away by itself (an invalid spec, say). The key's
    /// backoff is cleared and it is reconciled again only when something changes. Counted in
    /// both `reconcile_error_total` and `reconcile_terminal_error_total`.
    Terminal,
}

/// Reconciles one object of kind `K` with a shared context `C` (clients, configuration,
/// recorders — whatever the reconciler needs; the same `Arc<C>` for every call).
///
/// Implemented for every closure / `async fn` of the right shape:
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use setpoint_runtime::{Action, Client};
///
/// struct Ctx {
///     client: Client,
/// }
///
/// async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
///     let _api = ctx.client.namespaced_api::<ConfigMap>("default");
///     // ... compare `cm` with the world and act ...
///     Ok(Action::requeue(Duration::from_secs(3_600)))
/// }
/// # fn is_reconciler(_: impl setpoint_runtime::Reconciler<ConfigMap, Ctx>) {}
/// # is_reconciler(reconcile);
/// ```
///
/// Implement it on a type to choose which errors are [terminal](OnError::Terminal), or wrap a
/// closure with [`terminal_when`](Reconciler::terminal_when):
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use setpoint_runtime::{Action, OnError, Reconciler};
///
/// #[derive(Debug, thiserror::Error)]
/// enum Error {
///     #[error("invalid spec: {0}")]
///     Invalid(String),
///     #[error(transparent)]
///     Api(#[from] kube::Error),
/// }
///
/// struct Mirror;
///
/// impl Reconciler<ConfigMap, ()> for Mirror {
///     type Error = Error;
///
///     async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: Arc<()>) -> Result<Action, Error> {
///         if cm.data.is_none() {
///             return Err(Error::Invalid("no data".into()));
///         }
///         Ok(Action::await_change())
///     }
///
///     fn on_error(&self, error: &Error) -> OnError {
///         match error {
///             Error::Invalid(_) => OnError::Terminal,
///             Error::Api(_) => OnError::Retry,
///         }
///     }
/// }
/// ```
pub trait Reconciler<K, C>: Send + Sync + 'static {
    /// The reconcile error; displayed in logs.
    type Error: fmt::Display + Send + 'static;

    /// Brings the world in line with `object`. Run with a timeout (the future is dropped when
    /// it expires) and with panics caught, so it may be cancelled at any await point.
    fn reconcile(
        &self,
        object: Arc<K>,
        context: Arc<C>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Whether `error` is retried (the default) or terminal.
    fn on_error(&self, error: &Self::Error) -> OnError {
        let _ = error;
        OnError::Retry
    }

    /// This reconciler, with the errors for which `is_terminal` returns true not retried.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// use setpoint_runtime::{Action, Reconciler};
    ///
    /// #[derive(Debug, thiserror::Error)]
    /// enum Error {
    ///     #[error("invalid spec: {0}")]
    ///     Invalid(String),
    ///     #[error(transparent)]
    ///     Api(#[from] kube::Error),
    /// }
    /// let reconciler = (|_cm: Arc<ConfigMap>, _ctx: Arc<()>| async { Ok::<_, Error>(Action::await_change()) })
    ///     .terminal_when(|e: &Error| matches!(e, Error::Invalid(_)));
    /// # let _ = reconciler;
    /// ```
    fn terminal_when<P>(self, is_terminal: P) -> TerminalWhen<Self, P>
    where
        Self: Sized,
        P: Fn(&Self::Error) -> bool + Send + Sync + 'static,
    {
        TerminalWhen {
            inner: self,
            is_terminal,
        }
    }
}

impl<K, C, F, Fut, E> Reconciler<K, C> for F
where
    F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send,
    E: fmt::Display + Send + 'static,
{
    type Error = E;

    fn reconcile(
        &self,
        object: Arc<K>,
        context: Arc<C>,
    ) -> impl Future<Output = Result<Action, E>> + Send {
        self(object, context)
    }
}

/// A reconciler whose errors matching a predicate are [terminal](OnError::Terminal); from
/// [`Reconciler::terminal_when`].
pub struct TerminalWhen<R, P> {
    inner: R,
    is_terminal: P,
}

impl<R, P> fmt::Debug for TerminalWhen<R, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TerminalWhen").finish_non_exhaustive()
    }
}

impl<K, C, R, P> Reconciler<K, C> for TerminalWhen<R, P>
where
    R: Reconciler<K, C>,
    P: Fn(&R::Error) -> bool + Send + Sync + 'static,
{
    type Error = R::Error;

    fn reconcile(
        &self,
        object: Arc<K>,
        context: Arc<C>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        self.inner.reconcile(object, context)
    }

    fn on_error(&self, error: &Self::Error) -> OnError {
        if (self.is_terminal)(error) {
            OnError::Terminal
        } else {
            self.inner.on_error(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn always_fails(_: Arc<u32>, _: Arc<()>) -> Result<Action, String> {
        Err("boom".to_owned())
    }

    #[tokio::test]
    async fn closures_should_be_reconcilers_that_retry_every_error() {
        let r = always_fails;
        let err = r
            .reconcile(Arc::new(1), Arc::new(()))
            .await
            .expect_err("fails");
        assert_eq!(Reconciler::<u32, ()>::on_error(&r, &err), OnError::Retry);
    }

    #[tokio::test]
    async fn terminal_when_should_mark_only_matching_errors_terminal() {
        let r = (|n: Arc<u32>, _: Arc<()>| async move { Err::<Action, _>(format!("e{n}")) })
            .terminal_when(|e: &String| e == "e2");
        let e1 = r
            .reconcile(Arc::new(1), Arc::new(()))
            .await
            .expect_err("e1");
        let e2 = r
            .reconcile(Arc::new(2), Arc::new(()))
            .await
            .expect_err("e2");
        assert_eq!(r.on_error(&e1), OnError::Retry);
        assert_eq!(r.on_error(&e2), OnError::Terminal);
    }
}
