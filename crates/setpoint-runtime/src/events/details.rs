//! What a caller says when it records an Event: who reports ([`Reporter`]) and what happened
//! ([`EventDetails`]).

use k8s_openapi::api::core::v1::ObjectReference;

/// The component recording Events: `reportingController` and `reportingInstance` of each Event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reporter {
    /// The controller's name, e.g. `example.com/widget-controller`.
    pub controller: String,
    /// This replica's name, e.g. the pod name.
    pub instance: String,
}

impl Reporter {
    /// A reporter named `controller`, instance `instance`.
    pub fn new(controller: impl Into<String>, instance: impl Into<String>) -> Reporter {
        Reporter {
            controller: controller.into(),
            instance: instance.into(),
        }
    }
}

/// An Event's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Routine: something happened as expected.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What happened to the object an Event is about.
///
/// ```
/// use setpoint_runtime::EventDetails;
/// let details = EventDetails::warning("BackOff", "Reconciling").with_note("image pull failed");
/// # let _ = details;
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct EventDetails {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why, in UpperCamelCase (`reason`, at most 128 characters).
    pub reason: String,
    /// What was done or failed, in UpperCamelCase (`action`, at most 128 characters).
    pub action: String,
    /// A human-readable description (`note`; cut to 1 kB, the API's limit).
    pub note: Option<String>,
    /// A second object involved (`related`), e.g. the pod a controller created.
    pub related: Option<ObjectReference>,
}

impl EventDetails {
    /// A Normal event.
    pub fn normal(reason: impl Into<String>, action: impl Into<String>) -> EventDetails {
        Self::new(EventType::Normal, reason, action)
    }

    /// A Warning event.
    pub fn warning(reason: impl Into<String>, action: impl Into<String>) -> EventDetails {
        Self::new(EventType::Warning, reason, action)
    }

    fn new(type_: EventType, reason: impl Into<String>, action: impl Into<String>) -> EventDetails {
        EventDetails {
            type_,
            reason: reason.into(),
            action: action.into(),
            note: None,
            related: None,
        }
    }

    /// With a note.
    pub fn with_note(self, note: impl Into<String>) -> EventDetails {
        EventDetails {
            note: Some(note.into()),
            ..self
        }
    }

    /// With a related object.
    pub fn with_related(self, related: ObjectReference) -> EventDetails {
        EventDetails {
            related: Some(related),
            ..self
        }
    }
}
