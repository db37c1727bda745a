//! Fan-out from an informer to its handlers: each handler has its own unbounded channel and
//! its own task, so one slow handler never blocks the others or the watch.
//!
//! Ordering: the informer applies a change to the cache and queues its notification to every
//! handler under the [`Fanout`] lock, and a late handler's synthetic adds (and every resync
//! snapshot) are taken under the same lock — so each handler sees the cache's history in
//! order, without gaps or repeats.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::handler::{Deleted, EventHandler, HandlerRegistration, ListenerStatus};
use crate::cache::ObjectCache;

/// One notification for one handler.
pub(crate) enum Notification<K> {
    /// `on_add`.
    Add {
        object: Arc<K>,
        in_initial_list: bool,
    },
    /// `on_update`.
    Update { old: Arc<K>, new: Arc<K> },
    /// `on_delete`.
    Delete(Deleted<K>),
    /// Everything of the initial list (or of the synthetic adds) came before this.
    Synced,
    /// A resync: `on_update(obj, obj)` for each, the cache as it was when it was queued.
    Resync(Vec<Arc<K>>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Notification::Add {
                object,
                in_initial_list,
            } => Notification::Add {
                object: object.clone(),
                in_initial_list: *in_initial_list,
            },
            Notification::Update { old, new } => Notification::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Notification::Delete(d) => Notification::Delete(d.clone()),
            Notification::Synced => Notification::Synced,
            Notification::Resync(objects) => Notification::Resync(objects.clone()),
        }
    }
}

/// Spawns a handler's task.
type SpawnFn = Box<dyn FnOnce(&tokio::runtime::Handle) -> JoinHandle<()> + Send>;

/// A handler's task.
enum Task {
    /// Not spawned yet: the informer has not started.
    Pending(SpawnFn),
    /// Running (or finished).
    Running(JoinHandle<()>),
    /// Stopped, or being moved from `Pending` to `Running`.
    Stopped,
}

impl Task {
    fn stop(self) {
        if let Task::Running(task) = self {
            task.abort();
        }
    }
}

/// One registered handler.
struct Listener<K> {
    id: u64,
    sender: mpsc::UnboundedSender<Notification<K>>,
    task: Task,
}

/// The handlers of one informer.
pub(crate) struct Fanout<K> {
    listeners: Vec<Listener<K>>,
    next_id: u64,
    /// Where handler tasks run; `None` until the informer starts.
    runtime: Option<tokio::runtime::Handle>,
}

impl<K> Fanout<K> {
    pub(crate) fn new() -> Fanout<K> {
        Fanout {
            listeners: Vec::new(),
            next_id: 0,
            runtime: None,
        }
    }

    /// Queues `notification` to every handler.
    pub(crate) fn send(&self, notification: &Notification<K>) {
        for listener in &self.listeners {
            // A handler whose task is gone (removed, shut down) just misses it.
            let _ = listener.sender.send(notification.clone());
        }
    }

    /// Starts the tasks of the handlers added so far, and of later ones as they come, on
    /// `runtime`.
    pub(crate) fn start(&mut self, runtime: tokio::runtime::Handle) {
        for listener in &mut self.listeners {
            listener.task = match std::mem::replace(&mut listener.task, Task::Stopped) {
                Task::Pending(spawn) => Task::Running(spawn(&runtime)),
                other => other,
            };
        }
        self.runtime = Some(runtime);
    }

    /// Stops every handler task.
    pub(crate) fn shut_down(&mut self) {
        for listener in self.listeners.drain(..) {
            listener.task.stop();
        }
    }

    fn remove(&mut self, id: u64) {
        if let Some(at) = self.listeners.iter().position(|l| l.id == id) {
            self.listeners.remove(at).task.stop();
        }
    }
}

/// Adds `handler` to `fanout`: if the cache has synced, it is first sent a synthetic add for
/// every cached object, then `Synced`; otherwise the informer sends it the initial list when
/// it arrives. With `resync`, it also gets the whole cache as updates every `resync`.
pub(crate) fn add_handler<K>(
    fanout: &Arc<Mutex<Fanout<K>>>,
    store: &ObjectCache<K>,
    handler: Arc<dyn EventHandler<K>>,
    resync: Option<Duration>,
) -> HandlerRegistration
where
    K: Resource + Send + Sync + 'static,
{
    let (sender, receiver) = mpsc::unbounded_channel();
    let status = Arc::new(ListenerStatus::default());
    let mut guard = fanout.lock();
    if store.is_synced() {
        for object in store.list() {
            let _ = sender.send(Notification::Add {
                object,
                in_initial_list: true,
            });
        }
        let _ = sender.send(Notification::Synced);
    }
    let resync = resync.map(|period| Resync {
        period,
        fanout: Arc::downgrade(fanout),
        store: store.clone(),
        sender: sender.clone(),
        pending: Arc::new(AtomicBool::new(false)),
    });
    let task_status = status.clone();
    let spawn: SpawnFn =
        Box::new(move |runtime| runtime.spawn(listen(handler, receiver, task_status, resync)));
    let task = match &guard.runtime {
        Some(runtime) => Task::Running(spawn(runtime)),
        None => Task::Pending(spawn),
    };
    let id = guard.next_id;
    guard.next_id += 1;
    guard.listeners.push(Listener { id, sender, task });
    drop(guard);
    let weak = Arc::downgrade(fanout);
    HandlerRegistration::new(
        status,
        Box::new(move || {
            if let Some(fanout) = weak.upgrade() {
                fanout.lock().remove(id);
            }
        }),
    )
}

/// A handler's periodic resync: queues a snapshot of the cache to the handler's own channel.
struct Resync<K> {
    period: Duration,
    fanout: std::sync::Weak<Mutex<Fanout<K>>>,
    store: ObjectCache<K>,
    sender: mpsc::UnboundedSender<Notification<K>>,
    /// A snapshot is queued and not yet delivered: don't queue another (a slow handler gets
    /// one resync at a time, not a backlog of them).
    pending: Arc<AtomicBool>,
}

impl<K: Resource> Resync<K> {
    fn queue(&self) {
        if self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(fanout) = self.fanout.upgrade() else {
            return;
        };
        // Under the fan-out lock, every change applied to the cache has been queued: the
        // snapshot comes after them in the channel, as it comes after them in time.
        let _guard = fanout.lock();
        let _ = self.sender.send(Notification::Resync(self.store.list()));
    }
}

/// A handler's task: delivers its notifications one at a time, and queues resyncs.
async fn listen<K>(
    handler: Arc<dyn EventHandler<K>>,
    mut receiver: mpsc::UnboundedReceiver<Notification<K>>,
    status: Arc<ListenerStatus>,
    resync: Option<Resync<K>>,
) where
    K: Resource + Send + Sync + 'static,
{
    let mut ticks = resync.as_ref().map(|r| {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + r.period, r.period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks
    });
    loop {
        let notification = tokio::select! {
            biased;
            received = receiver.recv() => match received {
                Some(notification) => notification,
                None => return,
            },
            () = next_tick(&mut ticks) => {
                if let Some(resync) = &resync {
                    resync.queue();
                }
                continue;
            }
        };
        if let Notification::Resync(_) = &notification {
            if let Some(resync) = &resync {
                resync.pending.store(false, Ordering::Release);
            }
        }
        deliver(handler.as_ref(), notification, &status);
    }
}

/// The next resync tick; never, without resync.
async fn next_tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Calls the handler for one notification; a panic is logged and the notification skipped.
fn deliver<K: 'static>(
    handler: &dyn EventHandler<K>,
    notification: Notification<K>,
    status: &ListenerStatus,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| match &notification {
        Notification::Add {
            object,
            in_initial_list,
        } => handler.on_add(object, *in_initial_list),
        Notification::Update { old, new } => handler.on_update(old, new),
        Notification::Delete(deleted) => handler.on_delete(deleted),
        Notification::Synced => status.synced.store(true, Ordering::Release),
        Notification::Resync(objects) => {
            for object in objects {
                handler.on_update(object, object);
            }
        }
    }));
    if outcome.is_err() {
        tracing::error!("an informer event handler panicked; the notification was skipped");
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::super::testing::{cm, take, Recorder};
    use super::*;

    fn synced_store(names: &[&str]) -> ObjectCache<ConfigMap> {
        let store = ObjectCache::new();
        store.replace(
            names.iter().map(|n| Arc::new(cm(n, "1"))).collect(),
            "1".into(),
        );
        store
    }

    fn started_fanout() -> Arc<Mutex<Fanout<ConfigMap>>> {
        let fanout = Arc::new(Mutex::new(Fanout::new()));
        fanout.lock().start(tokio::runtime::Handle::current());
        fanout
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn dispatch_should_resync_each_handler_at_its_own_period() {
        let store = synced_store(&["a", "b"]);
        let fanout = started_fanout();
        let (every30, mut rx30) = Recorder::new();
        let (every60, mut rx60) = Recorder::new();
        add_handler(
            &fanout,
            &store,
            Arc::new(every30),
            Some(Duration::from_secs(30)),
        );
        add_handler(
            &fanout,
            &store,
            Arc::new(every60),
            Some(Duration::from_secs(60)),
        );
        assert_eq!(
            take(&mut rx30, 2).await,
            ["add ns/a initial", "add ns/b initial"]
        );
        assert_eq!(
            take(&mut rx60, 2).await,
            ["add ns/a initial", "add ns/b initial"]
        );

        tokio::time::sleep(Duration::from_secs(29)).await;
        settle().await;
        assert!(rx30.try_recv().is_err(), "no resync before the period");

        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            take(&mut rx30, 2).await,
            ["update ns/a 1->1 same", "update ns/b 1->1 same"]
        );
        settle().await;
        assert!(rx60.try_recv().is_err(), "the 60 s handler is not due yet");

        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            take(&mut rx60, 2).await,
            ["update ns/a 1->1 same", "update ns/b 1->1 same"]
        );
        assert_eq!(
            take(&mut rx30, 2).await,
            ["update ns/a 1->1 same", "update ns/b 1->1 same"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dispatch_should_resync_the_cache_as_it_is_at_the_tick() {
        let store = synced_store(&["a"]);
        let fanout = started_fanout();
        let (handler, mut rx) = Recorder::new();
        add_handler(
            &fanout,
            &store,
            Arc::new(handler),
            Some(Duration::from_secs(10)),
        );
        assert_eq!(take(&mut rx, 1).await, ["add ns/a initial"]);
        // A change applied (and notified) before the tick is in the resync, after its own
        // notification.
        {
            let guard = fanout.lock();
            let new = Arc::new(cm("b", "2"));
            store.apply(new.clone());
            guard.send(&Notification::Add {
                object: new,
                in_initial_list: false,
            });
        }
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(
            take(&mut rx, 3).await,
            ["add ns/b", "update ns/a 1->1 same", "update ns/b 2->2 same"]
        );
    }

    #[tokio::test]
    async fn dispatch_should_mark_a_late_handler_synced_after_its_synthetic_adds() {
        let store = synced_store(&["a", "b", "c"]);
        let fanout = started_fanout();
        let (handler, mut rx) = Recorder::new();
        let registration = add_handler(&fanout, &store, Arc::new(handler), None);
        assert_eq!(take(&mut rx, 3).await.len(), 3);
        for _ in 0..100 {
            if registration.has_synced() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(registration.has_synced());
    }

    #[tokio::test]
    async fn dispatch_should_not_sync_a_handler_before_the_initial_list() {
        let store: ObjectCache<ConfigMap> = ObjectCache::new();
        let fanout = started_fanout();
        let (handler, _rx) = Recorder::new();
        let registration = add_handler(&fanout, &store, Arc::new(handler), None);
        settle().await;
        assert!(!registration.has_synced());
    }

    struct Panicky(Recorder);

    impl EventHandler<ConfigMap> for Panicky {
        fn on_add(&self, object: &Arc<ConfigMap>, in_initial_list: bool) {
            assert_ne!(object.metadata.name.as_deref(), Some("boom"), "handler bug");
            self.0.on_add(object, in_initial_list);
        }
    }

    #[tokio::test]
    async fn dispatch_should_keep_delivering_after_a_handler_panics() {
        let store = synced_store(&[]);
        let fanout = started_fanout();
        let (recorder, mut rx) = Recorder::new();
        add_handler(&fanout, &store, Arc::new(Panicky(recorder)), None);
        for name in ["boom", "fine"] {
            fanout.lock().send(&Notification::Add {
                object: Arc::new(cm(name, "1")),
                in_initial_list: false,
            });
        }
        assert_eq!(take(&mut rx, 1).await, ["add ns/fine"]);
    }

    #[tokio::test]
    async fn dispatch_should_stop_a_removed_handler() {
        let store = synced_store(&[]);
        let fanout = started_fanout();
        let (recorder, mut rx) = Recorder::new();
        let registration = add_handler(&fanout, &store, Arc::new(recorder), None);
        registration.remove();
        fanout.lock().send(&Notification::Add {
            object: Arc::new(cm("a", "1")),
            in_initial_list: false,
        });
        assert_eq!(rx.recv().await, None, "the handler was dropped, unnotified");
    }

    #[tokio::test]
    async fn dispatch_should_hold_handlers_added_before_start_until_then() {
        let store = synced_store(&["a"]);
        let fanout = Arc::new(Mutex::new(Fanout::new()));
        let (recorder, mut rx) = Recorder::new();
        add_handler(&fanout, &store, Arc::new(recorder), None);
        settle().await;
        assert!(rx.try_recv().is_err(), "not started");
        fanout.lock().start(tokio::runtime::Handle::current());
        assert_eq!(take(&mut rx, 1).await, ["add ns/a initial"]);
    }
}
