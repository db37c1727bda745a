//! The static token file (kube-apiserver's `--token-auth-file`): CSV lines
//! `token,user,uid,"group1,group2"` (the groups column is optional; further columns are
//! ignored; blank lines and lines starting with `#` are skipped). The file is re-read when its
//! modification time changes (looked at most once a second), so `setpoint kubeconfig` can
//! append users to a running server; a file that goes away stops authenticating anyone, and a
//! malformed one keeps the last good contents (with a warning).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use super::User;

/// How often the file's modification time is looked at.
const RECHECK: Duration = Duration::from_secs(1);

/// A static token file and the users it holds.
#[derive(Debug)]
pub(crate) struct StaticTokens {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// When the file's modification time was last looked at.
    checked: Option<Instant>,
    /// The modification time of the contents loaded (`None`: no file).
    modified: Option<SystemTime>,
    users: HashMap<String, User>,
}

/// Why a token file does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub(crate) struct ParseError {
    line: usize,
    reason: &'static str,
}

impl StaticTokens {
    /// The tokens of the file at `path` (which may not exist yet).
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            state: Mutex::new(State::default()),
        }
    }

    /// The user `token` stands for.
    pub(crate) fn authenticate(&self, token: &str) -> Option<User> {
        let mut state = self.state.lock();
        let now = Instant::now();
        if state
            .checked
            .is_none_or(|at| now.duration_since(at) >= RECHECK)
        {
            state.checked = Some(now);
            self.reload(&mut state);
        }
        state.users.get(token).cloned()
    }

    fn reload(&self, state: &mut State) {
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        if modified == state.modified && (modified.is_some() || state.users.is_empty()) {
            return;
        }
        let Some(stamp) = modified else {
            state.users.clear();
            state.modified = None;
            return;
        };
        let parsed = std::fs::read_to_string(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|text| parse(&text).map_err(|e| e.to_string()));
        match parsed {
            Ok(users) => {
                state.users = users;
                state.modified = Some(stamp);
            }
            Err(error) => {
                tracing::warn!(file = %self.path.display(), %error, "cannot load the static token file; keeping what was loaded");
                state.modified = Some(stamp);
            }
        }
    }
}

/// The users of a token file's contents, by token.
pub(crate) fn parse(text: &str) -> Result<HashMap<String, User>, ParseError> {
    let mut users = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields = csv_fields(trimmed).ok_or(ParseError {
            line: line_no,
            reason: "unbalanced quotes",
        })?;
        if fields.len() < 3 {
            return Err(ParseError {
                line: line_no,
                reason: "a line needs at least token, user and uid",
            });
        }
        if fields[0].is_empty() {
            return Err(ParseError {
                line: line_no,
                reason: "empty token",
            });
        }
        if fields[1].is_empty() {
            return Err(ParseError {
                line: line_no,
                reason: "empty user name",
            });
        }
        let groups = fields.get(3).map_or_else(Vec::new, |groups| {
            groups
                .split(',')
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(str::to_owned)
                .collect()
        });
        let mut user = User::new(fields[1].clone(), groups);
        user.uid = fields[2].clone();
        if users.insert(fields[0].clone(), user).is_some() {
            tracing::warn!(
                line = line_no,
                "duplicate token in the static token file: the later line wins"
            );
        }
    }
    Ok(users)
}

/// The fields of one CSV line (RFC 4180 quoting: `"a,b"`, `""` for a quote); `None` when a
/// quote is not closed.
fn csv_fields(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields.into_iter().map(|f| f.trim().to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_should_give_users_with_uid_and_groups() {
        let users = parse(
            "# comment\n\ntok1,alice,1001,\"dev,ops\"\ntok2,bob,1002\ntok3,carol,1003,solo,ignored\n",
        )
        .unwrap();
        assert_eq!(users["tok1"].name, "alice");
        assert_eq!(users["tok1"].uid, "1001");
        assert_eq!(users["tok1"].groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!(users["tok2"].groups, ["system:authenticated"]);
        assert_eq!(users["tok3"].groups, ["solo", "system:authenticated"]);
        assert_eq!(parse("tok,user").unwrap_err().line, 1);
        assert!(parse("ok,a,1\ntok,\"user,1").is_err());
        assert!(parse(",user,1").is_err());
    }

    #[test]
    fn the_file_should_be_reread_when_it_changes_and_forgotten_when_it_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        let tokens = StaticTokens::new(path.clone());
        assert_eq!(tokens.authenticate("t1"), None);
        std::fs::write(&path, "t1,alice,1\n").unwrap();
        tokens.state.lock().checked = None;
        assert_eq!(tokens.authenticate("t1").unwrap().name, "alice");
        std::fs::write(&path, "t1,alice,1\nt2,bob,2\n").unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        tokens.state.lock().checked = None;
        assert_eq!(tokens.authenticate("t2").unwrap().name, "bob");
        std::fs::remove_file(&path).unwrap();
        tokens.state.lock().checked = None;
        assert_eq!(tokens.authenticate("t1"), None);
    }
}
