//! Following each request of a connection for the table: it started, its body came
//! in, its response went out to its end — and whether it showed an accepted key.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, Response};
use futures::future::BoxFuture;
use http_body::{Frame, SizeHint};
use tower::{Service, ServiceExt};

use super::table::Slot;
use crate::settings::{ApiKey, key_for};

/// Where one request is; dropping it (with the request and its response body) ends it.
#[derive(Debug)]
pub(crate) struct Progress {
    slot: Arc<Slot>,
    answered: Mutex<bool>,
}

impl Progress {
    fn start(slot: Arc<Slot>) -> Arc<Self> {
        slot.request_started();
        Arc::new(Progress {
            slot,
            answered: Mutex::new(false),
        })
    }

    /// The request's body is in (or it had none): it is being answered.
    pub(crate) fn body_received(&self) {
        let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        if !*answered {
            *answered = true;
            self.slot.body_received();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let answered = *self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        self.slot.request_ended(answered);
    }
}

/// The router as one connection serves it: every request is followed in the table.
#[derive(Clone)]
pub(crate) struct Tracked {
    router: Router,
    slot: Arc<Slot>,
    keys: Arc<[ApiKey]>,
}

impl Tracked {
    pub(crate) fn new(router: Router, slot: Arc<Slot>, keys: Arc<[ApiKey]>) -> Self {
        Tracked { router, slot, keys }
    }
}

impl<B> Service<Request<B>> for Tracked
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if key_for(request.headers(), &self.keys).is_some() {
            self.slot.authenticate();
        }
        let progress = Progress::start(Arc::clone(&self.slot));
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(Arc::clone(&progress));
        let router = self.router.clone();
        Box::pin(async move {
            let response = router.oneshot(request).await?;
            // Answered, whatever became of its body.
            progress.body_received();
            Ok(response.map(|body| {
                Body::new(Reported {
                    inner: body,
                    _progress: progress,
                })
            }))
        })
    }
}

/// A response body that ends its request's progress when it is done with.
struct Reported {
    inner: Body,
    _progress: Arc<Progress>,
}

impl http_body::Body for Reported {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
