//! Which field labels a resource lets a field selector use, and how kube-apiserver words the
//! rejection of any other. This is the data behind apimachinery's field-label conversion
//! functions: a kind either registers its own (message `field label not supported: <field>`),
//! or falls back to the default that knows only `metadata.name` and `metadata.namespace`
//! (message `"<field>" is not a known field selector: only "metadata.name", "metadata.namespace"`).
//! Custom resources use the former wording.
//!
//! The per-kind lists belong to the API server; for reference, kube-apiserver's core/v1 ones
//! are: Pod `metadata.name`, `metadata.namespace`, `spec.nodeName`, `spec.restartPolicy`,
//! `spec.schedulerName`, `spec.serviceAccountName`, `spec.hostNetwork`, `status.phase`,
//! `status.podIP`, `status.podIPs`, `status.nominatedNodeName`, and alias `spec.host` for
//! `spec.nodeName`; Node `metadata.name`, `spec.unschedulable`; Namespace `metadata.name`,
//! `status.phase`; Secret `metadata.name`, `metadata.namespace`, `type`; Service
//! `metadata.name`, `metadata.namespace`, `spec.clusterIP`, `spec.type`; ReplicationController
//! `metadata.name`, `metadata.namespace`, `status.replicas`; Event `metadata.name`,
//! `metadata.namespace`, `involvedObject.{kind,namespace,name,uid,apiVersion,resourceVersion,
//! fieldPath}`, `reason`, `reportingComponent`, `source`, `type`.

use std::collections::BTreeMap;

use super::field::FieldSelectorError;

/// The field labels one resource accepts in a field selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectableFields {
    /// Every accepted field label, mapped to the field it selects on: itself, or for a legacy
    /// alias the field it stands for.
    accepted: BTreeMap<String, String>,
    /// How a field label missing from `accepted` is rejected.
    rejection: Rejection,
}

/// The wording of a rejected field label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rejection {
    /// The kind's own conversion: `field label not supported: <field>`.
    NotSupported,
    /// apimachinery's default conversion: `"<field>" is not a known field selector: ...`.
    NotKnown,
}

const METADATA_NAME: &str = "metadata.name";
const METADATA_NAMESPACE: &str = "metadata.namespace";

impl SelectableFields {
    /// A built-in kind without a field-label conversion of its own (ConfigMap, Deployment,
    /// ...): `metadata.name` and `metadata.namespace` only, even for cluster-scoped kinds.
    #[must_use]
    pub fn metadata_only() -> SelectableFields {
        SelectableFields {
            accepted: [METADATA_NAME, METADATA_NAMESPACE]
                .into_iter()
                .map(|f| (f.to_owned(), f.to_owned()))
                .collect(),
            rejection: Rejection::NotKnown,
        }
    }

    /// A built-in kind with its own field-label conversion, accepting exactly `fields`. List
    /// `metadata.name` and `metadata.namespace` too where the kind accepts them: Node and
    /// Namespace, for instance, do not accept `metadata.namespace`.
    pub fn for_kind<I, S>(fields: I) -> SelectableFields
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        SelectableFields {
            accepted: fields
                .into_iter()
                .map(|f| {
                    let f = f.into();
                    (f.clone(), f)
                })
                .collect(),
            rejection: Rejection::NotSupported,
        }
    }

    /// A custom resource: `metadata.name`, `metadata.namespace` when it is namespaced (a
    /// cluster-scoped one rejects it), and the `selectableFields` its CRD declares for the
    /// version served.
    pub fn custom_resource<I, S>(namespaced: bool, selectable: I) -> SelectableFields
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let metadata = if namespaced {
            &[METADATA_NAME, METADATA_NAMESPACE][..]
        } else {
            &[METADATA_NAME][..]
        };
        let fields = metadata
            .iter()
            .map(|f| (*f).to_owned())
            .chain(selectable.into_iter().map(Into::into));
        SelectableFields::for_kind(fields)
    }

    /// Also accepts `alias`, selecting on `target` instead (a pod's legacy `spec.host` for
    /// `spec.nodeName`).
    #[must_use]
    pub fn with_alias(mut self, alias: impl Into<String>, target: impl Into<String>) -> Self {
        self.accepted.insert(alias.into(), target.into());
        self
    }

    /// Every field selected on (an alias's target, not the alias).
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.accepted.values().map(String::as_str)
    }

    /// The field `label` selects on, or the error kube-apiserver gives for it.
    pub fn resolve_field(&self, label: &str) -> Result<&str, FieldSelectorError> {
        match self.accepted.get(label) {
            Some(target) => Ok(target),
            None => Err(match self.rejection {
                Rejection::NotSupported => FieldSelectorError::UnsupportedField(label.to_owned()),
                Rejection::NotKnown => FieldSelectorError::UnknownField(label.to_owned()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::FieldSelector;

    fn pods() -> SelectableFields {
        SelectableFields::for_kind([
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "status.phase",
        ])
        .with_alias("spec.host", "spec.nodeName")
    }

    fn resolve(selector: &str, fields: &SelectableFields) -> Result<String, String> {
        FieldSelector::parse(selector)
            .expect("parses")
            .resolve(fields)
            .map(|s| s.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn resolve_should_accept_listed_fields_and_rename_aliases() {
        assert_eq!(
            resolve("spec.host=n1,status.phase!=Failed", &pods()),
            Ok("spec.nodeName=n1,status.phase!=Failed".to_owned())
        );
        assert_eq!(resolve("", &pods()), Ok(String::new()));
    }

    #[test]
    fn resolve_should_word_a_kind_specific_rejection_as_not_supported() {
        assert_eq!(
            resolve("spec.nodeName=n1,spec.bogus=x", &pods()),
            Err("field label not supported: spec.bogus".to_owned())
        );
    }

    #[test]
    fn resolve_should_report_the_first_unsupported_field_in_sorted_order() {
        assert_eq!(
            resolve("z.bad=1,a.bad=2", &pods()),
            Err("field label not supported: a.bad".to_owned())
        );
    }

    #[test]
    fn resolve_should_word_the_default_rejection_as_not_known() {
        let fields = SelectableFields::metadata_only();
        assert_eq!(
            resolve("metadata.name=a,metadata.namespace!=b", &fields),
            Ok("metadata.name=a,metadata.namespace!=b".to_owned())
        );
        assert_eq!(
            resolve("spec.replicas=1", &fields),
            Err(r#""spec.replicas" is not a known field selector: only "metadata.name", "metadata.namespace""#.to_owned())
        );
        assert_eq!(
            resolve("sp\"ec=1", &fields),
            Err(r#""sp\"ec" is not a known field selector: only "metadata.name", "metadata.namespace""#.to_owned())
        );
    }

    #[test]
    fn custom_resource_should_reject_namespace_when_cluster_scoped() {
        let cluster = SelectableFields::custom_resource(false, ["spec.color"]);
        assert!(resolve("metadata.name=a,spec.color=red", &cluster).is_ok());
        assert_eq!(
            resolve("metadata.namespace=a", &cluster),
            Err("field label not supported: metadata.namespace".to_owned())
        );
        let namespaced = SelectableFields::custom_resource(true, Vec::<String>::new());
        assert!(resolve("metadata.namespace=a", &namespaced).is_ok());
        assert_eq!(
            resolve("spec.color=red", &namespaced),
            Err("field label not supported: spec.color".to_owned())
        );
    }

    #[test]
    fn resolve_field_should_keep_values_and_operators() {
        let s = FieldSelector::parse(r"spec.host!=a\,b")
            .expect("parses")
            .resolve(&pods())
            .expect("supported");
        assert_eq!(s.terms()[0].field, "spec.nodeName");
        assert_eq!(s.terms()[0].value, "a,b");
        assert_eq!(s.to_string(), r"spec.nodeName!=a\,b");
    }
}
