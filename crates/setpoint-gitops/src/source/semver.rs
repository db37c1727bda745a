//! `ref.semver`: a version range in the syntax Flux takes (Masterminds' constraints:
//! `>=1.0.0 <2.0.0`, `^1.2`, `~1.2.3`, `1.x`, `1.2 - 1.4`, alternatives joined by `||`), and
//! the choice of the highest tag in it.
//!
//! A tag is a version when it is `MAJOR.MINOR.PATCH` with optional pre-release and build parts,
//! with or without a leading `v` (`v1.2.0` and `1.2.0` are both 1.2.0; leading zeros are
//! allowed, as Flux allows them). Tags that are not versions are skipped. A pre-release is
//! chosen only when a comparator of the range names a pre-release of the same
//! `MAJOR.MINOR.PATCH` (`>=1.2.0-rc.1` admits `1.2.0-rc.2`, not `1.3.0-rc.1`; Flux's library admits
//! any pre-release once one comparator has one). Two tags of equal precedence (`v1.0.0` and
//! `1.0.0`, or `1.0.0+a` and `1.0.0+b`) are ordered by their commits' committer time, the later
//! winning, as Flux does; then by name.

use semver::{Version, VersionReq};

/// A range that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid semver range {range:?}: {reason}")]
pub(crate) struct RangeError {
    range: String,
    reason: String,
}

/// A parsed range: any of its alternatives matches.
#[derive(Debug, Clone)]
pub(crate) struct Range(Vec<VersionReq>);

/// One tag as the repository has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tag {
    /// The tag's name (`v1.2.0`).
    pub(crate) name: String,
    /// The commit it points to (peeled).
    pub(crate) sha: String,
    /// The commit's committer time (Unix seconds).
    pub(crate) time: i64,
}

const OPERATORS: &[char] = &['<', '>', '=', '~', '^', '!'];

impl Range {
    /// Parses a range.
    pub(crate) fn parse(text: &str) -> Result<Range, RangeError> {
        let err = |reason: &str| RangeError {
            range: text.to_owned(),
            reason: reason.to_owned(),
        };
        if text.trim().is_empty() {
            return Err(err("empty"));
        }
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let comparators = comparators(alternative).map_err(|r| err(&r))?;
            if comparators.is_empty() {
                return Err(err("an empty alternative"));
            }
            let req =
                VersionReq::parse(&comparators.join(", ")).map_err(|e| err(&e.to_string()))?;
            alternatives.push(req);
        }
        Ok(Range(alternatives))
    }

    /// Whether `version` is in the range.
    pub(crate) fn matches(&self, version: &Version) -> bool {
        self.0.iter().any(|req| req.matches(version))
    }

    /// The highest tag in the range (see the module docs for ties), if any.
    pub(crate) fn select<'t>(&self, tags: &'t [Tag]) -> Option<&'t Tag> {
        tags.iter()
            .filter_map(|t| Some((parse_tag(&t.name)?, t)))
            .filter(|(v, _)| self.matches(v))
            .max_by(|(va, a), (vb, b)| {
                va.cmp_precedence(vb)
                    .then(a.time.cmp(&b.time))
                    .then(a.name.cmp(&b.name))
            })
            .map(|(_, t)| t)
    }
}

/// The comparators of one alternative in the `semver` crate's syntax: space- or
/// comma-separated, an operator may stand apart from its version (`>= 1.0`), a bare version
/// means exactly it (Masterminds' rule; the crate would read it as `^`), `A - B` is `>=A, <=B`,
/// and versions lose a leading `v`.
fn comparators(alternative: &str) -> Result<Vec<String>, String> {
    let mut tokens: Vec<String> = Vec::new();
    let mut pending_op: Option<String> = None;
    for raw in alternative
        .split([' ', ',', '\t'])
        .filter(|t| !t.is_empty())
    {
        let token = match pending_op.take() {
            Some(op) => format!("{op}{raw}"),
            None => raw.to_owned(),
        };
        if token.chars().all(|c| OPERATORS.contains(&c)) && token != "-" {
            pending_op = Some(token);
            continue;
        }
        tokens.push(token);
    }
    if let Some(op) = pending_op {
        return Err(format!("operator {op:?} without a version"));
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens.get(i + 1).map(String::as_str) == Some("-") {
            let upper = tokens
                .get(i + 2)
                .ok_or_else(|| "a hyphen range without an upper bound".to_owned())?;
            out.push(format!(">={}", strip_v(&tokens[i])));
            out.push(format!("<={}", strip_v(upper)));
            i += 3;
            continue;
        }
        out.push(comparator(&tokens[i])?);
        i += 1;
    }
    Ok(out)
}

fn comparator(token: &str) -> Result<String, String> {
    let split = token
        .find(|c: char| !OPERATORS.contains(&c))
        .unwrap_or(token.len());
    let (op, version) = token.split_at(split);
    if op == "!=" || op == "!" {
        return Err("`!=` is not supported".to_owned());
    }
    let version = strip_v(version);
    if version.is_empty() {
        return Err(format!("operator {op:?} without a version"));
    }
    let wildcard = version.split('.').any(|p| p == "x" || p == "X" || p == "*");
    let op = if op.is_empty() && !wildcard { "=" } else { op };
    Ok(format!("{op}{version}"))
}

fn strip_v(version: &str) -> &str {
    version
        .strip_prefix('v')
        .or_else(|| version.strip_prefix('V'))
        .unwrap_or(version)
}

/// The version a tag names, if it names one: `MAJOR.MINOR.PATCH[-pre][+build]` with an
/// optional leading `v` and leading zeros allowed.
pub(crate) fn parse_tag(tag: &str) -> Option<Version> {
    let text = tag.strip_prefix('v').unwrap_or(tag);
    if let Ok(v) = Version::parse(text) {
        return Some(v);
    }
    // Leading zeros in the three numbers (`2024.01.05`): drop them and try again.
    let core_end = text.find(['-', '+']).unwrap_or(text.len());
    let (core, rest) = text.split_at(core_end);
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let trimmed: Vec<&str> = parts
        .iter()
        .map(|p| {
            let t = p.trim_start_matches('0');
            if t.is_empty() {
                "0"
            } else {
                t
            }
        })
        .collect();
    Version::parse(&format!("{}{rest}", trimmed.join("."))).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str, time: i64) -> Tag {
        Tag {
            name: name.to_owned(),
            sha: format!("sha-of-{name}"),
            time,
        }
    }

    fn pick(range: &str, tags: &[Tag]) -> Option<String> {
        Range::parse(range)
            .expect("range parses")
            .select(tags)
            .map(|t| t.name.clone())
    }

    #[test]
    fn the_highest_tag_in_the_range_should_win() {
        let tags = [
            tag("v1.1.0", 1),
            tag("v1.2.0", 2),
            tag("v2.0.0", 3),
            tag("latest", 4),
            tag("v1.3", 5),
        ];
        assert_eq!(pick(">=1.0.0 <2.0.0", &tags).as_deref(), Some("v1.2.0"));
        assert_eq!(pick(">= 1.0.0, < 2.0.0", &tags).as_deref(), Some("v1.2.0"));
        assert_eq!(pick("^1", &tags).as_deref(), Some("v1.2.0"));
        assert_eq!(pick("~1.1.0", &tags).as_deref(), Some("v1.1.0"));
        assert_eq!(pick("1.x", &tags).as_deref(), Some("v1.2.0"));
        assert_eq!(pick("*", &tags).as_deref(), Some("v2.0.0"));
        assert_eq!(pick("1.1.0", &tags).as_deref(), Some("v1.1.0"));
        assert_eq!(pick("v1.1.0 - v1.9", &tags).as_deref(), Some("v1.2.0"));
        assert_eq!(pick("<1.0.0 || >=2.0.0", &tags).as_deref(), Some("v2.0.0"));
        assert_eq!(pick(">=3.0.0", &tags), None);
    }

    #[test]
    fn pre_releases_should_be_chosen_only_when_the_range_names_one() {
        let tags = [tag("1.0.0", 1), tag("1.1.0-rc.1", 2)];
        assert_eq!(pick(">=1.0.0", &tags).as_deref(), Some("1.0.0"));
        assert_eq!(pick(">=1.1.0-rc.0", &tags).as_deref(), Some("1.1.0-rc.1"));
    }

    #[test]
    fn equal_versions_should_be_ordered_by_commit_time() {
        let tags = [tag("v1.0.0", 5), tag("1.0.0", 9), tag("1.0.0+build.1", 7)];
        assert_eq!(pick("1.x", &tags).as_deref(), Some("1.0.0"));
        let tags = [tag("v1.0.0", 9), tag("1.0.0", 5)];
        assert_eq!(pick("1.x", &tags).as_deref(), Some("v1.0.0"));
    }

    #[test]
    fn tags_should_parse_as_flux_reads_them() {
        assert_eq!(parse_tag("v1.2.3"), Version::parse("1.2.3").ok());
        assert_eq!(
            parse_tag("1.2.3-rc.1+b"),
            Version::parse("1.2.3-rc.1+b").ok()
        );
        assert_eq!(parse_tag("2024.01.05"), Version::parse("2024.1.5").ok());
        for bad in ["1.2", "v1", "release-1.2.3", "1.2.3.4", "", "x.y.z"] {
            assert_eq!(parse_tag(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_ranges_should_be_refused() {
        for bad in [
            "",
            "   ",
            ">=",
            "!=1.0.0",
            "banana",
            "1.0.0 -",
            ">=1.0.0 ||",
        ] {
            assert!(Range::parse(bad).is_err(), "{bad}");
        }
    }
}
