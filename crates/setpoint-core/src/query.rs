//! URL query strings decoded the way Go's `net/url` reads them for kube-apiserver and the
//! kubelet: `&`-separated `key=value` pairs, `%XX` escapes and `+` as a space. Lenient, as
//! clients expect: an empty segment (kube-rs sends `?&limit=500`) or an empty key is skipped,
//! a key without `=` has the empty value, and a broken escape (`100%`, `%zz`) stays as written.

use std::collections::BTreeMap;

/// The decoded `key=value` pairs of a query (without its `?`), in order, repeats kept.
#[must_use]
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = percent_decode(k);
            (!k.is_empty()).then(|| (k, percent_decode(v)))
        })
        .collect()
}

/// The decoded query as a map; a repeated key keeps its last value.
#[must_use]
pub fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
    query_pairs(query.unwrap_or_default()).into_iter().collect()
}

/// Decodes `%XX` escapes and `+` (as a space); an invalid escape stays as it is, and bytes that
/// do not decode to UTF-8 become U+FFFD.
#[must_use]
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decode_should_decode_escapes_and_keep_broken_ones() {
        assert_eq!(percent_decode("a%3Ab+c"), "a:b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%41%"), "A%");
    }

    #[test]
    fn query_pairs_should_keep_order_and_repeats_and_skip_empty_keys() {
        assert_eq!(
            query_pairs("&a=1&&=x&b&a=2"),
            [
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), String::new()),
                ("a".to_owned(), "2".to_owned()),
            ]
        );
        assert!(query_pairs("").is_empty());
    }

    #[test]
    fn parse_query_should_be_lenient_and_decode_escapes() {
        let q = parse_query(Some(
            "&limit=500&labelSelector=app%3Dweb%2Ctier+in+(a)&watch&limit=7",
        ));
        assert_eq!(q["limit"], "7");
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "");
        assert!(parse_query(None).is_empty());
    }
}
