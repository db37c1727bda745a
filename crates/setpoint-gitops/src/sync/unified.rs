//! Unified diffs of two texts (`diff -u`'s format, three lines of context), for
//! `setpoint gitops diff`. Lines are matched by a longest common subsequence; texts too large
//! for that (over 4 million line pairs) are shown as all removed then all added.

/// Line pairs beyond which no alignment is computed.
const MAX_CELLS: usize = 4_000_000;
/// Lines of context around each change.
const CONTEXT: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Same,
    Removed,
    Added,
}

/// The edit script turning `old` into `new`, as (op, old index, new index).
fn script(old: &[&str], new: &[&str]) -> Vec<(Op, usize, usize)> {
    let (n, m) = (old.len(), new.len());
    if n.saturating_mul(m) > MAX_CELLS {
        let mut ops: Vec<_> = (0..n).map(|i| (Op::Removed, i, 0)).collect();
        ops.extend((0..m).map(|j| (Op::Added, n, j)));
        return ops;
    }
    // lcs[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if old[i] == new[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::with_capacity(n + m);
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            ops.push((Op::Same, i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            ops.push((Op::Removed, i, j));
            i += 1;
        } else {
            ops.push((Op::Added, i, j));
            j += 1;
        }
    }
    ops
}

/// The unified diff of `old` and `new` under the headers `old_name`/`new_name`; empty when the
/// texts are equal.
pub(crate) fn unified(old_name: &str, new_name: &str, old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let ops = script(&old_lines, &new_lines);
    if ops.iter().all(|(op, _, _)| *op == Op::Same) {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    let changed: Vec<usize> = (0..ops.len()).filter(|k| ops[*k].0 != Op::Same).collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let hunk = &ops[start..end];
        let old_count = hunk.iter().filter(|o| o.0 != Op::Added).count();
        let new_count = hunk.iter().filter(|o| o.0 != Op::Removed).count();
        let old_start = hunk[0].1 + usize::from(old_count > 0);
        let new_start = hunk[0].2 + usize::from(new_count > 0);
        out.push_str(&format!(
            "@@ -{old_start},{old_count} +{new_start},{new_count} @@\n"
        ));
        for (op, i, j) in hunk {
            let (sign, line) = match op {
                Op::Same => (' ', old_lines[*i]),
                Op::Removed => ('-', old_lines[*i]),
                Op::Added => ('+', new_lines[*j]),
            };
            out.push(sign);
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_should_have_no_diff() {
        assert_eq!(unified("a", "b", "x\ny\n", "x\ny\n"), "");
    }

    #[test]
    fn a_change_should_be_one_hunk_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        let diff = unified("live", "merged", old, new);
        assert_eq!(
            diff,
            "--- live\n+++ merged\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn creation_and_deletion_should_diff_against_nothing() {
        assert_eq!(
            unified("live", "merged", "", "a\nb\n"),
            "--- live\n+++ merged\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
        assert_eq!(
            unified("live", "merged", "a\n", ""),
            "--- live\n+++ merged\n@@ -1,1 +0,0 @@\n-a\n"
        );
    }
}
