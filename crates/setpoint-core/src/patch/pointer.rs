//! JSON pointers (RFC 6901) as kube-apiserver's JSON patch library (`evanphx/json-patch` v4)
//! reads them: the text before the first `/` is ignored, `~1` and `~0` are unescaped in one
//! pass, array indices are decimal with an optional sign, and a negative index counts from the
//! end.

/// A pointer split into the tokens leading to the parent and the last token.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Pointer {
    /// Unescaped tokens from the root to the parent of the location.
    pub(super) parents: Vec<String>,
    /// Unescaped last token: the member name or array index of the location.
    pub(super) last: String,
}

impl Pointer {
    /// Splits `path`. `None` for a pointer without any `/` (the whole document), which no
    /// operation but `replace` and `test` accepts.
    pub(super) fn parse(path: &str) -> Option<Pointer> {
        let (_, rest) = path.split_once('/')?;
        let mut tokens: Vec<String> = rest.split('/').map(unescape).collect();
        let last = tokens.pop().unwrap_or_default();
        Some(Pointer {
            parents: tokens,
            last,
        })
    }
}

/// Undoes RFC 6901 escaping: `~1` is `/`, `~0` is `~`; any other `~` stays as written.
pub(super) fn unescape(token: &str) -> String {
    if !token.contains('~') {
        return token.to_owned();
    }
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('~', Some('1')) => {
                out.push('/');
                chars.next();
            }
            ('~', Some('0')) => {
                out.push('~');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Parses an array index the way Go's `strconv.Atoi` does: optional `+`/`-`, decimal digits.
pub(super) fn parse_index(token: &str) -> Option<i64> {
    let digits = token.strip_prefix(['+', '-']).unwrap_or(token);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

/// Resolves `index` against an array of `len` elements for reading, replacing or removing: a
/// negative index counts from the end. `None` when it falls outside the array.
pub(super) fn resolve_existing(index: i64, len: usize) -> Option<usize> {
    let len_i = i64::try_from(len).ok()?;
    let resolved = if index < 0 { index + len_i } else { index };
    if (0..len_i).contains(&resolved) {
        usize::try_from(resolved).ok()
    } else {
        None
    }
}

/// Resolves `index` as an insertion point in an array of `len` elements: `0..=len`, or
/// negative from the end of the grown array (`-1` appends).
pub(super) fn resolve_insert(index: i64, len: usize) -> Option<usize> {
    resolve_existing(index, len + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_should_unescape_tilde_sequences_in_one_pass() {
        assert_eq!(unescape("a~1b"), "a/b");
        assert_eq!(unescape("m~0n"), "m~n");
        assert_eq!(unescape("~01"), "~1");
        assert_eq!(unescape("~2x~"), "~2x~");
        let p = Pointer::parse("/metadata/annotations/example.com~1key").unwrap();
        assert_eq!(p.parents, ["metadata", "annotations"]);
        assert_eq!(p.last, "example.com/key");
    }

    #[test]
    fn pointer_should_ignore_text_before_the_first_slash() {
        let p = Pointer::parse("spec/replicas").unwrap();
        assert!(p.parents.is_empty());
        assert_eq!(p.last, "replicas");
        assert_eq!(Pointer::parse(""), None);
        assert_eq!(Pointer::parse("/").unwrap().last, "");
    }

    #[test]
    fn index_should_parse_like_go_atoi() {
        assert_eq!(parse_index("0"), Some(0));
        assert_eq!(parse_index("01"), Some(1));
        assert_eq!(parse_index("+2"), Some(2));
        assert_eq!(parse_index("-1"), Some(-1));
        for bad in ["", "-", "+", "1a", " 1", "0x1", "99999999999999999999"] {
            assert_eq!(parse_index(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn negative_indices_should_count_from_the_end() {
        assert_eq!(resolve_existing(-1, 3), Some(2));
        assert_eq!(resolve_existing(-3, 3), Some(0));
        assert_eq!(resolve_existing(-4, 3), None);
        assert_eq!(resolve_existing(3, 3), None);
        assert_eq!(resolve_insert(3, 3), Some(3));
        assert_eq!(resolve_insert(-1, 3), Some(3));
        assert_eq!(resolve_insert(-4, 3), Some(0));
        assert_eq!(resolve_insert(4, 3), None);
    }
}
