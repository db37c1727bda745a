//! `apiserver_longrunning_requests`: a watch counts from the moment it is answered until its
//! response body is dropped (the stream ended or the client went away); an upgraded stream
//! (`pods/exec`, …) while its splice runs ([`hold_longrunning`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

use super::{RequestLabels, Telemetry};
use crate::server::Body;

/// Counts the long-running request of `labels` while `response`'s body lives.
pub(crate) fn track_longrunning(
    telemetry: &Arc<Telemetry>,
    labels: RequestLabels,
    response: Response<Body>,
) -> Response<Body> {
    telemetry.longrunning(&labels, 1);
    let guard = Guard {
        telemetry: telemetry.clone(),
        labels,
    };
    response.map(|inner| {
        Body::new(Tracked {
            inner,
            _guard: guard,
        })
    })
}

/// Counts the long-running request of `labels` until the returned guard is dropped.
pub(crate) fn hold_longrunning(telemetry: &Arc<Telemetry>, labels: RequestLabels) -> Guard {
    telemetry.longrunning(&labels, 1);
    Guard {
        telemetry: telemetry.clone(),
        labels,
    }
}

/// Takes the request off the count when dropped.
pub(crate) struct Guard {
    telemetry: Arc<Telemetry>,
    labels: RequestLabels,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.telemetry.longrunning(&self.labels, -1);
    }
}

/// A response body that holds a [`Guard`].
struct Tracked {
    inner: Body,
    _guard: Guard,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
