//! The new ReplicaSet (Kubernetes' `getNewReplicaSet`): the one whose template is the
//! Deployment's. Found, it is brought up to date (annotations, `minReadySeconds`) and its
//! revision becomes the Deployment's. Not found and asked to, it is created: named
//! `<deployment>-<pod-template-hash>`, labelled and selecting `pod-template-hash=<hash>`,
//! sized as the strategy allows, revision one above the old ones'. A create that finds the name
//! taken by the Deployment's own ReplicaSet with this template takes that one (it is the
//! same); by any other, raises `status.collisionCount` so the next sync hashes to another name.

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use setpoint_runtime::owner::{controller_ref, controller_ref_to};
use setpoint_runtime::EventDetails;

use super::annotations::{
    max_revision, revision_string, set_deployment_revision, set_new_replicaset_annotations,
    NewReplicaSet,
};
use super::error::DeploymentError;
use super::replicasets::desired;
use super::sizing::{max_surge, new_rs_new_replicas};
use super::status::{self, FAILED_RS_CREATE, FOUND_NEW_RS, NEW_RS_CREATED, PROGRESSING};
use super::sync::Rollout;
use super::template::{
    equal_ignoring_hash, find_new, rs_template, template_hash, template_of, with_hash,
    POD_TEMPLATE_HASH,
};

/// Whether a missing new ReplicaSet is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Create {
    /// Create it (a rollout step).
    Yes,
    /// Leave it missing (scaling only, or Recreate before the old pods are gone).
    No,
}

impl Rollout<'_> {
    /// Finds the new ReplicaSet and brings it and the Deployment's revision up to date;
    /// creates it if missing and `create` says so.
    pub(super) async fn sync_new_replicaset(
        &mut self,
        create: Create,
    ) -> Result<(), DeploymentError> {
        self.new = find_new(&self.d, &self.rses);
        let new_revision = max_revision(&self.old()) + 1;
        match self.new {
            Some(i) => self.update_existing(i, new_revision).await,
            None if create == Create::Yes => self.create_new(new_revision).await,
            None => Ok(()),
        }
    }

    async fn update_existing(
        &mut self,
        i: usize,
        new_revision: i64,
    ) -> Result<(), DeploymentError> {
        let mut updated = self.rses[i].clone();
        let mut changed = set_new_replicaset_annotations(
            &self.d,
            &mut updated,
            new_revision,
            NewReplicaSet::Existing,
        );
        let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
        if let Some(spec) = updated.spec.as_mut() {
            if spec.min_ready_seconds.unwrap_or(0) != min_ready.unwrap_or(0) {
                spec.min_ready_seconds = min_ready;
                changed = true;
            }
        }
        if changed {
            self.rses[i] = self.replace_replicaset(&updated, "updating").await?;
        }
        let revision = revision_string(&self.rses[i])
            .unwrap_or_default()
            .to_owned();
        let mut needs_write = set_deployment_revision(&mut self.d, &revision);
        let mut new_status = self.current_status();
        if status::get_condition(&new_status, PROGRESSING).is_none() {
            let name = self.rses[i].metadata.name.clone().unwrap_or_default();
            let c = status::condition(
                PROGRESSING,
                "True",
                FOUND_NEW_RS,
                format!("Found new replica set {name:?}"),
                now(),
            );
            status::set_condition(&mut new_status, c);
            needs_write = true;
        }
        if needs_write {
            self.write_status(new_status).await?;
        }
        Ok(())
    }

    async fn create_new(&mut self, new_revision: i64) -> Result<(), DeploymentError> {
        let collision_count = self.d.status.as_ref().and_then(|s| s.collision_count);
        let mut template = template_of(&self.d);
        let hash = template_hash(&template, collision_count);
        let meta = template.metadata.get_or_insert_with(Default::default);
        let labels = with_hash(meta.labels.as_ref(), &hash);
        meta.labels = Some(labels.clone());
        let spec = self.d.spec.clone().unwrap_or_default();
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH.to_owned(), hash.clone());
        let deployment_name = self.d.metadata.name.clone().unwrap_or_default();
        let name = format!("{deployment_name}-{hash}");
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: self.d.metadata.namespace.clone(),
                labels: Some(labels),
                owner_references: Some(vec![controller_ref_to(&self.d)]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let size = {
            let mut all = self.all();
            all.push(&rs);
            new_rs_new_replicas(&self.d, &all, &rs)
        };
        if let Some(spec) = rs.spec.as_mut() {
            spec.replicas = Some(size);
        }
        let replicas = desired(&self.d);
        let which = NewReplicaSet::ToCreate {
            desired: replicas,
            max: replicas + max_surge(&self.d),
        };
        set_new_replicaset_annotations(&self.d, &mut rs, new_revision, which);

        let namespace = self.d.metadata.namespace.clone().unwrap_or_default();
        let api = self.ctx.client.namespaced_api::<ReplicaSet>(&namespace);
        let (created, already_existed) = match api.create(&PostParams::default(), &rs).await {
            Ok(created) => (created, false),
            Err(kube::Error::Api(e)) if e.code == 409 => match self.existing_same(&name).await? {
                Some(existing) => (existing, true),
                None => return self.collided(name).await,
            },
            Err(source) => {
                let mut new_status = self.current_status();
                let c = status::condition(
                    PROGRESSING,
                    "False",
                    FAILED_RS_CREATE,
                    format!("Failed to create new replica set {name:?}: {source}"),
                    now(),
                );
                status::set_condition(&mut new_status, c);
                self.write_status(new_status).await?;
                return Err(DeploymentError::ReplicaSet {
                    action: "creating",
                    deployment: self.key.to_string(),
                    replicaset: name,
                    source,
                });
            }
        };
        self.ctx.expect_written(&self.key, &created);
        if !already_existed && size > 0 {
            self.ctx.recorder.publish_for(
                &self.d,
                EventDetails::normal("ScalingReplicaSet", "Scale")
                    .with_note(format!("Scaled up replica set {name} from 0 to {size}")),
            );
        }
        tracing::info!(deployment = %self.key, replicaset = name, size, already_existed, "new replica set");
        self.rses.push(created);
        self.new = Some(self.rses.len() - 1);
        let mut needs_write = set_deployment_revision(&mut self.d, &new_revision.to_string());
        let mut new_status = self.current_status();
        if !already_existed && status::progress_deadline(&self.d).is_some() {
            let c = status::condition(
                PROGRESSING,
                "True",
                NEW_RS_CREATED,
                format!("Created new replica set {name:?}"),
                now(),
            );
            status::set_condition(&mut new_status, c);
            needs_write = true;
        }
        if needs_write {
            self.write_status(new_status).await?;
        }
        Ok(())
    }

    /// The stored ReplicaSet `name`, if the Deployment controls it and it has the
    /// Deployment's template (read live: the cache did not have it).
    async fn existing_same(&self, name: &str) -> Result<Option<ReplicaSet>, DeploymentError> {
        let namespace = self.d.metadata.namespace.as_deref().unwrap_or_default();
        let existing = self
            .ctx
            .client
            .namespaced_api::<ReplicaSet>(namespace)
            .get_opt(name)
            .await
            .map_err(|source| DeploymentError::ReplicaSet {
                action: "reading",
                deployment: self.key.to_string(),
                replicaset: name.to_owned(),
                source,
            })?;
        let template = template_of(&self.d);
        Ok(existing.filter(|rs| {
            controller_ref(&rs.metadata)
                .is_some_and(|r| Some(&r.uid) == self.d.metadata.uid.as_ref())
                && rs_template(rs).is_some_and(|t| equal_ignoring_hash(t, &template))
        }))
    }

    /// Raises `collisionCount` after the new ReplicaSet's name was found taken.
    async fn collided(&mut self, name: String) -> Result<(), DeploymentError> {
        let mut new_status = self.current_status();
        let count = new_status.collision_count.unwrap_or(0);
        new_status.collision_count = Some(count.saturating_add(1));
        self.write_status(new_status).await?;
        tracing::warn!(deployment = %self.key, replicaset = name, "hash collision; collisionCount raised");
        Err(DeploymentError::HashCollision {
            deployment: self.key.to_string(),
            replicaset: name,
        })
    }
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}
