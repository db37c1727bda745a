//! The operations a [`ModelCheck`](super::ModelCheck) draws, and how: over a small key space (10
//! keys under each of `/a/`, `/ab/` and `/b/`, prefixes that share bytes) so that conflicts,
//! deletes and re-creates are frequent, with revisions drawn around the model's current and
//! compacted ones so that every error a read or compaction can give comes up.

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{b, current};
use crate::{ListRequest, ModelStore, Revision, Store};

/// The prefixes the random keys live under.
const PREFIXES: [&str; 3] = ["/a/", "/ab/", "/b/"];
/// Keys per prefix.
const KEYS_PER_PREFIX: usize = 10;
/// Prefixes lists, counts and watches pick from (besides whole keys).
const READ_PREFIXES: [&str; 8] = ["", "/", "/a", "/a/", "/ab/", "/b/", "/a/1", "/c/"];

/// One random operation: a call of a [`Store`] method (or a restart of the backend).
#[derive(Clone, Debug)]
pub(super) enum Op {
    Create {
        key: Bytes,
        value: Bytes,
    },
    Update {
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    },
    Delete {
        key: Bytes,
        expected: Option<Revision>,
    },
    Get {
        key: Bytes,
    },
    List(ListRequest),
    Count {
        prefix: Bytes,
    },
    CurrentRevision,
    Compact {
        revision: Revision,
    },
    Watch {
        prefix: Bytes,
        after: Revision,
    },
    Restart,
}

/// Draws operations from a seed, looking at the model for the revisions and keys that exist.
pub(super) struct OpSource {
    rng: StdRng,
}

impl OpSource {
    /// The source of the operations of the run with `seed`.
    pub(super) fn new(seed: u64) -> Self {
        OpSource {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The operation of `step`; a restart only if `can_restart`.
    pub(super) async fn next(&mut self, model: &ModelStore, step: usize, can_restart: bool) -> Op {
        let key = self.random_key();
        let value = self.random_value(step);
        match self.rng.gen_range(0..100) {
            0..=14 => Op::Create { key, value },
            15..=34 => {
                let expected = self.random_expected(model, &key).await;
                Op::Update {
                    key,
                    value,
                    expected,
                }
            }
            35..=46 => {
                let expected = self.random_expected(model, &key).await;
                Op::Delete { key, expected }
            }
            47..=56 => Op::Get { key },
            57..=74 => Op::List(self.random_list(model).await),
            75..=79 => Op::Count {
                prefix: self.random_prefix(),
            },
            80..=81 => Op::CurrentRevision,
            82..=83 => Op::Compact {
                revision: self.random_compaction(model).await,
            },
            84..=98 => Op::Watch {
                prefix: self.random_prefix(),
                after: self.random_revision(model).await,
            },
            _ if can_restart => Op::Restart,
            _ => Op::CurrentRevision,
        }
    }

    fn random_key(&mut self) -> Bytes {
        let prefix = PREFIXES[self.rng.gen_range(0..PREFIXES.len())];
        b(format!(
            "{prefix}{}",
            self.rng.gen_range(0..KEYS_PER_PREFIX)
        ))
    }

    fn random_value(&mut self, step: usize) -> Bytes {
        match self.rng.gen_range(0..10) {
            0 => Bytes::new(),
            1 => Bytes::from(vec![self.rng.gen::<u8>(); 48]),
            _ => b(format!("v{step}")),
        }
    }

    fn random_prefix(&mut self) -> Bytes {
        if self.rng.gen_bool(0.1) {
            self.random_key()
        } else {
            b(READ_PREFIXES[self.rng.gen_range(0..READ_PREFIXES.len())])
        }
    }

    /// No expected revision, the key's current one, or another.
    async fn random_expected(&mut self, model: &ModelStore, key: &[u8]) -> Option<Revision> {
        let now = current(model).await;
        match self.rng.gen_range(0..10) {
            0..=3 => None,
            4..=7 => match model.get(key).await.expect("model get") {
                Some(kv) => Some(kv.mod_revision),
                None => Some(Revision(self.rng.gen_range(0..=now.get() + 1))),
            },
            _ => Some(Revision(self.rng.gen_range(0..=now.get() + 1))),
        }
    }

    /// Mostly a retained revision; sometimes a compacted, the compacted or a future one.
    async fn random_revision(&mut self, model: &ModelStore) -> Revision {
        let now = current(model).await.get();
        let compacted = model.compacted_revision().get();
        Revision(match self.rng.gen_range(0..10) {
            0 if compacted > 0 => self.rng.gen_range(0..compacted),
            1 => now + self.rng.gen_range(1..=3),
            2 => compacted,
            3 => now,
            _ => self.rng.gen_range(compacted..=now),
        })
    }

    /// Mostly a revision that may be compacted; sometimes one that may not.
    async fn random_compaction(&mut self, model: &ModelStore) -> Revision {
        let now = current(model).await.get();
        let compacted = model.compacted_revision().get();
        Revision(match self.rng.gen_range(0..10) {
            0 => self.rng.gen_range(0..=compacted),
            1 => now + 1,
            _ if compacted < now => self.rng.gen_range(compacted + 1..=now),
            _ => now,
        })
    }

    async fn random_list(&mut self, model: &ModelStore) -> ListRequest {
        let prefix = self.random_prefix();
        let start = match self.rng.gen_range(0..10) {
            0..=4 => None,
            5 | 6 => Some(b([
                &prefix[..],
                format!("{}", self.rng.gen_range(0..KEYS_PER_PREFIX)).as_bytes(),
            ]
            .concat())),
            7 => Some(b([&self.random_key()[..], b"\0"].concat())),
            8 => Some(prefix.clone()),
            _ => Some(self.random_key()),
        };
        let limit = match self.rng.gen_range(0..10) {
            0..=2 => None,
            3 => Some(0),
            _ => Some(self.rng.gen_range(1..=6)),
        };
        let revision = if self.rng.gen_bool(0.4) {
            None
        } else {
            Some(self.random_revision(model).await)
        };
        ListRequest {
            prefix,
            start,
            revision,
            limit,
            only_more: false,
        }
    }
}
