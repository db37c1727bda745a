//! A scan of compact JSON that finds an object's members without decoding their values: where
//! each key and value lies. A restarted server loads every stored object into its watch cache;
//! for an object stored in its served form, only `metadata` (and the fields a field selector
//! may read) needs decoding, and the scan finds them and the place the `resourceVersion`
//! goes. Anything but compact JSON (whitespace between tokens, an escaped key) is refused, and
//! the caller decodes the object whole instead.

use std::ops::Range;

/// One member of a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Member {
    /// Where its key starts (the opening quote).
    pub(super) at: usize,
    /// The key, without its quotes (a key with escapes is refused).
    pub(super) key: Range<usize>,
    /// Its value.
    pub(super) value: Range<usize>,
}

/// The members of the object whose `{` is at `at`, and the offset just past its `}`.
pub(super) fn members(b: &[u8], at: usize) -> Option<(Vec<Member>, usize)> {
    if b.get(at) != Some(&b'{') {
        return None;
    }
    let mut members = Vec::new();
    let mut i = at + 1;
    if b.get(i) == Some(&b'}') {
        return Some((members, i + 1));
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(b, i)?;
        let key = i + 1..key_end - 1;
        if b[key.clone()].contains(&b'\\') || b.get(key_end) != Some(&b':') {
            return None;
        }
        let value_end = skip_value(b, key_end + 1)?;
        members.push(Member {
            at: i,
            key,
            value: key_end + 1..value_end,
        });
        match b.get(value_end) {
            Some(b',') => i = value_end + 1,
            Some(b'}') => return Some((members, value_end + 1)),
            _ => return None,
        }
    }
}

/// The offset just past the value that starts at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => skip_container(b, i),
        _ => {
            let len = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']'))
                .unwrap_or(b.len() - i);
            let scalar = &b[i..i + len];
            let plain = !scalar.is_empty()
                && scalar
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'));
            plain.then_some(i + len)
        }
    }
}

/// The offset just past the string whose opening quote is at `i`.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
        if b[j] == b'\\' {
            j += 2;
        } else {
            return Some(j + 1);
        }
    }
}

/// The offset just past the object or array that opens at `i`.
fn skip_container(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        match *b.get(j)? {
            b'"' => {
                j = skip_string(b, j)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            b' ' | b'\n' | b'\r' | b'\t' => return None,
            _ => {}
        }
        j += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(b: &[u8]) -> Vec<(String, String)> {
        let (members, end) = members(b, 0).expect("an object");
        assert_eq!(end, b.len());
        members
            .iter()
            .map(|m| {
                assert_eq!(b[m.at], b'"');
                (
                    String::from_utf8(b[m.key.clone()].to_vec()).unwrap(),
                    String::from_utf8(b[m.value.clone()].to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn members_should_be_found_with_their_values_whole() {
        let json = br#"{"kind":"ConfigMap","metadata":{"name":"a\"}","labels":{"x":"[{"}},"data":{"k":"v\\"},"n":-1.5e3,"t":true,"z":null,"l":[1,{"a":[]}],"e":{}}"#;
        assert_eq!(
            keys(json),
            [
                ("kind", r#""ConfigMap""#),
                ("metadata", r#"{"name":"a\"}","labels":{"x":"[{"}}"#),
                ("data", r#"{"k":"v\\"}"#),
                ("n", "-1.5e3"),
                ("t", "true"),
                ("z", "null"),
                ("l", r#"[1,{"a":[]}]"#),
                ("e", "{}"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(keys(b"{}"), []);
    }

    #[test]
    fn anything_but_compact_json_should_be_refused() {
        for bad in [
            &br#"{"a": 1}"#[..],
            br#"{ "a":1}"#,
            br#"{"a":{"b": 1}}"#,
            br#"{"a\u0062":1}"#,
            br#"{"a":1"#,
            br#"{"a":"1}"#,
            br#"{"a":}"#,
            br#"{"a":1,}"#,
            br#"["a"]"#,
            br#"{"a":[1,2}"#,
            b"",
        ] {
            let refused = match members(bad, 0) {
                None => true,
                Some((_, end)) => end != bad.len(),
            };
            assert!(refused, "{}", String::from_utf8_lossy(bad));
        }
    }
}
