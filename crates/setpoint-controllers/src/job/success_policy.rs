//! `spec.successPolicy` of an Indexed Job: the first rule its succeeded indexes satisfy. A rule
//! with `succeededIndexes` and `succeededCount` needs that many of those indexes to have
//! succeeded; with `succeededIndexes` alone, all of them; with `succeededCount` alone, that many
//! indexes in all.

use k8s_openapi::api::batch::v1::Job;

use super::indexes::{self, Indexes};

/// The position of the first rule of `job`'s success policy that `completed` satisfies.
pub(crate) fn matched_rule(job: &Job, completed: &Indexes) -> Option<usize> {
    let spec = job.spec.as_ref()?;
    let rules = &spec.success_policy.as_ref()?.rules;
    rules.iter().position(|rule| {
        let done = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(text), count) => {
                let wanted = indexes::parse(Some(text), spec.completions);
                let hits = wanted.intersection(completed).count();
                match count {
                    Some(c) => done(hits) >= i64::from(c),
                    None => !wanted.is_empty() && hits == wanted.len(),
                }
            }
            (None, Some(c)) => done(completed.len()) >= i64::from(c),
            (None, None) => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::pods::testing::job;
    use k8s_openapi::api::batch::v1::{SuccessPolicy, SuccessPolicyRule};

    fn with_rules(rules: Vec<SuccessPolicyRule>) -> Job {
        let mut j = job("j");
        let spec = j.spec.as_mut().expect("spec");
        spec.completions = Some(10);
        spec.completion_mode = Some("Indexed".into());
        spec.success_policy = Some(SuccessPolicy { rules });
        j
    }

    fn rule(indexes: Option<&str>, count: Option<i32>) -> SuccessPolicyRule {
        SuccessPolicyRule {
            succeeded_indexes: indexes.map(str::to_owned),
            succeeded_count: count,
        }
    }

    #[test]
    fn rules_should_match_indexes_counts_or_both() {
        let j = with_rules(vec![
            rule(Some("0-2"), None),
            rule(Some("5-9"), Some(2)),
            rule(None, Some(4)),
        ]);
        assert_eq!(matched_rule(&j, &[0, 1].into()), None);
        assert_eq!(matched_rule(&j, &[0, 1, 2].into()), Some(0));
        assert_eq!(matched_rule(&j, &[5, 9].into()), Some(1));
        assert_eq!(matched_rule(&j, &[1, 3, 4, 6].into()), Some(2));
    }
}
