//! The parameters operations declare: path segments and query parameters, grouped by the
//! kinds of operation that take them, in the order kube-apiserver lists them.

/// Where a parameter goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Location {
    /// A `{name}` segment of the path; always required.
    Path,
    /// A query parameter; never required.
    Query,
}

/// A parameter's JSON type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Type {
    String,
    Boolean,
    Integer,
}

impl Type {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Boolean => "boolean",
            Type::Integer => "integer",
        }
    }
}

/// One parameter of an operation.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Param {
    pub(super) name: &'static str,
    pub(super) location: Location,
    pub(super) ty: Type,
    pub(super) description: &'static str,
}

const fn path(name: &'static str, description: &'static str) -> Param {
    Param {
        name,
        location: Location::Path,
        ty: Type::String,
        description,
    }
}

const fn query(name: &'static str, ty: Type, description: &'static str) -> Param {
    Param {
        name,
        location: Location::Query,
        ty,
        description,
    }
}

/// `{name}`.
pub(super) const NAME: Param = path("name", "name of the object");
/// `{namespace}`.
pub(super) const NAMESPACE: Param = path(
    "namespace",
    "object name and auth scope, such as for teams and projects",
);

/// `pretty`, on every operation.
pub(super) const PRETTY: Param = query(
    "pretty",
    Type::String,
    "If 'true', then the output is pretty printed.",
);

const DRY_RUN: Param = query("dryRun", Type::String, "When present, indicates that modifications should not be persisted. The only valid value is All: all dry run stages are processed.");
const FIELD_MANAGER: Param = query("fieldManager", Type::String, "A name associated with the actor or entity that is making these changes. At most 128 printable characters. Required for apply patches, optional otherwise.");
/// `fieldValidation`: kubectl looks for it on PATCH operations to decide that the server
/// validates fields, and then sends `fieldValidation=Strict`.
pub(super) const FIELD_VALIDATION: Param = query("fieldValidation", Type::String, "How the server treats unknown and duplicate fields in the request body: Ignore drops them silently, Warn drops them with a warning per field, Strict fails the request on the first one.");
const FORCE: Param = query("force", Type::Boolean, "Force an apply request to take ownership of conflicting fields. Must be unset for other patch types.");

/// Parameters of POST and PUT, after the path parameters.
pub(super) const WRITE: &[&Param] = &[&DRY_RUN, &FIELD_MANAGER, &FIELD_VALIDATION, &PRETTY];
/// Parameters of PATCH, after the path parameters.
pub(super) const PATCH: &[&Param] = &[&DRY_RUN, &FIELD_MANAGER, &FIELD_VALIDATION, &FORCE, &PRETTY];
/// Parameters of GET on an object, after the path parameters.
pub(super) const READ: &[&Param] = &[&PRETTY];

const ALLOW_WATCH_BOOKMARKS: Param = query(
    "allowWatchBookmarks",
    Type::Boolean,
    "Requests watch events of type BOOKMARK. Servers may ignore it.",
);
const CONTINUE: Param = query(
    "continue",
    Type::String,
    "The continue token of a previous chunked list, to get its next chunk.",
);
const FIELD_SELECTOR: Param = query(
    "fieldSelector",
    Type::String,
    "Restricts the returned objects by their fields.",
);
const LABEL_SELECTOR: Param = query(
    "labelSelector",
    Type::String,
    "Restricts the returned objects by their labels.",
);
const LIMIT: Param = query("limit", Type::Integer, "The maximum number of objects to return; more may be fetched with the continue token of the response.");
const RESOURCE_VERSION: Param = query(
    "resourceVersion",
    Type::String,
    "Which resource version to serve the request from; see resourceVersionMatch.",
);
const RESOURCE_VERSION_MATCH: Param = query(
    "resourceVersionMatch",
    Type::String,
    "How resourceVersion applies to list calls: Exact or NotOlderThan.",
);
const SEND_INITIAL_EVENTS: Param = query("sendInitialEvents", Type::Boolean, "With watch=true, starts the stream with synthetic ADDED events for the current objects, then a bookmark.");
const TIMEOUT_SECONDS: Param = query(
    "timeoutSeconds",
    Type::Integer,
    "Timeout for the list or watch call, regardless of activity.",
);
const WATCH: Param = query(
    "watch",
    Type::Boolean,
    "Watch for changes to the described objects and return them as a stream of events.",
);

/// Parameters of a list, a watch, and the selection of a DELETE on a collection.
pub(super) const LIST: &[&Param] = &[
    &ALLOW_WATCH_BOOKMARKS,
    &CONTINUE,
    &FIELD_SELECTOR,
    &LABEL_SELECTOR,
    &LIMIT,
    &PRETTY,
    &RESOURCE_VERSION,
    &RESOURCE_VERSION_MATCH,
    &SEND_INITIAL_EVENTS,
    &TIMEOUT_SECONDS,
    &WATCH,
];

const GRACE_PERIOD_SECONDS: Param = query(
    "gracePeriodSeconds",
    Type::Integer,
    "The duration in seconds before the object should be deleted; zero means immediately.",
);
const ORPHAN_DEPENDENTS: Param = query(
    "orphanDependents",
    Type::Boolean,
    "Deprecated: use propagationPolicy.",
);
const PROPAGATION_POLICY: Param = query(
    "propagationPolicy",
    Type::String,
    "Whether and how garbage collection is performed: Orphan, Background or Foreground.",
);

/// Parameters of DELETE on an object, after the path parameters.
pub(super) const DELETE: &[&Param] = &[
    &DRY_RUN,
    &GRACE_PERIOD_SECONDS,
    &ORPHAN_DEPENDENTS,
    &PRETTY,
    &PROPAGATION_POLICY,
];

/// Parameters of DELETE on a collection, after the path parameters.
pub(super) const DELETE_COLLECTION: &[&Param] = &[
    &CONTINUE,
    &DRY_RUN,
    &FIELD_SELECTOR,
    &GRACE_PERIOD_SECONDS,
    &LABEL_SELECTOR,
    &LIMIT,
    &ORPHAN_DEPENDENTS,
    &PRETTY,
    &PROPAGATION_POLICY,
    &RESOURCE_VERSION,
    &RESOURCE_VERSION_MATCH,
    &SEND_INITIAL_EVENTS,
    &TIMEOUT_SECONDS,
];

/// Parameters of a pod's `log`, after the path parameters.
pub(super) const LOG: &[&Param] = &[
    &query(
        "container",
        Type::String,
        "The container for which to stream logs. Defaults to the only container if there is one.",
    ),
    &query("follow", Type::Boolean, "Follow the log stream of the pod."),
    &query(
        "insecureSkipTLSVerifyBackend",
        Type::Boolean,
        "Do not verify the serving certificate of the backend the logs come from.",
    ),
    &query(
        "limitBytes",
        Type::Integer,
        "The number of bytes to read from the server before terminating the log output.",
    ),
    &PRETTY,
    &query(
        "previous",
        Type::Boolean,
        "Return the logs of the previous terminated container.",
    ),
    &query(
        "sinceSeconds",
        Type::Integer,
        "A relative time in seconds before the current time from which to show logs.",
    ),
    &query(
        "sinceTime",
        Type::String,
        "An RFC3339 timestamp from which to show logs.",
    ),
    &query(
        "stream",
        Type::String,
        "Which container log stream to return: All, Stdout or Stderr.",
    ),
    &query(
        "tailLines",
        Type::Integer,
        "The number of lines from the end of the logs to show.",
    ),
    &query(
        "timestamps",
        Type::Boolean,
        "Prefix every line of log output with an RFC3339 timestamp.",
    ),
];
