//! Tests of `label_parser.rs`.

use crate::selector::LabelSelector;

const NAME_PART_SHAPE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_SHAPE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Parses `input` and returns its canonical form.
fn canonical(input: &str) -> String {
    match LabelSelector::parse(input) {
        Ok(selector) => selector.to_string(),
        Err(e) => panic!("{input:?} should parse, got: {e}"),
    }
}

/// Parses `input`, which must fail, and returns the error message.
fn error(input: &str) -> String {
    match LabelSelector::parse(input) {
        Ok(selector) => panic!("{input:?} should not parse, got {selector:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parse_should_accept_every_operator() {
    for (input, expected) in [
        ("", ""),
        ("x=a", "x=a"),
        ("x==a", "x==a"),
        ("x!=a", "x!=a"),
        ("x", "x"),
        ("!x", "!x"),
        ("x in (a,b)", "x in (a,b)"),
        ("x notin (a)", "x notin (a)"),
        ("x>1", "x>1"),
        ("x<10", "x<10"),
        ("x>01", "x>01"),
        ("example.com/x=y", "example.com/x=y"),
        ("x=A.b_c-9", "x=A.b_c-9"),
    ] {
        assert_eq!(canonical(input), expected, "{input:?}");
    }
}

#[test]
fn parse_should_agree_with_apimachinery_on_its_classic_cases() {
    for (input, expected) in [
        ("\rx", "x"),
        ("x= ,z= ", "x=,z="),
        ("x>1,z<5", "x>1,z<5"),
        ("x notin ( )", "x notin ()"),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
        ),
        ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
        (
            "x notin (abc,,def),bar,z in (),w",
            "bar,w,x notin (,abc,def),z in ()",
        ),
    ] {
        assert_eq!(canonical(input), expected, "{input:?}");
    }
    for input in [
        "x=a||y=b",
        "x==a==b",
        "!x=a",
        "x<a",
        "x,,y",
        ",x,y",
        "x nott in (y)",
        "a in (xyz),",
        "a in (xyz)b notin ()",
        "a in (xyz abc)",
        "a notin(",
        "a (",
        "(",
    ] {
        assert!(
            LabelSelector::parse(input).is_err(),
            "{input:?} should not parse"
        );
    }
    assert_eq!(
        error("x==a==b"),
        "found '==', expected: ',' or 'end of string'"
    );
}

#[test]
fn parse_should_tolerate_blanks_between_tokens() {
    assert_eq!(canonical("  x  =  a  "), "x=a");
    assert_eq!(canonical("x=a, y!=b"), "x=a,y!=b");
    assert_eq!(canonical("\tx\r\n in\n(\ta ,b ) "), "x in (a,b)");
    assert_eq!(canonical(" ! x "), "!x");
    assert_eq!(canonical("x in(a)"), "x in (a)");
    assert_eq!(canonical("x notin(a)"), "x notin (a)");
    assert_eq!(canonical("   "), "");
}

#[test]
fn parse_should_take_an_omitted_value_as_empty() {
    assert_eq!(canonical("x="), "x=");
    assert_eq!(canonical("x==,y"), "x==,y");
    assert_eq!(canonical("x!="), "x!=");
    assert_eq!(canonical("x in ()"), "x in ()");
    assert_eq!(canonical("x in (,)"), "x in ()");
    assert_eq!(canonical("x in (a,,b)"), "x in (,a,b)");
    assert_eq!(canonical("x in (,a)"), "x in (,a)");
    assert_eq!(canonical("x notin (a,)"), "x notin (,a)");
}

#[test]
fn parse_should_sort_and_deduplicate_set_values() {
    assert_eq!(canonical("x in (c,a,b,a)"), "x in (a,b,c)");
}

#[test]
fn parse_should_treat_in_and_notin_as_names_where_an_identifier_is_expected() {
    assert_eq!(canonical("in"), "in");
    assert_eq!(canonical("in in (in,notin)"), "in in (in,notin)");
    assert_eq!(canonical("notin=in"), "notin=in");
    assert_eq!(canonical("!notin"), "!notin");
}

#[test]
fn parse_should_stop_at_a_nul_where_a_token_starts_and_skip_one_after_a_token() {
    // Regression guard for a lexer quirk of apimachinery kept on purpose: it reads bytes
    // and takes NUL as the end of input.
    assert_eq!(canonical("x=a \u{0}y=b"), "x=a");
    assert_eq!(canonical("x\u{0}=a"), "x=a");
    assert_eq!(
        error("x=a\u{0}y"),
        "found 'y', expected: ',' or 'end of string'"
    );
}

#[test]
fn parse_should_reject_junk_between_requirements_without_the_requirement_prefix() {
    assert_eq!(
        error(","),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        error("("),
        "found '(', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        error("!=a"),
        "found '!=', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(error("x=a,"), "found '', expected: identifier after ','");
    assert_eq!(error("x=a,,y"), "found ',', expected: identifier after ','");
    assert_eq!(
        error("x=a b"),
        "found 'b', expected: ',' or 'end of string'"
    );
    assert_eq!(error("x=a)"), "found ')', expected: ',' or 'end of string'");
    assert_eq!(error("!x=a"), "found '=', expected: ',' or 'end of string'");
}

#[test]
fn parse_should_reject_malformed_requirements_with_the_requirement_prefix() {
    for (input, detail) in [
        ("x y", "found 'y', expected: in, notin, =, ==, !=, gt, lt"),
        ("x (", "found '(', expected: in, notin, =, ==, !=, gt, lt"),
        ("x!y", "found '!', expected: in, notin, =, ==, !=, gt, lt"),
        ("!", "found '', expected: identifier"),
        ("!!x", "found '!', expected: identifier"),
        ("x=(", "found '(', expected: identifier"),
        ("x=!y", "found '!', expected: identifier"),
        ("x===y", "found '=', expected: identifier"),
        ("x in a", "found 'a' expected: '('"),
        ("x in", "found '' expected: '('"),
        ("x in (", "found '', expected: ',', ')' or identifier"),
        ("x in (=)", "found '=', expected: ',', ')' or identifier"),
        ("x in (a", "found '', expected: ',' or ')'"),
        ("x in (a b)", "found 'b', expected: ',' or ')'"),
        ("x in (,,)", "found ')', expected: ',', or identifier"),
        ("x in (a,=)", "found '=', expected: ',', or identifier"),
    ] {
        assert_eq!(
            error(input),
            format!("unable to parse requirement: {detail}"),
            "{input:?}"
        );
    }
}

#[test]
fn parse_should_report_an_invalid_key_with_a_nil_path_like_kube_apiserver() {
    // Text observed from kube-apiserver for `kubectl get pods -l app:monolith`.
    assert_eq!(
        error("app:monolith"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"app:monolith\": {NAME_PART_SHAPE}"
        )
    );
    assert_eq!(
        error("x,-y"),
        format!("unable to parse requirement: <nil>: Invalid value: \"-y\": {NAME_PART_SHAPE}")
    );
    assert_eq!(
        error("a/"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"a/\": name part must be non-empty; {NAME_PART_SHAPE}"
        )
    );
    assert!(error("app.kubernetes_io/name=v").starts_with(
        "unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": prefix part a lowercase RFC 1123 subdomain"
    ));
    assert!(error("a/b/c ?=? def").starts_with(
        "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must"
    ));
    assert!(error("é=1").starts_with("unable to parse requirement: <nil>: Invalid value: \"é\""));
}

#[test]
fn parse_should_report_invalid_values_with_their_index_and_key() {
    assert_eq!(
        error("x=a@b"),
        format!("unable to parse requirement: values[0][x]: Invalid value: \"a@b\": {VALUE_SHAPE}")
    );
    assert_eq!(
        error("x in (a,-b)"),
        format!("unable to parse requirement: values[0][x]: Invalid value: \"-b\": {VALUE_SHAPE}")
    );
    assert_eq!(
        error("x notin (-b,-a)"),
        format!(
            "unable to parse requirement: [values[0][x]: Invalid value: \"-a\": {VALUE_SHAPE}, values[1][x]: Invalid value: \"-b\": {VALUE_SHAPE}]"
        )
    );
    assert_eq!(
        error(&format!("x={}", "v".repeat(64))),
        format!(
            "unable to parse requirement: values[0][x]: Invalid value: \"{}\": must be no more than 63 characters",
            "v".repeat(64)
        )
    );
}

#[test]
fn parse_should_require_an_integer_for_greater_and_less_than() {
    assert_eq!(
        error("x>a"),
        "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert_eq!(
        error("x<"),
        "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert_eq!(
        error("x>99999999999999999999"),
        "unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    // "-1" is an integer but not a valid label value.
    assert_eq!(
        error("x>-1"),
        format!("unable to parse requirement: values[0][x]: Invalid value: \"-1\": {VALUE_SHAPE}")
    );
}
