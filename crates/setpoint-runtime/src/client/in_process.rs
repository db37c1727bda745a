//! The in-process transport: a `tower` service that hands each request to a handler function.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A `tower::Service` over a handler function: collects the request body (client requests are
/// never streamed) and returns the handler's response as it is, streaming body included.
pub struct InProcessService<F> {
    handler: Arc<F>,
}

impl<F> Clone for InProcessService<F> {
    fn clone(&self) -> Self {
        InProcessService {
            handler: self.handler.clone(),
        }
    }
}

impl<F> InProcessService<F> {
    /// A service answering with `handler`.
    pub fn new(handler: F) -> Self {
        InProcessService {
            handler: Arc::new(handler),
        }
    }
}

impl<F, Fut, B> tower::Service<http::Request<kube::client::Body>> for InProcessService<F>
where
    F: Fn(http::Request<Bytes>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = http::Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
{
    type Response = http::Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let handler = self.handler.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok(handler(http::Request::from_parts(parts, body)).await)
        })
    }
}
