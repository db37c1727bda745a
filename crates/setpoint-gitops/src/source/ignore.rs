//! Ignore rules: which paths of a commit are left out of its artifact, in `.gitignore` syntax
//! (a subset: see below), from three places in increasing priority — the default (`.git/`),
//! every `.sourceignore` file of the commit (each applying below its own directory), and
//! `spec.ignore` (applying from the root). The last pattern that matches a path decides.
//!
//! Supported: `#` comments and blank lines; `!` negation; a trailing `/` (directories only); a
//! leading `/` or any inner `/` anchors the pattern to its file's directory, otherwise it
//! matches a name at any depth; `*` (anything but `/`), `?` (one character but `/`), and `**`
//! as a whole segment (`**/x`: at any depth, `x/**`: everything inside, `a/**/b`: zero or more
//! directories between); `\` escapes a leading `#` or `!`. Not supported: character classes
//! (`[a-z]` is matched literally) and escaped trailing spaces. As in git, a path inside an
//! ignored directory stays ignored whatever a later `!` says (the export removes the
//! directory whole).

/// One pattern, with the directory (segments from the root) it applies below.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    domain: Vec<String>,
    segments: Vec<String>,
    negate: bool,
    dir_only: bool,
    anchored: bool,
}

/// Ignore patterns, in priority order (later wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    patterns: Vec<Pattern>,
}

impl Rules {
    /// The default rules: `.git/` at any depth.
    pub(crate) fn defaults() -> Rules {
        let mut rules = Rules::default();
        rules.add(".git/", "");
        rules
    }

    /// Adds the patterns of `text` (one a line) applying below `domain` (a `/`-separated path
    /// from the root; empty for the root).
    pub(crate) fn add(&mut self, text: &str, domain: &str) {
        let domain: Vec<String> = domain
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        for line in text.lines() {
            if let Some(p) = parse_line(line, &domain) {
                self.patterns.push(p);
            }
        }
    }

    /// Adds every pattern of `other` after these (so `other`'s win).
    pub(crate) fn extend(&mut self, other: Rules) {
        self.patterns.extend(other.patterns);
    }

    /// Whether `path` (relative, `/`-separated) is ignored; `is_dir` says whether it is a
    /// directory.
    pub(crate) fn is_ignored(&self, path: &str, is_dir: bool) -> bool {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        self.patterns
            .iter()
            .rev()
            .find(|p| p.matches(&segments, is_dir))
            .is_some_and(|p| !p.negate)
    }
}

fn parse_line(line: &str, domain: &[String]) -> Option<Pattern> {
    let mut text = line.trim_end();
    if text.is_empty() || text.starts_with('#') {
        return None;
    }
    let mut negate = false;
    if let Some(rest) = text.strip_prefix('!') {
        negate = true;
        text = rest;
    } else if let Some(rest) = text.strip_prefix('\\') {
        text = rest;
    }
    let dir_only = text.ends_with('/');
    let text = text.trim_end_matches('/');
    let anchored = text.contains('/');
    let segments: Vec<String> = text
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if segments.is_empty() {
        return None;
    }
    Some(Pattern {
        domain: domain.to_vec(),
        segments,
        negate,
        dir_only,
        anchored,
    })
}

impl Pattern {
    fn matches(&self, path: &[&str], is_dir: bool) -> bool {
        if self.dir_only && !is_dir {
            return false;
        }
        if path.len() <= self.domain.len() || !self.domain.iter().zip(path).all(|(d, p)| d == p) {
            return false;
        }
        let rest = &path[self.domain.len()..];
        if self.anchored {
            match_segments(&self.segments, rest)
        } else {
            rest.last()
                .is_some_and(|name| match_segment(&self.segments[0], name))
        }
    }
}

/// Whether the pattern's segments match the path's, `**` standing for zero or more segments
/// (one or more when it ends the pattern).
fn match_segments(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            if rest.is_empty() {
                return !path.is_empty();
            }
            (0..=path.len()).any(|skip| match_segments(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((name, path_rest)) => {
                match_segment(first, name) && match_segments(rest, path_rest)
            }
            None => false,
        },
    }
}

/// Whether one name matches one glob segment (`*`, `?`; a `**` inside a segment is a `*`).
fn match_segment(glob: &str, name: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some('*') => {
                while glob.get(g) == Some(&'*') {
                    g += 1;
                }
                star = Some((g, n));
            }
            Some('?') => {
                g += 1;
                n += 1;
            }
            Some(c) if *c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Rules {
        let mut r = Rules::defaults();
        r.add(text, "");
        r
    }

    #[test]
    fn names_without_a_slash_should_match_at_any_depth() {
        let r = rules("*.md\nsecret?.yaml\n");
        assert!(r.is_ignored("README.md", false));
        assert!(r.is_ignored("docs/deep/a.md", false));
        assert!(r.is_ignored("secret1.yaml", false));
        assert!(!r.is_ignored("secret12.yaml", false));
        assert!(!r.is_ignored("app.yaml", false));
        assert!(r.is_ignored(".git", true));
        assert!(r.is_ignored("sub/.git", true));
    }

    #[test]
    fn slashes_should_anchor_and_trailing_slashes_should_mean_directories() {
        let r = rules("/top.yaml\nbuild/\nconfig/dev/*.yaml\n");
        assert!(r.is_ignored("top.yaml", false));
        assert!(!r.is_ignored("sub/top.yaml", false));
        assert!(r.is_ignored("build", true));
        assert!(r.is_ignored("x/build", true));
        assert!(!r.is_ignored("build", false));
        assert!(r.is_ignored("config/dev/a.yaml", false));
        assert!(!r.is_ignored("config/dev/sub/a.yaml", false));
        assert!(!r.is_ignored("other/config/dev/a.yaml", false));
    }

    #[test]
    fn double_stars_should_span_directories() {
        let r = rules("**/tmp\nlogs/**\na/**/z.yaml\n");
        assert!(r.is_ignored("tmp", true));
        assert!(r.is_ignored("x/y/tmp", false));
        assert!(r.is_ignored("logs/a", false));
        assert!(r.is_ignored("logs/a/b", false));
        assert!(!r.is_ignored("logs", true));
        assert!(r.is_ignored("a/z.yaml", false));
        assert!(r.is_ignored("a/b/c/z.yaml", false));
        assert!(!r.is_ignored("b/z.yaml", false));
    }

    #[test]
    fn negation_should_reinclude_and_the_last_match_should_win() {
        let r = rules("# comment\n\n*.yaml\n!keep.yaml\n\\#hash\n");
        assert!(r.is_ignored("a.yaml", false));
        assert!(!r.is_ignored("keep.yaml", false));
        assert!(!r.is_ignored("d/keep.yaml", false));
        assert!(r.is_ignored("#hash", false));
        let r = rules("!keep.yaml\n*.yaml\n");
        assert!(r.is_ignored("keep.yaml", false));
    }

    #[test]
    fn sourceignore_patterns_should_apply_below_their_directory_only() {
        let mut r = Rules::defaults();
        r.add("*.txt\n/local.yaml\n", "apps/web");
        assert!(r.is_ignored("apps/web/a.txt", false));
        assert!(r.is_ignored("apps/web/deep/a.txt", false));
        assert!(r.is_ignored("apps/web/local.yaml", false));
        assert!(!r.is_ignored("apps/web/deep/local.yaml", false));
        assert!(!r.is_ignored("apps/a.txt", false));
        assert!(!r.is_ignored("a.txt", false));
        // spec.ignore added after wins over the .sourceignore.
        let mut spec = Rules::default();
        spec.add("!apps/web/keep.txt\n", "");
        r.extend(spec);
        assert!(!r.is_ignored("apps/web/keep.txt", false));
    }

    #[test]
    fn globs_should_backtrack() {
        assert!(match_segment("a*b*c", "aXbYbZc"));
        assert!(match_segment("*", ""));
        assert!(!match_segment("a*b", "aXbc"));
        assert!(match_segment("**.yaml", "x.yaml"));
        assert!(!match_segment("?", ""));
    }
}
